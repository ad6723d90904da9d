/**
 * Encrypted rooms as Element runs them since April 2026 (docs/architecture.md §12), on a real
 * Synapse: the person runs matrix-js-sdk with their own account cross-signed and
 * OnlySignedDevicesIsolationMode (no room keys for devices their owner did not cross-sign, nothing
 * shown from them). The fleet is one bot account with a device per node, set up as the page
 * docs/encryption.md says: a token per node for a fixed device id, `dagbot crypto setup` once
 * with a token file, each node given the recovery key file. Publish, confirm, an approval gate,
 * cards and final message read by the person; a leader killed with a gate open, whose card the next
 * leader (another device of the same account) edits, then restarted to lead and answer again; and a
 * node whose device is not signed, which the person's client excludes and which says why in its log,
 * its readiness and the fleet's `!dag nodes`.
 */
import { execFile, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { createServer } from "node:net";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { openSqliteStore } from "../../src/adapters/sqlite/index.js";
import type { Store } from "../../src/ports/store.js";
import { BotFleet, CLI } from "../support/bot-fleet.js";
import { cardEditSaying, cardOf, pictureFor, publishJson, replyTo, txnOf } from "../support/bot-chat.js";
import { EncryptedPerson, type PersonEvent } from "../support/encrypted-person.js";
import { useSynapse } from "../support/matrix-fixture.js";
import { MatrixUser } from "../support/matrix-user.js";
import { waitFor } from "../support/store-wait.js";
import type { RegisteredUser } from "../support/synapse.js";

/** matrix.decrypt_grace of the fleet's nodes, in seconds. */
const DECRYPT_GRACE_S = 5;

const run = promisify(execFile);
const fx = useSynapse();
const T = 45_000;
let fleet: BotFleet;
let store: Store;
let roomId: string;
let erin: EncryptedPerson;
let account: RegisteredUser;
let recoveryKeyFile: string;
let secretsDir: string;
/** The three nodes' devices of the one bot account; the third is never given the recovery key. */
const DEVICES = ["DAGBOT1", "DAGBOT2", "DAGBOT3"];

const body = (e: PersonEvent): string => (typeof e.content["body"] === "string" ? e.content["body"] : "");

/** A token for a fixed device id: what `mas-cli manage issue-compatibility-token` gives behind MAS. */
async function deviceToken(url: string, user: RegisteredUser, deviceId: string): Promise<RegisteredUser> {
  const res = await fetch(`${url}/_matrix/client/v3/login`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      type: "m.login.password",
      identifier: { type: "m.id.user", user: user.localpart },
      password: user.password,
      device_id: deviceId,
    }),
  });
  const json = (await res.json()) as Record<string, unknown>;
  if (res.status !== 200) throw new Error(`login ${deviceId}: HTTP ${res.status} ${JSON.stringify(json)}`);
  return { ...user, accessToken: String(json["access_token"]), deviceId };
}

async function command(text: string): Promise<{ id: string; reply: PersonEvent }> {
  const id = await erin.sendText(roomId, text);
  const reply = await erin.waitFor(replyTo(id), T, `the reply to ${JSON.stringify(text.slice(0, 40))}`);
  return { id, reply };
}

const OPS_TOKEN = "cross-signed-test-ops-token-0123456789";
const sha = (t: string): string => createHash("sha256").update(t).digest("hex");
let httpPort: number;

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => resolve(typeof address === "object" && address !== null ? address.port : 0));
    });
  });
}

async function readyz(token?: string): Promise<{ status: number; checks: Record<string, string> }> {
  const res = await fetch(`http://127.0.0.1:${httpPort}/readyz`, {
    headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
  });
  return { status: res.status, checks: ((await res.json()) as { checks: Record<string, string> }).checks };
}

const SIGNED_LINE = "end-to-end encryption ready; this device is cross-signed by its account";
const UNSIGNED_LINE = "end-to-end encryption ready; this device is NOT cross-signed by its account";

beforeAll(async () => {
  const { hs } = fx;
  account = await hs.registerUser("dagbot", { deviceId: DEVICES[0] });
  const devices = [account];
  for (const d of DEVICES.slice(1)) devices.push(await deviceToken(hs.url, account, d));
  const e = await hs.registerUser("erin", { deviceId: "ERINLAPTOP" });
  const erinHttp = new MatrixUser(hs.url, e);
  const created = await erinHttp.request("POST", "/_matrix/client/v3/createRoom", {
    preset: "private_chat",
    name: "encrypted, 2026",
    invite: [account.userId],
    initial_state: [
      { type: "m.room.encryption", state_key: "", content: { algorithm: "m.megolm.v1.aes-sha2" } },
    ],
  });
  roomId = created.room_id;
  httpPort = await freePort();
  secretsDir = mkdtempSync(join(tmpdir(), "dagbot-secrets-"));
  recoveryKeyFile = join(secretsDir, "dagbot.recovery-key");
  fleet = new BotFleet({
    hs,
    bots: devices,
    rooms: [roomId],
    config: { permissions: { power_level: 50 } },
    // Shorter than the default 15 s, so the undecryptable cases wait seconds, not half a minute.
    matrix: { decrypt_grace: `${DECRYPT_GRACE_S}s` },
    tokenFiles: true,
    nodeMatrix: (i) => (i < 2 ? { recovery_key_file: recoveryKeyFile } : {}),
    // The unsigned node serves /readyz, whose detail (for a token) says why it is not ready.
    nodeConfig: (i) =>
      i === 2
        ? {
            http: {
              listen: `127.0.0.1:${httpPort}`,
              tokens: [{ name: "ops", sha256: sha(OPS_TOKEN), level: "read" }],
            },
          }
        : {},
  });

  // docs/encryption.md: the one-time set-up, with node 1's token in an owner-only file (the one its
  // config names as access_token_file).
  const tokenFile = join(secretsDir, "node1.token");
  writeFileSync(tokenFile, `${account.accessToken}\n`, { mode: 0o600 });
  const setup = await run(process.execPath, [
    CLI,
    "crypto",
    "setup",
    "--config",
    fleet.nodes[0]!.configPath,
    "--token-file",
    tokenFile,
    "--recovery-key-file",
    recoveryKeyFile,
  ]);
  expect(setup.stdout).toMatch(/has cross-signing keys now/);
  // The recovery key is never printed, only written, owner-only.
  const recoveryKey = readFileSync(recoveryKeyFile, "utf8").trim();
  expect(recoveryKey).toMatch(/^(\w{4} ){11}\w{4}$/);
  expect(statSync(recoveryKeyFile).mode & 0o777).toBe(0o600);
  expect(setup.stdout + setup.stderr).not.toContain(recoveryKey);

  await Promise.all([fleet.start(0), fleet.start(1)]);
  store = await openSqliteStore(fleet.storePath);
  for (;;) {
    if ((await erinHttp.joinedMembers(roomId)).includes(account.userId)) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  // Each node says at start that its device is cross-signed (after signing it).
  for (const i of [0, 1]) {
    await fleet.waitForLog(i, (text) => text.includes(SIGNED_LINE), T, "the signed start line");
  }
  erin = await EncryptedPerson.start(hs.url, e, { mode: "2026" });
}, 240_000);

afterEach((ctx) => {
  if (ctx.task.result?.state === "fail") {
    fleet?.keepDir();
    console.error(fleet?.tails(25));
  }
});

afterAll(async () => {
  erin?.stop();
  await store?.close();
  await fleet?.dispose();
  if (secretsDir !== undefined) rmSync(secretsDir, { recursive: true, force: true });
});

describe("a person in the 2026 mode (cross-signed, OnlySignedDevicesIsolationMode) and a cross-signed fleet of one account", () => {
  it("the person's client sees each node's device as signed by the bot account", async () => {
    const crypto = erin.client.getCrypto()!;
    await crypto.getUserDeviceInfo([account.userId], true);
    for (const d of DEVICES.slice(0, 2)) {
      const status = await crypto.getDeviceVerificationStatus(account.userId, d);
      expect(status?.signedByOwner, d).toBe(true);
    }
    expect(fleet.logLines(0, "signed this device with the account's self-signing key")).toHaveLength(1);
  });

  it("the set-up runs once per account: a second run changes nothing; a password works too and its sign-in goes again", async () => {
    const setup = (args: string[]) =>
      run(process.execPath, [CLI, "crypto", "setup", "--config", fleet.nodes[0]!.configPath, ...args]).then(
        (r) => ({ code: 0, ...r }),
        (e: { code: number; stdout: string; stderr: string }) => e,
      );
    const again = join(secretsDir, "again.recovery-key");
    const tokenFile = join(secretsDir, "node1.token");
    const second = await setup(["--token-file", tokenFile, "--recovery-key-file", again]);
    expect(second.code).toBe(1);
    expect(second.stderr).toMatch(/already has cross-signing keys; nothing was changed/);
    expect(existsSync(again)).toBe(false);
    const existing = await setup(["--token-file", tokenFile, "--recovery-key-file", recoveryKeyFile]);
    expect(existing.code).toBe(2);
    expect(existing.stderr).toMatch(/exists; the recovery key is written once/);

    // Another account, set up with its password (read from a file); its config names that account.
    const other = await fx.hs.registerUser("dagbotpw", { deviceId: "PWBOT1" });
    const config = JSON.parse(readFileSync(fleet.nodes[0]!.configPath, "utf8")) as {
      matrix: Record<string, unknown>;
    };
    config.matrix["user_id"] = other.userId;
    const otherConfig = join(secretsDir, "other.json");
    writeFileSync(otherConfig, JSON.stringify(config));
    const passwordFile = join(secretsDir, "password");
    writeFileSync(passwordFile, `${other.password}\n`, { mode: 0o600 });
    const otherKey = join(secretsDir, "other.recovery-key");
    const withPassword = await run(process.execPath, [
      CLI,
      "crypto",
      "setup",
      "--config",
      otherConfig,
      "--password-file",
      passwordFile,
      "--recovery-key-file",
      otherKey,
    ]);
    expect(withPassword.stdout).toMatch(/@dagbotpw:localhost has cross-signing keys now/);
    const devices = await new MatrixUser(fx.hs.url, other).request("GET", "/_matrix/client/v3/devices");
    expect((devices.devices as { device_id: string }[]).map((d) => d.device_id)).toEqual(["PWBOT1"]);

    // Without a file, the token is read from stdin (the prompt's input on a terminal).
    const third = await fx.hs.registerUser("dagbotstdin", { deviceId: "STDINBOT1" });
    config.matrix["user_id"] = third.userId;
    writeFileSync(otherConfig, JSON.stringify(config));
    const stdinKey = join(secretsDir, "stdin.recovery-key");
    const child = spawn(process.execPath, [
      CLI,
      "crypto",
      "setup",
      "--config",
      otherConfig,
      "--recovery-key-file",
      stdinKey,
    ]);
    let out = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stdin.end(`${third.accessToken}\n`);
    const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
    expect(code).toBe(0);
    expect(out).toMatch(/@dagbotstdin:localhost has cross-signing keys now/);
    expect(out).not.toContain(third.accessToken);
    // Three set-ups, each a node process loading the crypto: slow on a busy 2-core machine.
  }, 90_000);

  it("publish → confirm → gate approved → succeeded: replies, card, gate message, final message and picture all readable", async () => {
    const dag = {
      id: "signed_release",
      tasks: [
        { id: "build", action: "echo", args: { message: "built in 2026" } },
        {
          id: "ok",
          needs: ["build"],
          approve: { who: "operators", description: "ship it", publisher_may_approve: true },
        },
        { id: "deploy", action: "echo", args: { message: "deployed" }, needs: ["ok"] },
      ],
    };
    const published = await command(publishJson(dag));
    expect(published.reply.encrypted).toBe(true);
    const card = await erin.waitFor(cardOf("signed_release"), T, "the status card");
    expect(card.sender).toBe(account.userId);
    const confirmed = await command("!dag confirm signed_release");
    expect(body(confirmed.reply)).toMatch(/confirmed/);
    const gate = await erin.waitFor(
      (e) => body(e).startsWith("🚦") && body(e).includes("approve `signed_release/ok`"),
      T,
      "the gate's message",
    );
    expect(gate.encrypted).toBe(true);
    const approved = await command("!dag approve signed_release ok");
    expect(body(approved.reply)).toContain("approved `signed_release/ok`");
    await erin.waitFor(cardEditSaying(card.event_id, /succeeded/), T, "the card edited to succeeded");
    const final = await erin.waitFor(
      (e) => txnOf(e)?.startsWith("final.") === true && body(e).includes("signed_release"),
      T,
      "the final message",
    );
    expect(final.encrypted).toBe(true);
    expect((await store.getRun(roomId, "signed_release"))?.status).toBe("succeeded");
    // The run's picture: an encrypted m.image the person's client decrypts.
    const asked = await command("!dag graph signed_release");
    const image = await erin.waitFor(pictureFor(asked.id), T, "the picture");
    expect(image.encrypted).toBe(true);
    expect(image.content["msgtype"]).toBe("m.image");
    // Nothing the fleet sent was hidden from the person.
    const hidden = [...erin.undecryptable.values()];
    expect(hidden).toEqual([]);
  });

  it("a leader killed with a gate open: the next node, another device of the account, edits the same card to the end; restarted, the first node leads and answers again", async () => {
    const dag = {
      id: "signed_failover",
      tasks: [
        {
          id: "ok",
          approve: { who: "operators", description: "after the failover", publisher_may_approve: true },
        },
        { id: "after", action: "echo", args: { message: "after the gate" }, needs: ["ok"] },
      ],
    };
    await command(publishJson(dag));
    const card = await erin.waitFor(cardOf("signed_failover"), T, "the status card");
    await command("!dag confirm signed_failover");
    await erin.waitFor(
      (e) => body(e).startsWith("🚦") && body(e).includes("approve `signed_failover/ok`"),
      T,
      "the gate's message",
    );
    const lease = await store.getLease(roomId);
    const leader = fleet.nodes.findIndex((n) => n.nodeId === lease?.holder?.nodeId);
    expect(leader).toBeGreaterThanOrEqual(0);
    await fleet.kill(leader);
    const other = leader === 0 ? 1 : 0;
    await waitFor(
      "the other node to lead",
      () => store.getLease(roomId),
      (l) => l?.holder?.nodeId === fleet.nodes[other]!.nodeId && l.expiresAt > l.now,
      { timeoutMs: T, intervalMs: 200 },
    );
    const approved = await command("!dag approve signed_failover ok");
    expect(body(approved.reply)).toContain("approved `signed_failover/ok`");
    // The edit comes from the same account as the card, so clients apply it.
    const edit = await erin.waitFor(
      cardEditSaying(card.event_id, /succeeded/),
      T,
      "the card edited to succeeded",
    );
    expect(edit.sender).toBe(card.sender);
    expect([...erin.undecryptable.values()]).toEqual([]);
    await fleet.start(leader);
    await fleet.waitForLog(
      leader,
      (text) => text.split(SIGNED_LINE).length > 2,
      T,
      "the signed start line again",
    );
    // Restarted, the same device is still signed: nothing to sign again.
    expect(fleet.logLines(leader, "signed this device with the account's self-signing key")).toHaveLength(1);
    // The final message the second leader sent is readable.
    const final = await erin.waitFor(
      (e) => txnOf(e)?.startsWith("final.") === true && body(e).includes("signed_failover"),
      T,
      "the final message",
    );
    expect(final.encrypted).toBe(true);
    // The restarted node leads again (the other stops): with its kept device it reads the person
    // and answers, a picture included.
    await fleet.stop(other);
    await waitFor(
      "the restarted node to lead",
      () => store.getLease(roomId),
      (l) => l?.holder?.nodeId === fleet.nodes[leader]!.nodeId && l.expiresAt > l.now,
      { timeoutMs: T, intervalMs: 200 },
    );
    const asked = await command("!dag graph signed_failover");
    expect(asked.reply.encrypted).toBe(true);
    const image = await erin.waitFor(pictureFor(asked.id), T, "the picture from the restarted leader");
    expect(image.encrypted).toBe(true);
    expect(image.content["msgtype"]).toBe("m.image");
    expect([...erin.undecryptable.values()]).toEqual([]);
  }, 150_000);

  it("a node whose device is not signed says so at start, cannot read the person, and says why in its log and in `!dag nodes`", async () => {
    await fleet.stop(0);
    await fleet.stop(1);
    // A signed node leads, so the person can read the fleet's answers; the unsigned node joins it.
    await fleet.start(0);
    await waitFor(
      "node1 to lead",
      () => store.getLease(roomId),
      (l) => l?.holder?.nodeId === fleet.nodes[0]!.nodeId && l.expiresAt > l.now,
      { timeoutMs: T, intervalMs: 200 },
    );
    await fleet.start(2);
    await fleet.waitForLog(2, (text) => text.includes(UNSIGNED_LINE), T, "the unsigned start line");
    const loud = fleet.logLines(2, "this device is not cross-signed");
    expect(loud).toHaveLength(1);
    expect(loud[0]!["level"]).toBe("error");
    expect(String(loud[0]!["err"])).toMatch(/no recovery key is configured/);
    // Not ready, and why, for a caller with a token; only "failing" without one.
    const unsigned = await readyz(OPS_TOKEN);
    expect(unsigned.status).toBe(503);
    expect(unsigned.checks["crypto"]).toMatch(/^device DAGBOT3 is not cross-signed by @dagbot:localhost/);
    expect((await readyz()).checks["crypto"]).toBe("failing");

    // The signed leader reads and answers; the unsigned node gets no room key for it.
    const help = await command("!dag help");
    expect(help.reply.sender).toBe(account.userId);
    // Retried for its grace time, then given up at the next batch: chatter makes one.
    await new Promise((r) => setTimeout(r, (DECRYPT_GRACE_S + 1) * 1000));
    await erin.sendText(roomId, "chatter after the grace time");
    await fleet.waitForLog(
      2,
      () => fleet.logLines(2, "cannot decrypt an event").some((l) => l["event"] === help.id),
      T,
      "the decryption failure",
    );
    const failure = fleet.logLines(2, "cannot decrypt an event").find((l) => l["event"] === help.id);
    const withheld = /^withheld: the sender encrypts only to verified devices.*withheld_code=m\.unverified/;
    expect(String(failure?.["err"])).toMatch(withheld);
    // The last failure's reason is in the node's readiness detail too.
    expect((await readyz(OPS_TOKEN)).checks["crypto"]).toMatch(
      /could not be decrypted: withheld: the sender encrypts only to verified devices/,
    );
    // And in the fleet's `!dag nodes`, read by the person from the room: the node's heartbeat
    // carries the reason and its device's state (docs/architecture.md §12).
    const unsignedId = fleet.nodes[2]!.nodeId;
    await waitFor(
      "the unsigned node's heartbeat to carry the reason",
      () => store.listNodes(),
      (list) => list.some((n) => n.session.nodeId === unsignedId && n.undecryptableReason !== null),
      { timeoutMs: T, intervalMs: 250 },
    );
    // One line per node (the head names the leader).
    const listed = body((await command("!dag nodes")).reply)
      .split("\n")
      .filter((l) => l.includes("heartbeat"));
    const signedLine = listed.find((l) => l.includes(`\`${fleet.nodes[0]!.nodeId}\``));
    const unsignedLine = listed.find((l) => l.includes(`\`${unsignedId}\``));
    expect(signedLine).toContain("· device cross-signed");
    expect(signedLine).not.toMatch(/undecryptable/);
    expect(unsignedLine).toContain("device NOT cross-signed");
    expect(unsignedLine).toMatch(
      /undecryptable events? \(last: withheld: the sender encrypts only to verified devices, and this device is not cross-signed by its owner/,
    );

    // Alone, the unsigned node leads: what it answers, the person's client does not show, and
    // reports the device.
    await fleet.stop(0);
    await waitFor(
      "the unsigned node to lead",
      () => store.getLease(roomId),
      (l) => l?.holder?.nodeId === unsignedId && l.expiresAt > l.now,
      { timeoutMs: T, intervalMs: 200 },
    );
    const unread = await erin.sendText(roomId, "!dag help");
    await new Promise((r) => setTimeout(r, (DECRYPT_GRACE_S + 1) * 1000));
    await erin.sendText(roomId, "more chatter after the grace time");
    await waitFor(
      "the person's client to refuse the unsigned node's answer",
      () => Promise.resolve([...erin.undecryptable.values()]),
      (reasons) => reasons.includes("UNSIGNED_SENDER_DEVICE"),
      { timeoutMs: T, intervalMs: 250 },
    );
    expect(fleet.logLines(2, "cannot decrypt an event").some((l) => l["event"] === unread)).toBe(true);
    expect(erin.events(roomId).some((e) => txnOf(e) === `reply.${unread}`)).toBe(false);
  }, 180_000);

  it("no node's log holds the recovery key or a token", () => {
    const recoveryKey = readFileSync(recoveryKeyFile, "utf8").trim();
    const secrets = [
      recoveryKey,
      recoveryKey.replace(/ /g, ""),
      ...fleet.nodes.map((n) => n.bot.accessToken),
    ];
    const logs = fleet.nodes.map((n) => fleet.logText(n.index));
    expect(logs.join("").length).toBeGreaterThan(0);
    for (const [i, log] of logs.entries()) {
      for (const secret of secrets) expect(log.includes(secret), `node${i + 1}'s log`).toBe(false);
    }
  });
});
