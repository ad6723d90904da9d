/**
 * Section 6, retention: the store's size after N chat commands and the runs they publish, with and
 * without the leader's pruning (docs/configuration.md, "Retention", default `finished` of 7 days), on each store.
 * One process drives the real code paths on a store whose clock the bench moves: every command goes
 * into the inbox and through the command table's inbox step (replies queued as in a chat room);
 * one in ten publishes a three-task DAG, which is claimed, run to success and carded (the status
 * card keeper's edits and final message, marked sent as the outbox would); three in ten are
 * publishes from a power-0 member (refused, ~4 KB each: a flood of publishes from someone not allowed to publish); the rest are
 * `!dag status`. The commands are spread over 30 simulated days, so pruning keeps about the last
 * week. With pruning the leader's batches run every 100 commands (about every 7 simulated hours).
 */
import { existsSync, statSync } from "node:fs";
import { performance } from "node:perf_hooks";
import Database from "better-sqlite3";
import { load } from "./lib/dist.mjs";

const ROOM = "!bench-retention:example.org";
const DAY = 86_400_000;
const SPAN_MS = 30 * DAY;
const RETENTION_MS = 7 * DAY;
const PRUNE_EVERY_COMMANDS = 100;
/** The leader's batch sizes (src/app/leader.ts). */
const LIMITS = {
  olderThanMs: RETENTION_MS,
  nodesOlderThanMs: DAY,
  keysOlderThanMs: RETENTION_MS,
  runs: 20,
  rows: 500,
};
const OP = "@op:example.org";
const LOW = "@low:example.org";
const TABLES = ["runs", "tasks", "events", "processed_events", "outbox"];

const dagBody = (id, pad) =>
  `!dag publish\n\`\`\`json\n${JSON.stringify({
    id,
    description: pad,
    tasks: [
      { id: "a", action: "echo", args: { message: "one" } },
      { id: "b", action: "echo", args: { message: "two" } },
      { id: "c", action: "echo", args: { message: "three" }, needs: ["a", "b"] },
    ],
  })}\n\`\`\``;

async function open(kind, dir, scratch, clock, variant) {
  if (kind === "sqlite") {
    const path = `${dir}/${variant}.db`;
    const { openSqliteStore } = await load("adapters/sqlite/index.js");
    return { store: await openSqliteStore(path, { clock }), path, url: null };
  }
  const url = await scratch.database(`retention_${variant}`);
  const { openPostgresStore } = await load("adapters/postgres/index.js");
  return { store: await openPostgresStore(url, { poolSize: 4, clock }), path: null, url };
}

/** Rows per table and bytes: SQLite file and live pages; PostgreSQL relations after VACUUM FULL. */
async function measure(kind, where) {
  if (kind === "sqlite") {
    const db = new Database(where.path);
    try {
      db.pragma("wal_checkpoint(TRUNCATE)");
      const rows = Object.fromEntries(
        TABLES.map((t) => [t, db.prepare(`SELECT count(*) AS n FROM ${t}`).get().n]),
      );
      const pageSize = db.pragma("page_size", { simple: true });
      const pages = db.pragma("page_count", { simple: true });
      const free = db.pragma("freelist_count", { simple: true });
      return { rows, fileBytes: statSync(where.path).size, liveBytes: (pages - free) * pageSize };
    } finally {
      db.close();
    }
  }
  const pg = (await import("pg")).default;
  const client = new pg.Client({ connectionString: where.url });
  await client.connect();
  try {
    // FULL rewrites each table: what remains is the live data (a plain VACUUM keeps the files).
    await client.query("VACUUM FULL");
    const rows = {};
    let bytes = 0;
    for (const t of TABLES) {
      rows[t] = Number((await client.query(`SELECT count(*) AS n FROM ${t}`)).rows[0].n);
      bytes += Number((await client.query("SELECT pg_total_relation_size($1) AS b", [t])).rows[0].b);
    }
    return { rows, fileBytes: bytes, liveBytes: bytes };
  } finally {
    await client.end();
  }
}

async function drive(kind, scratch, dir, variant, commands, log) {
  let now = Date.UTC(2030, 0, 1);
  const clock = () => now;
  const where = await open(kind, dir, scratch, clock, variant);
  const { store } = where;
  const { inboxStep } = await load("app/commands/inbox-step.js");
  const { CardKeeper } = await load("app/status-cards.js");
  const silent = { child: () => silent, debug() {}, info() {}, warn() {}, error() {} };
  const policy = {
    requiredPowerLevel: 50,
    allowlist: [],
    twoPersonRule: false,
    autoConfirm: [OP],
    confirmTimeoutMs: 3_600_000,
    nodeStaleAfterMs: 30 * DAY,
  };
  const power = { [OP]: 100, [LOW]: 0 };
  const step = inboxStep({
    store,
    permissions: {
      standing: async (_room, user) => ({
        kind: "room-member",
        powerLevel: power[user] ?? 0,
        allowlisted: false,
      }),
    },
    policy,
    loadDag: async () => ({ ok: false, message: "no library" }),
  });
  const session = { nodeId: "bench", bootId: "b1" };
  const acquired = await store.acquireLease(ROOM, session, 10 * 365 * DAY);
  const fence = { roomId: ROOM, session, term: acquired.term };
  await store.heartbeat({ session, labels: [], capacity: 8, actions: ["echo"], roomIds: [ROOM] });
  const keeper = new CardKeeper(
    { store, clock: { monotonicMs: () => now, wallMs: () => now, sleep: async () => {} }, logger: silent },
    fence,
    silent,
  );
  const offer = { session, roomIds: [ROOM], labels: [], actions: ["echo"], leaseMs: 60_000 };
  const flood = "x".repeat(4_000);
  const signal = new AbortController().signal;
  const sendAll = async () => {
    for (;;) {
      const pending = await store.pendingOutbox(fence, 100);
      if (pending.length === 0) return;
      for (const m of pending) await store.markOutboxSent(fence, m.txnId, `$sent-${m.seq}`);
    }
  };
  const t0 = performance.now();
  let runs = 0;
  for (let i = 0; i < commands; i++) {
    const kindOf = i % 10;
    const body =
      kindOf === 0
        ? dagBody(`run-${i}`, "nightly")
        : kindOf <= 3
          ? dagBody(`nope-${i}`, flood)
          : "!dag status";
    await store.insertInboxEvent({
      eventId: `$bench-${variant}-${i}`,
      roomId: ROOM,
      sender: kindOf >= 1 && kindOf <= 3 ? LOW : OP,
      originServerTs: now,
      content: { msgtype: "m.text", body },
      seenBy: "bench",
    });
    while ((await step(fence, signal)) > 0);
    await sendAll();
    if (kindOf === 0) {
      runs += 1;
      // The card keeper sees the run running, then ended: an edit, then the final message once
      // the edit is out (status-cards.ts), each sent as the outbox would.
      await keeper.pass(0);
      await sendAll();
      await store.scheduleStep(fence);
      for (;;) {
        const claimed = await store.claimTask(offer);
        if (claimed === null) {
          if ((await store.scheduleStep(fence)).queued === 0) break;
          continue;
        }
        await store.finishTask(claimed.token, {
          outcome: "succeeded",
          exitCode: 0,
          output: "ok\n",
          error: null,
        });
      }
      await store.deriveRunOutcomes(fence);
      for (let k = 0; k < 3; k++) {
        await keeper.pass(0);
        await sendAll();
      }
    }
    if (variant === "pruned" && i % PRUNE_EVERY_COMMANDS === PRUNE_EVERY_COMMANDS - 1) {
      for (;;) {
        const r = await store.pruneBatch(fence, LIMITS);
        if (r.runs < LIMITS.runs && Math.max(r.events, r.inbox, r.outbox, r.nodes, r.keys) < LIMITS.rows)
          break;
      }
    }
    now += Math.floor(SPAN_MS / commands);
    if ((i + 1) % 2_000 === 0) log(`    ${kind} ${variant}: ${i + 1} commands`);
  }
  const seconds = (performance.now() - t0) / 1000;
  await store.close();
  return { commands, runs, seconds, ...(await measure(kind, where)) };
}

/** Both variants on one store kind. */
export async function benchRetention(scratch, kind, { commands, log }) {
  // Sizes do not depend on the disk: SQLite files go to a RAM disk where there is one, so the
  // adapter's fsync per commit (synchronous=FULL) does not make 10,000 commands take many minutes.
  const dir = scratch.dir(`retention-${kind}`, existsSync("/dev/shm") ? "/dev/shm" : undefined);
  const out = {};
  for (const variant of ["kept", "pruned"]) {
    const r = await drive(kind, scratch, dir, variant, commands, log);
    log(
      `  ${kind} ${variant}: ${r.commands} commands, ${r.runs} runs in ${r.seconds.toFixed(0)} s → ` +
        `${(r.liveBytes / 1024 / 1024).toFixed(1)} MB live (${(r.fileBytes / 1024 / 1024).toFixed(1)} MB on disk); rows ${JSON.stringify(r.rows)}`,
    );
    out[variant] = r;
  }
  return out;
}
