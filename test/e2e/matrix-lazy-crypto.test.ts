/**
 * The WASM crypto is loaded only when a room needs it (an idle bot's memory, bench/README.md): a `dagbot start`
 * process with encryption on (the default) in a room in the clear answers in the clear and never
 * loads matrix-bot-sdk, @matrix-org/matrix-sdk-crypto-wasm or fake-indexeddb (seen in a module trace
 * of the real process, test/support/module-trace.mjs). When a person turns encryption on in that room, the node
 * loads its crypto, syncs the batch again with it, and answers the person's encrypted command
 * encrypted (a matrix-js-sdk client with its Rust crypto reads it).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { BotFleet } from "../support/bot-fleet.js";
import { bodyOf, replyTo } from "../support/bot-chat.js";
import { EncryptedPerson } from "../support/encrypted-person.js";
import { useSynapse } from "../support/matrix-fixture.js";
import { MatrixUser } from "../support/matrix-user.js";
import { waitFor } from "../support/store-wait.js";
import type { RegisteredUser } from "../support/synapse.js";

const TRACE = fileURLToPath(new URL("../support/module-trace.mjs", import.meta.url));
const CRYPTO_MODULES = [
  "/node_modules/matrix-bot-sdk/",
  "/node_modules/@matrix-org/matrix-sdk-crypto-wasm/",
  "/node_modules/fake-indexeddb/",
];
const T = 45_000;

const fx = useSynapse();
let fleet: BotFleet;
let bot: RegisteredUser;
let erin: EncryptedPerson;
let erinHttp: MatrixUser;
let roomId: string;
let traceDir: string;
let traceFile: string;

const loaded = (): string[] => readFileSync(traceFile, "utf8").split("\n").filter(Boolean);
const cryptoLoaded = (): string[] => loaded().filter((u) => CRYPTO_MODULES.some((m) => u.includes(m)));

beforeAll(async () => {
  const { hs } = fx;
  bot = await hs.registerUser("lazybot1", { deviceId: "LAZYBOT1" });
  const e = await hs.registerUser("erin", { deviceId: "ERINLAPTOP" });
  erinHttp = new MatrixUser(hs.url, e);
  roomId = await hs.createRoom(e.accessToken, { name: "clear for now", invite: [bot.userId] });
  traceDir = mkdtempSync(join(tmpdir(), "dagbot-trace-"));
  traceFile = join(traceDir, "modules");
  writeFileSync(traceFile, "");
  fleet = new BotFleet({
    hs,
    bots: [bot],
    rooms: [roomId],
    config: { permissions: { power_level: 50 } },
    nodeArgs: ["--import", TRACE],
    env: { DAGBOT_MODULE_TRACE: traceFile },
  });
  await fleet.startAll();
  erin = await EncryptedPerson.start(hs.url, e);
}, 180_000);

afterEach((ctx) => {
  if (ctx.task.result?.state === "fail") {
    fleet?.keepDir();
    console.error(fleet?.tails(40));
  }
});

afterAll(async () => {
  erin?.stop();
  await fleet?.dispose();
  rmSync(traceDir, { recursive: true, force: true });
});

describe("the WASM crypto, loaded only for an encrypted room", () => {
  it("in a room in the clear: answers in the clear, no crypto module loaded", async () => {
    const id = await erin.sendText(roomId, "!dag help");
    const reply = await erin.waitFor(replyTo(id), T, "the reply to !dag help");
    expect(reply.encrypted).toBe(false);
    expect(bodyOf(reply)).toMatch(/publish/);
    // The trace is live: the store driver is in it; matrix-bot-sdk is not (the node syncs itself).
    expect(loaded().some((u) => u.includes("/node_modules/better-sqlite3/"))).toBe(true);
    expect(cryptoLoaded()).toEqual([]);
    expect(fleet.logText(0)).not.toContain('"msg":"end-to-end encryption ready');
  });

  it("when the room turns encrypted: the node loads its crypto and answers encrypted", async () => {
    await erinHttp.request(
      "PUT",
      `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/state/m.room.encryption/`,
      {
        algorithm: "m.megolm.v1.aes-sha2",
      },
    );
    // The line goes on to say whether the device is cross-signed (this account has no such keys).
    await fleet.waitForLog(0, (t) => t.includes('"msg":"end-to-end encryption ready'), T, "its crypto");
    expect(
      fleet.logLines(0, "a configured room turned encrypted: loading this device's crypto"),
    ).toHaveLength(1);
    for (const m of CRYPTO_MODULES)
      expect(
        loaded().some((u) => u.includes(m)),
        m,
      ).toBe(true);
    // The person's client learns the bot's new device keys (as any client does, from its sync).
    await waitFor(
      "erin's client to know the bot's device",
      async () => (await erin.client.getCrypto()!.getUserDeviceInfo([bot.userId], true)).get(bot.userId),
      (devices) => devices?.has(bot.deviceId) === true,
      { timeoutMs: T, intervalMs: 250 },
    );
    const id = await erin.sendText(roomId, "!dag help");
    const reply = await erin.waitFor(replyTo(id), T, "the encrypted reply to !dag help");
    expect(reply.encrypted).toBe(true);
    expect(bodyOf(reply)).toMatch(/publish/);
    // Served by the same process: it never restarted.
    expect(fleet.running(0)).toBe(true);
    expect(fleet.logLines(0, "matrix intake ready")).toHaveLength(1);
  });
});
