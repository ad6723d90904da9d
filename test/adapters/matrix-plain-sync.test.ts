/**
 * The plain `/sync` loop (plain-sync.ts) and intake against a homeserver that answers what it
 * likes: a real HTTP server on localhost plays the semi-trusted homeserver, the inbox is a real
 * SQLite file. What Synapse itself cannot be made to send (null events, a batch without next_batch,
 * 429 with retry_after_ms, a logged-out token) is scripted here; the real Synapse's side is in
 * matrix-plain-sync-synapse.test.ts.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { MatrixIntake } from "../../src/adapters/matrix/intake.js";
import { openSqliteStore } from "../../src/adapters/sqlite/index.js";
import type { Logger } from "../../src/ports/logger.js";
import type { Store } from "../../src/ports/store.js";

const ROOM = "!room:hs";
const BOT = "@bot:hs";

interface Line {
  level: string;
  msg: string;
  fields: Record<string, unknown>;
}

function recordingLogger(lines: Line[]): Logger {
  const at =
    (level: string) =>
    (a: Record<string, unknown> | string, b?: string): void => {
      lines.push(typeof a === "string" ? { level, msg: a, fields: {} } : { level, msg: b ?? "", fields: a });
    };
  const logger: Logger = {
    trace: at("trace"),
    debug: at("debug"),
    info: at("info"),
    warn: at("warn"),
    error: at("error"),
    fatal: at("fatal"),
    child: () => logger,
  };
  return logger;
}

type SyncAnswer = { status: number; body: string };
const json = (v: unknown, status = 200): SyncAnswer => ({ status, body: JSON.stringify(v) });

/** A homeserver whose /sync answers come from `script` (the last one repeats), every request logged. */
class ScriptedHomeserver {
  readonly syncs: { at: number; since: string | null; filter: string | null; closedAt?: number }[] = [];
  script: SyncAnswer[] = [];
  private server!: Server;
  url = "";

  async start(): Promise<void> {
    this.server = createServer((req, res) => this.answer(req, res));
    await new Promise<void>((resolve) => this.server.listen(0, "127.0.0.1", resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private endless(res: ServerResponse, mib: number): void {
    res.writeHead(200, { "content-type": "application/json" });
    const chunk = Buffer.alloc(1024 * 1024, 0x20);
    let left = mib;
    const more = (): void => {
      while (left > 0 && !res.destroyed) {
        left -= 1;
        if (!res.write(chunk)) return void res.once("drain", more);
      }
      if (!res.destroyed) res.end("{}");
    };
    res.write('{"next_batch":"s1","padding":"');
    more();
  }

  private answer(req: IncomingMessage, res: ServerResponse): void {
    const url = new URL(req.url ?? "/", this.url);
    const send = ({ status, body }: SyncAnswer): void => {
      res.writeHead(status, { "content-type": "application/json" }).end(body);
    };
    req.resume();
    if (url.pathname.endsWith("/account/whoami")) return send(json({ user_id: BOT, device_id: "DEV" }));
    if (url.pathname.endsWith("/joined_rooms")) return send(json({ joined_rooms: [ROOM] }));
    if (url.pathname.includes("/state/m.room.encryption")) return send(json({ errcode: "M_NOT_FOUND" }, 404));
    if (url.pathname.endsWith("/filter")) return send(json({ filter_id: "f1" }));
    if (url.pathname.endsWith("/sync")) {
      this.syncs.push({
        at: Date.now(),
        since: url.searchParams.get("since"),
        filter: url.searchParams.get("filter"),
      });
      const record = this.syncs[this.syncs.length - 1]!;
      res.on("close", () => (record.closedAt = Date.now()));
      const next = this.script.length > 1 ? this.script.shift() : this.script[0];
      // Status 0: a long poll that is never answered.
      if (next?.status === 0) return;
      // Status 1: an endless body (70 MiB of it, in 1 MiB chunks, with no length said).
      if (next?.status === 1) return void this.endless(res, 70);
      return send(next ?? json({ errcode: "M_UNKNOWN" }, 500));
    }
    send(json({}));
  }
}

const command = (id: string, body: string): Record<string, unknown> => ({
  event_id: id,
  type: "m.room.message",
  sender: "@alice:hs",
  origin_server_ts: Date.now(),
  content: { msgtype: "m.text", body },
});

const batch = (next: string, events: unknown, extra: Record<string, unknown> = {}): SyncAnswer =>
  json({ next_batch: next, rooms: { join: { [ROOM]: { timeline: { events, limited: false }, ...extra } } } });

/** Waits until `check` holds or fails with what `seen` says after `ms`. */
async function until(
  check: () => boolean | Promise<boolean>,
  seen: () => unknown,
  ms = 20_000,
): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out; saw ${JSON.stringify(seen())}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

let hs: ScriptedHomeserver;
let dir: string;
let store: Store;
let intake: MatrixIntake | undefined;
let lines: Line[];

beforeEach(async () => {
  hs = new ScriptedHomeserver();
  await hs.start();
  dir = mkdtempSync(join(tmpdir(), "dagbot-plain-sync-"));
  store = await openSqliteStore(join(dir, "store.db"));
  lines = [];
});

afterEach(async () => {
  intake?.stop();
  intake = undefined;
  await hs.close();
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

function startIntake(): MatrixIntake {
  intake = new MatrixIntake({
    homeserverUrl: hs.url,
    accessToken: "token",
    userId: BOT,
    rooms: [ROOM],
    commandWindowMs: 3_600_000,
    stateFile: join(dir, "sync.json"),
    nodeId: "n1",
    inbox: store,
    logger: recordingLogger(lines),
  });
  return intake;
}

const inInbox = async (id: string): Promise<boolean> => (await store.getInboxEvent(id)) !== null;

describe("plain sync against a homeserver that sends what it likes", () => {
  it("drops events that are not objects and takes the commands beside them", async () => {
    hs.script = [
      batch(
        "s1",
        [
          null,
          7,
          "x",
          [],
          { type: "m.room.message", content: null, sender: 5, origin_server_ts: "now" },
          {
            event_id: "$bad",
            type: "m.room.message",
            sender: "@alice:hs",
            origin_server_ts: Date.now(),
            content: "!dag help",
          },
          command("$ok", "!dag help"),
        ],
        { state: { events: [null, 3] } },
      ),
      json({
        next_batch: "s2",
        rooms: {
          join: { [ROOM]: "not a room" },
          invite: { "!other:hs": { invite_state: { events: [null] } } },
        },
      }),
      json({
        next_batch: "s3",
        rooms: { join: { [ROOM]: { timeline: { events: [command("$ok2", "!dag list")] } } } },
      }),
      batch("s3", []),
    ];
    await startIntake().start();
    // Without dropping them, the null in the first batch throws at every retry of it: no command
    // is ever stored and the position never moves.
    await until(
      async () => (await inInbox("$ok")) && (await inInbox("$ok2")),
      () => hs.syncs,
    );
    expect(await inInbox("$bad")).toBe(false);
    expect(hs.syncs.slice(0, 3).map((s) => s.since)).toEqual([null, "s1", "s2"]);
  });

  it("does not take an answer without next_batch as a batch, nor ask again at once", async () => {
    hs.script = [json([1, 2]), json("sync"), json({ rooms: {} })];
    await startIntake().start();
    await until(
      () => hs.syncs.length >= 1,
      () => hs.syncs,
    );
    // A bad answer is a failure, waited out like one (5-15 s), not a batch: the node is not ready.
    await new Promise((r) => setTimeout(r, 1_500));
    expect(hs.syncs).toHaveLength(1);
    let ready = false;
    void intake?.ready.then(() => (ready = true));
    await new Promise((r) => setImmediate(r));
    expect(ready).toBe(false);
    expect(lines.some((l) => l.level === "warn" && String(l.fields["err"]).includes("no next_batch"))).toBe(
      true,
    );
  });

  it("does not spin when the server answers at once without moving the position", async () => {
    hs.script = [batch("s1", [])];
    await startIntake().start();
    await until(
      () => hs.syncs.length >= 2,
      () => hs.syncs,
    );
    await new Promise((r) => setTimeout(r, 1_500));
    // The first sync moves to s1; the second answers s1 again at once, so the loop waits 5-15 s.
    expect(hs.syncs.length).toBe(2);
    expect(lines.some((l) => l.msg === "sync answered at once without moving on")).toBe(true);
  });

  it("stops reading an answer over 64 MiB, and takes the next batch", async () => {
    hs.script = [
      { status: 1, body: "" },
      batch("s1", [command("$afterHuge", "!dag help")]),
      { status: 0, body: "" },
    ];
    await startIntake().start();
    await until(
      () => inInbox("$afterHuge"),
      () => hs.syncs,
      25_000,
    );
    const failed = lines.filter((l) => l.msg === "sync failed").map((l) => String(l.fields["err"]));
    expect(failed).toEqual([expect.stringContaining("over 67108864 bytes")]);
  }, 30_000);

  it("waits a 429's retry_after_ms, not the 5-15 s of other failures", async () => {
    hs.script = [
      json({ errcode: "M_LIMIT_EXCEEDED", retry_after_ms: 300 }, 429),
      batch("s1", [command("$after429", "!dag help")]),
      batch("s1", []),
    ];
    await startIntake().start();
    await until(
      () => inInbox("$after429"),
      () => hs.syncs,
    );
    const [first, second] = hs.syncs;
    expect(second!.at - first!.at).toBeGreaterThanOrEqual(300);
    expect(second!.at - first!.at).toBeLessThan(5_000);
  });

  it("says plainly, once per outage, that the homeserver logged the bot out", async () => {
    hs.script = [json({ errcode: "M_UNKNOWN_TOKEN", error: "Invalid access token", soft_logout: true }, 401)];
    await startIntake().start();
    // Two refused syncs (the second after the 5-15 s backoff), one error line.
    await until(
      () => hs.syncs.length >= 2,
      () => hs.syncs,
      25_000,
    );
    const errors = lines.filter((l) => l.level === "error");
    expect(errors).toHaveLength(1);
    expect(errors[0]!.msg).toContain("soft logout");
    expect(errors[0]!.msg).toContain("matrix.access_token");
  }, 30_000);

  it("a batch that fails to store is retried from the same position, and the position saved only after", async () => {
    // What a homeserver answers to the same position twice, then a poll that waits.
    const first = batch("s1", [command("$stored", "!dag help")]);
    hs.script = [first, first, { status: 0, body: "" }];
    let failures = 0;
    const flaky = {
      getInboxEvent: store.getInboxEvent.bind(store),
      latestInboxEvent: store.latestInboxEvent.bind(store),
      insertInboxEvent: async (...args: Parameters<Store["insertInboxEvent"]>) => {
        // Not a StoreError: intake does not retry it in place, so the whole batch is retried.
        if (failures++ === 0) throw new Error("disk on fire");
        return store.insertInboxEvent(...args);
      },
    };
    intake = new MatrixIntake({
      homeserverUrl: hs.url,
      accessToken: "token",
      userId: BOT,
      rooms: [ROOM],
      commandWindowMs: 3_600_000,
      stateFile: join(dir, "sync.json"),
      nodeId: "n1",
      inbox: flaky,
      logger: recordingLogger(lines),
    });
    await intake.start();
    await until(
      () => hs.syncs.length >= 3,
      () => hs.syncs,
      25_000,
    );
    expect(await inInbox("$stored"), JSON.stringify([hs.syncs, lines])).toBe(true);
    // s1 failed to store: asked again without a position, then from s1 once it was stored.
    expect(hs.syncs.map((s) => s.since)).toEqual([null, null, "s1"]);
    expect(failures).toBe(2);
  }, 30_000);

  it("stop aborts the long poll in flight; no sync after it", async () => {
    hs.script = [batch("s1", [command("$first", "!dag help")]), { status: 0, body: "" }];
    await startIntake().start();
    await until(
      () => inInbox("$first"),
      () => hs.syncs,
    );
    await until(
      () => hs.syncs.length >= 2,
      () => hs.syncs,
    );
    const stoppedAt = Date.now();
    intake?.stop();
    // The server never answers that poll: only the client's abort closes it, well before its 40 s.
    await until(
      () => hs.syncs[1]!.closedAt !== undefined,
      () => hs.syncs,
      5_000,
    );
    expect(hs.syncs[1]!.closedAt! - stoppedAt).toBeLessThan(5_000);
    await new Promise((r) => setTimeout(r, 1_000));
    expect(hs.syncs).toHaveLength(2);
  });
});
