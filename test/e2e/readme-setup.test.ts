/**
 * The encrypted set-up of docs/encryption.md (Set-up steps 1–4) run as written, on a real Synapse
 * that, like one behind Matrix Authentication Service, refuses password logins: the node's token
 * comes from Synapse's admin API and a login token (step 1's admin commands, read from that page),
 * `dagbot crypto setup` runs with the page's arguments, the node's config is the page's TOML
 * block, and `dagbot start` starts it. Only the homeserver's URL, the account, the room and the
 * `/etc/dagbot/` folder are put in for the test's own; a person in the 2026 mode then gets an answer.
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, openSync, closeSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { parse as parseToml, stringify as stringifyToml } from "smol-toml";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { CLI } from "../support/bot-fleet.js";
import { replyTo } from "../support/bot-chat.js";
import { EncryptedPerson } from "../support/encrypted-person.js";
import { useSynapse } from "../support/matrix-fixture.js";
import { MatrixUser } from "../support/matrix-user.js";
import type { RegisteredUser } from "../support/synapse.js";

const run = promisify(execFile);
const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const T = 45_000;
// As behind MAS: no password login. Login tokens from an existing session, as step 1 asks.
const fx = useSynapse({
  extraConfig: {
    password_config: { enabled: false },
    login_via_existing_session: { enabled: true, require_ui_auth: false },
  },
});

/** The manual's encryption page, docs/encryption.md, whole. */
function encryptionSection(): string {
  const page = readFileSync(join(REPO_ROOT, "docs", "encryption.md"), "utf8");
  expect(page.startsWith("# Encryption\n")).toBe(true);
  return page;
}

/** The indented code block (a list item's, 7 spaces) that first follows `after` in `text`. */
function codeBlockAfter(text: string, after: string): string {
  const at = text.indexOf(after);
  expect(at, `docs/encryption.md: "${after}"`).toBeGreaterThanOrEqual(0);
  const lines = text.slice(at).split("\n");
  const first = lines.findIndex((l) => l.startsWith("       "));
  const block: string[] = [];
  for (const l of lines.slice(first)) {
    if (!l.startsWith("       ")) break;
    block.push(l.slice(7));
  }
  return block.join("\n");
}

let scratch: string;
let bot: RegisteredUser;
let person: EncryptedPerson | undefined;
let node: ChildProcess | undefined;
let logPath: string;
let failed = false;

beforeAll(() => {
  scratch = mkdtempSync(join(tmpdir(), "dagbot-readme-"));
  logPath = join(scratch, "node1.log");
});

afterEach((ctx) => {
  if (ctx.task.result?.state === "fail") {
    failed = true;
    console.error(`kept ${scratch}; node log tail:\n${readLog().split("\n").slice(-25).join("\n")}`);
  }
});

afterAll(async () => {
  person?.stop();
  if (node !== undefined && node.exitCode === null) {
    const exited = new Promise((r) => node!.once("exit", r));
    node.kill("SIGTERM");
    await exited;
  }
  if (!failed && scratch !== undefined) rmSync(scratch, { recursive: true, force: true });
});

const readLog = (): string => {
  try {
    return readFileSync(logPath, "utf8");
  } catch {
    return "";
  }
};

/** The page's words with the test's homeserver, account, room and folder put in. */
function ours(text: string, roomId = ""): string {
  return text
    .replaceAll("https://matrix.example.org", fx.hs.url)
    .replaceAll("@dagbot:example.org", bot.userId)
    .replaceAll("!abc:example.org", roomId)
    .replaceAll("/etc/dagbot/", `${scratch}/`);
}

describe("the encrypted set-up of docs/encryption.md, word for word, with a token from Synapse's admin API", () => {
  it("gets a device's token without the password, sets up cross-signing, starts a node and answers a person in the 2026 mode", async () => {
    const { hs } = fx;
    const admin = await hs.registerUser("admin", { admin: true });
    bot = await hs.registerUser("dagbot");
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
    // This homeserver has no password login: step 1's password way is refused here.
    const refused = await fetch(`${hs.url}/_matrix/client/v3/login`, {
      method: "POST",
      body: JSON.stringify({
        type: "m.login.password",
        identifier: { type: "m.id.user", user: bot.localpart },
        password: bot.password,
        device_id: "DAGBOT1",
      }),
    });
    expect(refused.status).toBeGreaterThanOrEqual(400);

    const section = encryptionSection();
    // Step 1, the admin way, and the line that keeps the token in an owner-only file.
    const tokenCommands = codeBlockAfter(section, "Or, on Synapse without MAS");
    expect(tokenCommands).toContain("/_synapse/admin/v1/users/@dagbot:example.org/login");
    const keep = /`(umask 077; printf [^`]+node1\.token)`/.exec(section)?.[1];
    expect(keep).toBeDefined();
    await run("bash", ["-euo", "pipefail", "-c", ours(`${tokenCommands}\n${keep!}`)], {
      env: { ...process.env, ADMIN_TOKEN: admin.accessToken },
    });
    const tokenFile = join(scratch, "node1.token");
    const token = readFileSync(tokenFile, "utf8").trim();
    expect(statSync(tokenFile).mode & 0o777).toBe(0o600);
    const whoami = await new MatrixUser(hs.url, { ...bot, accessToken: token }).request(
      "GET",
      "/_matrix/client/v3/account/whoami",
    );
    expect(whoami).toMatchObject({ user_id: bot.userId, device_id: "DAGBOT1" });

    // Step 3's config (written first: step 2 names it), the page's [matrix] table as written,
    // with the node's own id and store beside it.
    const toml = /```toml\n([^]*?)```/.exec(section)?.[1];
    expect(toml).toBeDefined();
    const config = parseToml(ours(toml!, roomId)) as Record<string, unknown>;
    expect(Object.keys(config)).toEqual(["matrix"]);
    const configPath = join(scratch, "node1.toml");
    writeFileSync(
      configPath,
      stringifyToml({ node_id: "node1", store: `sqlite:${join(scratch, "dagbot.db")}`, ...config }),
    );

    // Step 2, as written, with this checkout's `dagbot`.
    const setupCommand = codeBlockAfter(section, "2. Make the account's cross-signing keys");
    expect(setupCommand).toMatch(/^dagbot crypto setup --config node1\.toml --token-file /);
    const setup = await run(
      "bash",
      ["-euo", "pipefail", "-c", `dagbot() { "${process.execPath}" "${CLI}" "$@"; }\n${ours(setupCommand)}`],
      { cwd: scratch },
    );
    expect(setup.stdout).toMatch(/has cross-signing keys now/);
    expect(statSync(join(scratch, "dagbot.recovery-key")).mode & 0o777).toBe(0o600);

    // Step 4, as written.
    const start = /`(dagbot start --config node1\.toml)`/.exec(section)?.[1];
    expect(start).toBeDefined();
    const logFd = openSync(logPath, "a");
    node = spawn("bash", ["-c", `dagbot() { exec "${process.execPath}" "${CLI}" "$@"; }\n${start!}`], {
      cwd: scratch,
      stdio: ["ignore", logFd, logFd],
      env: { ...process.env, DAGBOT_LOG_LEVEL: "info", XDG_STATE_HOME: join(scratch, "state") },
    });
    closeSync(logFd);
    const deadline = Date.now() + T;
    while (!readLog().includes("this device is cross-signed by its account")) {
      if (node.exitCode !== null) throw new Error(`the node exited ${node.exitCode}`);
      if (Date.now() > deadline) throw new Error("no signed start line");
      await new Promise((r) => setTimeout(r, 250));
    }

    person = await EncryptedPerson.start(hs.url, who, { mode: "2026" });
    const asked = await person.sendText(roomId, "!dag help");
    const reply = await person.waitFor(replyTo(asked), T, "the reply to !dag help");
    expect(reply.encrypted).toBe(true);
    expect(reply.sender).toBe(bot.userId);
    expect([...person.undecryptable.values()]).toEqual([]);
    // Neither the token nor the recovery key reached the log.
    const recoveryKey = readFileSync(join(scratch, "dagbot.recovery-key"), "utf8").trim();
    expect(readLog()).not.toContain(token);
    expect(readLog()).not.toContain(recoveryKey);
  }, 150_000);
});
