/**
 * `node bench/commands.mjs`: what the reads any member may ask for cost the leader, on a
 * SQLite store in a scratch folder: 15 runs of 1,000 tasks (15,000 task rows), one of them running
 * with a finished task whose kept output is 64 KiB, and 50 nodes beating. Each command goes through
 * the leader's inbox step as a chat command does (handled, then its reply or picture request
 * queued); per command the median and maximum of 7 rounds after a warm-up, and the growth of the
 * process's RSS and heap over the rounds. Needs `npm run build` first.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import process from "node:process";
import { load } from "./lib/dist.mjs";

const TASKS = 1000;
const RUNS = 15;
const NODES = 50;
const ROUNDS = 7;
const ROOM = "!bench:hs";
const OP = "@op:hs";

const { openSqliteStore } = await load("adapters/sqlite/index.js");
const { processNextInboxEvent } = await load("app/commands/inbox-step.js");

const spec = (id, needs) => ({
  id,
  action: "echo",
  args: {},
  needs,
  on: { labels: [], node: null },
  timeoutMs: null,
  queueTimeoutMs: null,
  retries: 0,
  retryBackoffMs: 1000,
  concurrencyKey: null,
  priority: 0,
});
/** Layers of 40, each task needing two of the layer before: no fan-out or chain grouping. */
function dagOf(id) {
  const tasks = Array.from({ length: TASKS }, (_, i) => {
    const level = Math.floor(i / 40);
    const needs =
      level === 0 ? [] : [`t${(level - 1) * 40 + (i % 40)}`, `t${(level - 1) * 40 + ((i * 7) % 40)}`];
    return spec(`t${i}`, [...new Set(needs)]);
  });
  return { id, description: null, maxParallel: null, tasks };
}

const dir = mkdtempSync(join(tmpdir(), "dagbot-bench-commands-"));
try {
  const store = await openSqliteStore(join(dir, "store.db"));
  const lease = await store.acquireLease(ROOM, { nodeId: "leader", bootId: "1" }, 3_600_000);
  const fence = { roomId: ROOM, session: lease.session, term: lease.term };
  for (let r = 0; r < RUNS; r++) {
    const dag = dagOf(`big${r}`);
    const created = await store.createRun(
      { fence },
      {
        roomId: ROOM,
        dag,
        hash: `hash${r}`,
        publisher: OP,
        publishEventId: null,
        needsConfirmation: false,
        confirmTimeoutMs: 60_000,
      },
    );
    if (created.kind !== "created") throw new Error(`createRun: ${created.kind}`);
  }
  await store.setRoomCap(ROOM, 1000, { fence });
  await store.scheduleStep(fence);
  const worker = { nodeId: "w", bootId: "1" };
  const offer = { session: worker, roomIds: [ROOM], labels: [], actions: ["echo"], leaseMs: 3_600_000 };
  const batch = await store.claimTasks(offer, 1);
  const claimed = batch.claimed[0];
  const output = "x".repeat(63).concat("\n").repeat(1024);
  await store.finishTask(claimed.token, { outcome: "succeeded", exitCode: 0, output, error: null });
  for (let n = 0; n < NODES; n++) {
    await store.heartbeat({
      session: { nodeId: `node${n}`, bootId: "1" },
      labels: ["a", "b"],
      capacity: 8,
      actions: ["echo", "true"],
      roomIds: [ROOM],
    });
  }
  const logsRun = claimed.task.runId;
  const logsDag = (await store.getRunById(logsRun)).dagId;
  const deps = {
    store,
    permissions: { standing: async () => ({ kind: "room-member", powerLevel: 100, allowlisted: false }) },
    policy: {
      requiredPowerLevel: 50,
      allowlist: [],
      twoPersonRule: false,
      autoConfirm: [],
      logs: "anyone",
      confirmTimeoutMs: 3_600_000,
      nodeStaleAfterMs: 3_600_000,
    },
    loadDag: async () => ({ ok: false, message: "none" }),
    // Each round a new sender: the picture rate limit is not what is measured here.
    pictureLimiter: { ask: () => ({ kind: "allowed" }) },
  };
  let seq = 0;
  const commands = [
    `!dag status ${logsDag}`,
    "!dag status",
    "!dag list",
    `!dag list ${logsDag}`,
    `!dag logs ${logsDag} ${claimed.task.taskId}`,
    "!dag nodes",
    `!dag graph ${logsDag}`,
  ];
  process.stdout.write(
    `${RUNS} runs × ${TASKS} tasks, ${NODES} nodes, a 64 KiB output (SQLite, ${process.version})\n`,
  );
  for (const body of commands) {
    const times = [];
    const rss0 = process.memoryUsage().rss;
    const heap0 = process.memoryUsage().heapUsed;
    let replyBytes = 0;
    for (let round = 0; round <= ROUNDS; round++) {
      const eventId = `$bench${++seq}`;
      await store.insertInboxEvent({
        eventId,
        roomId: ROOM,
        sender: OP,
        originServerTs: Date.now(),
        content: { msgtype: "m.text", body },
        seenBy: "bench",
      });
      const t = performance.now();
      const done = await processNextInboxEvent(deps, fence);
      const ms = performance.now() - t;
      if (done !== "processed") throw new Error(`${body}: ${done}`);
      const reply = await store.getOutbox(`reply.${eventId}`);
      replyBytes = reply === null ? 0 : JSON.stringify(reply.content).length;
      if (round > 0) times.push(ms);
    }
    times.sort((a, b) => a - b);
    const mb = (bytes) => Math.round((bytes / 2 ** 20) * 10) / 10;
    process.stdout.write(
      `${body.padEnd(28)} median ${times[Math.floor(times.length / 2)].toFixed(1).padStart(6)} ms, max ${times[times.length - 1].toFixed(1).padStart(6)} ms, ` +
        `reply ${Math.round(replyBytes / 1024)} KiB, RSS +${mb(process.memoryUsage().rss - rss0)} MB, heap +${mb(process.memoryUsage().heapUsed - heap0)} MB\n`,
    );
  }
  process.stdout.write(`peak RSS ${Math.round(process.resourceUsage().maxRSS / 1024)} MB\n`);
  await store.close();
} finally {
  rmSync(dir, { recursive: true, force: true });
}
