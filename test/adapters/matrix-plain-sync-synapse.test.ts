/**
 * The plain `/sync` loop (plain-sync.ts) and intake against the real local Synapse, in-process with
 * a real SQLite inbox: a gap longer than the timeline limit while the node was stopped is backfilled
 * (no command lost), and a sync state file edited by hand (a filter or token the server does not
 * know) or torn costs a fresh sync, not the intake; invites, rooms not in the config and a kick.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { MatrixIntake } from "../../src/adapters/matrix/intake.js";
import { openSqliteStore } from "../../src/adapters/sqlite/index.js";
import type { Logger } from "../../src/ports/logger.js";
import type { Store } from "../../src/ports/store.js";
import { useSynapse } from "../support/matrix-fixture.js";
import { MatrixUser } from "../support/matrix-user.js";
import type { RegisteredUser } from "../support/synapse.js";

const fx = useSynapse();
let bot: RegisteredUser;
let alice: MatrixUser;
let roomId: string;
let dir: string;
let store: Store;
let intake: MatrixIntake | undefined;
const lines: { level: string; msg: string; fields: Record<string, unknown> }[] = [];

function logger(): Logger {
  const at =
    (level: string) =>
    (a: Record<string, unknown> | string, b?: string): void => {
      lines.push(typeof a === "string" ? { level, msg: a, fields: {} } : { level, msg: b ?? "", fields: a });
    };
  const l: Logger = {
    trace: at("trace"),
    debug: at("debug"),
    info: at("info"),
    warn: at("warn"),
    error: at("error"),
    fatal: at("fatal"),
    child: () => l,
  };
  return l;
}

const stateFile = (): string => join(dir, "sync.json");

async function startIntake(): Promise<MatrixIntake> {
  intake = new MatrixIntake({
    homeserverUrl: fx.hs.url,
    accessToken: bot.accessToken,
    userId: bot.userId,
    rooms: [roomId],
    commandWindowMs: 3_600_000,
    stateFile: stateFile(),
    nodeId: "n1",
    inbox: store,
    logger: logger(),
    // Small, so that a few messages make a `limited` timeline.
    timelineLimit: 5,
  });
  await intake.start();
  return intake;
}

function stopIntake(): void {
  intake?.stop();
  intake = undefined;
}

async function until(check: () => boolean | Promise<boolean>, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function inboxHas(ids: string[], ms = 30_000): Promise<void> {
  const end = Date.now() + ms;
  for (;;) {
    const missing: string[] = [];
    for (const id of ids) if ((await store.getInboxEvent(id)) === null) missing.push(id);
    if (missing.length === 0) return;
    if (Date.now() > end) throw new Error(`not in the inbox: ${missing.join(", ")}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A state file with a filter and a position the server knows (left by a run of the intake). */
async function ensureSyncState(): Promise<void> {
  const has = (): boolean => {
    try {
      const s = JSON.parse(readFileSync(stateFile(), "utf8")) as { syncToken?: unknown; filter?: unknown };
      return typeof s.syncToken === "string" && s.filter !== null && typeof s.filter === "object";
    } catch {
      return false;
    }
  };
  if (has()) return;
  await (
    await startIntake()
  ).ready;
  stopIntake();
  if (!has()) throw new Error("the intake left no sync state");
}

beforeAll(async () => {
  bot = await fx.hs.registerUser("plainbot", { deviceId: "PLAINBOT" });
  const a = await fx.hs.registerUser("alice");
  alice = new MatrixUser(fx.hs.url, a);
  roomId = await fx.hs.createRoom(a.accessToken, { name: "plain", invite: [bot.userId] });
  dir = mkdtempSync(join(tmpdir(), "dagbot-plain-sync-synapse-"));
  store = await openSqliteStore(join(dir, "store.db"));
});

afterEach(() => stopIntake());

afterAll(async () => {
  await store?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("plain sync against Synapse", () => {
  it("backfills a gap longer than the timeline limit left while the node was stopped", async () => {
    await (
      await startIntake()
    ).ready;
    const first = await alice.sendText(roomId, "!dag help");
    await inboxHas([first]);
    stopIntake();
    const sent: string[] = [];
    for (let i = 0; i < 20; i++) {
      sent.push(await alice.sendText(roomId, `!dag status run${i}`));
      await alice.sendText(roomId, `chatter ${i}`);
    }
    const before = lines.length;
    await startIntake();
    await inboxHas(sent);
    expect(lines.slice(before).some((l) => l.msg === "backfilled a sync gap")).toBe(true);
  });

  it.each([
    [
      "a filter id the server does not know",
      (s: Record<string, unknown>) => ({ ...s, filter: { ...(s["filter"] as object), id: "987654" } }),
    ],
    [
      "a token the server does not know",
      (s: Record<string, unknown>) => ({ ...s, syncToken: "garbage_token" }),
    ],
    [
      "a filter id that is not a number",
      (s: Record<string, unknown>) => ({ ...s, filter: { ...(s["filter"] as object), id: "not-a-filter" } }),
    ],
  ])(
    "with %s in the state file, syncs afresh and loses no command",
    async (_name, edit) => {
      await ensureSyncState();
      const state = JSON.parse(readFileSync(stateFile(), "utf8")) as Record<string, unknown>;
      writeFileSync(stateFile(), JSON.stringify(edit(state)));
      const whileStopped = await alice.sendText(roomId, "!dag list");
      const before = lines.length;
      intake = new MatrixIntake({
        homeserverUrl: fx.hs.url,
        accessToken: bot.accessToken,
        userId: bot.userId,
        rooms: [roomId],
        commandWindowMs: 3_600_000,
        stateFile: stateFile(),
        nodeId: "n1",
        inbox: store,
        logger: logger(),
        timelineLimit: 5,
      });
      await intake.start();
      await inboxHas([whileStopped]);
      const after = await alice.sendText(roomId, "!dag help");
      await inboxHas([after]);
      const refused = lines.slice(before).filter((l) => l.msg.includes("refuses the stored sync position"));
      expect(refused.length, JSON.stringify(lines.slice(before))).toBeGreaterThan(0);
    },
    60_000,
  );

  it("accepts a later invite to a configured room, ignores a joined room not in the config, reports a kick", async () => {
    const botUser = new MatrixUser(fx.hs.url, bot);
    const later = await alice.request("POST", "/_matrix/client/v3/createRoom", { name: "later" });
    const laterRoom = String(later.room_id);
    const other = await fx.hs.createRoom(alice.accessToken, { name: "other", invite: [bot.userId] });
    await botUser.joinRoom(other);
    const before = lines.length;
    intake = new MatrixIntake({
      homeserverUrl: fx.hs.url,
      accessToken: bot.accessToken,
      userId: bot.userId,
      rooms: [laterRoom],
      commandWindowMs: 3_600_000,
      stateFile: join(dir, "sync-later.json"),
      nodeId: "n1",
      inbox: store,
      logger: logger(),
    });
    await intake.start();
    await intake.ready;
    const ignored = await alice.sendText(other, "!dag help");
    await alice.request("POST", `/_matrix/client/v3/rooms/${encodeURIComponent(laterRoom)}/invite`, {
      user_id: bot.userId,
    });
    await until(async () => (await alice.joinedMembers(laterRoom)).includes(bot.userId));
    const taken = await alice.sendText(laterRoom, "!dag list");
    await inboxHas([taken]);
    expect(await store.getInboxEvent(ignored)).toBeNull();
    await alice.request("POST", `/_matrix/client/v3/rooms/${encodeURIComponent(laterRoom)}/kick`, {
      user_id: bot.userId,
    });
    await until(() =>
      lines.slice(before).some((l) => l.msg === "left or was removed from a configured room"),
    );
    const mine = lines.slice(before).map((l) => l.msg);
    expect(mine).toContain("accepted the invite to a configured room");
    expect(mine).toContain("ignoring a room not in the config");
  });

  it("with a torn state file, syncs afresh and loses no command", async () => {
    writeFileSync(stateFile(), '{"syncToken": "s1');
    const whileStopped = await alice.sendText(roomId, "!dag list");
    await startIntake();
    await inboxHas([whileStopped]);
    expect(lines.some((l) => l.level === "warn" && l.msg.includes("is not valid JSON"))).toBe(true);
  });
});
