/**
 * The package as npm packs it (docs/getting-started.md, "Install from the package"): `npm pack`, then `npm install
 * -g --prefix <scratch>` of the tarball, with no install-script warning; the installed `dagbot`
 * sets up the bot account's cross-signing and starts a node that answers a person whose client runs
 * as Element does since April 2026, in an encrypted room of a real Synapse. npm ignores a package's
 * `overrides` when it is installed as a dependency or globally, so the crypto stand-in matrix-bot-sdk
 * must get travels in the tarball (bundleDependencies; docs/architecture.md §12).
 */
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BotFleet } from "../support/bot-fleet.js";
import { replyTo } from "../support/bot-chat.js";
import { EncryptedPerson } from "../support/encrypted-person.js";
import { useSynapse } from "../support/matrix-fixture.js";
import { MatrixUser } from "../support/matrix-user.js";

const run = promisify(execFile);
const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const fx = useSynapse();
const T = 45_000;
const SIGNED_LINE = "end-to-end encryption ready; this device is cross-signed by its account";

let scratch: string;
let tarball: string;
let installed: string;
let dagbot: string;
let installOutput: string;
let fleet: BotFleet | undefined;
let person: EncryptedPerson | undefined;

beforeAll(async () => {
  scratch = mkdtempSync(join(tmpdir(), "dagbot-packed-"));
  const manifest = readFileSync(join(REPO_ROOT, "package.json"), "utf8");
  const packed = await run("npm", ["pack", "--pack-destination", scratch], {
    cwd: REPO_ROOT,
    maxBuffer: 64 << 20,
  });
  // npm pack's prepack and postpack rename `prepare` and back: the checkout's manifest is unchanged.
  expect(readFileSync(join(REPO_ROOT, "package.json"), "utf8")).toBe(manifest);
  tarball = join(scratch, packed.stdout.trim().split("\n").at(-1)!);
  const prefix = join(scratch, "prefix");
  // From the scratch folder: the checkout's .npmrc plays no part, as for someone given the tarball.
  const install = await run("npm", ["install", "-g", "--prefix", prefix, tarball], {
    cwd: scratch,
    maxBuffer: 64 << 20,
  });
  installOutput = install.stdout + install.stderr;
  installed = join(prefix, "lib", "node_modules", "dagbot");
  dagbot = join(prefix, "bin", "dagbot");
}, 300_000);

afterAll(async () => {
  person?.stop();
  await fleet?.dispose();
  if (scratch !== undefined) rmSync(scratch, { recursive: true, force: true });
});

describe("the packed package, installed with npm install -g", () => {
  it("installs without an install-script warning, with its LICENSE and the crypto stand-in matrix-bot-sdk needs", async () => {
    expect(installOutput).toMatch(/added \d+ packages/);
    expect(installOutput).not.toMatch(/install-scripts|allowScripts|allow-scripts/);
    const files = (await run("tar", ["tzf", tarball], { maxBuffer: 64 << 20 })).stdout.split("\n");
    expect(files).toContain("package/LICENSE");
    const shipped = JSON.parse(readFileSync(join(installed, "package.json"), "utf8")) as {
      scripts: Record<string, string>;
      license: string;
    };
    expect(shipped.license).toBe("Apache-2.0");
    expect(shipped.scripts["prepare"]).toBeUndefined();
    expect(readFileSync(join(installed, "LICENSE"), "utf8")).toBe(
      readFileSync(join(REPO_ROOT, "LICENSE"), "utf8"),
    );
    // matrix-bot-sdk resolves the bundled stand-in, not a native package of its own.
    const nested = join(
      installed,
      "node_modules/matrix-bot-sdk/node_modules/@matrix-org/matrix-sdk-crypto-nodejs",
    );
    expect(existsSync(nested)).toBe(false);
    const standIn = JSON.parse(
      readFileSync(join(installed, "node_modules/@matrix-org/matrix-sdk-crypto-nodejs/package.json"), "utf8"),
    ) as { description: string };
    expect(standIn.description).toMatch(/dagbot's offline stand-in/);
    const version = await run(dagbot, ["--version"]);
    expect(version.stdout).toMatch(/^dagbot \d+\.\d+\.\d+ \(store schema \d+, fleet protocol \d+\)/);
  });

  it("starts a node in an encrypted room that a person in the 2026 mode reads, and answers them", async () => {
    const { hs } = fx;
    const bot = await hs.registerUser("packbot", { deviceId: "PACKBOT1" });
    const who = await hs.registerUser("pat", { deviceId: "PATLAPTOP" });
    const roomId = (
      await new MatrixUser(hs.url, who).request("POST", "/_matrix/client/v3/createRoom", {
        preset: "private_chat",
        invite: [bot.userId],
        initial_state: [
          { type: "m.room.encryption", state_key: "", content: { algorithm: "m.megolm.v1.aes-sha2" } },
        ],
      })
    ).room_id as string;
    const recoveryKeyFile = join(scratch, "packbot.recovery-key");
    fleet = new BotFleet({
      hs,
      bots: [bot],
      rooms: [roomId],
      tokenFiles: true,
      nodeMatrix: () => ({ recovery_key_file: recoveryKeyFile }),
      command: dagbot,
    });
    const tokenFile = join(scratch, "node1.token");
    writeFileSync(tokenFile, `${bot.accessToken}\n`, { mode: 0o600 });
    // The installed package's crypto makes the account's cross-signing keys...
    const setup = await run(dagbot, [
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
    // ... and the node it starts signs its device with them and reads the encrypted room.
    await fleet.start(0);
    await fleet.waitForLog(0, (text) => text.includes(SIGNED_LINE), T, "the signed start line");
    person = await EncryptedPerson.start(hs.url, who, { mode: "2026" });
    const asked = await person.sendText(roomId, "!dag help");
    const reply = await person.waitFor(replyTo(asked), T, "the reply to !dag help");
    expect(reply.encrypted).toBe(true);
    expect(reply.sender).toBe(bot.userId);
    expect(String(reply.content["body"])).toMatch(/^dagbot commands\n[^]*`publish`/);
    expect([...person.undecryptable.values()]).toEqual([]);
  }, 120_000);
});
