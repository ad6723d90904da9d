// A separate OS process on the shared SQLite file, driven by the store tests over stdin/stdout
// (one JSON object per line). It imports the BUILT adapter from dist/ (`npm run build` first):
// Node 20 cannot run TypeScript, and the tests must exercise real processes.
//
//   node sqlite-worker.mjs <dist adapter index.js> <db path> <node id> racer
//       reads {id, op, ...} lines: acquire | insert | claim | drain | exit; answers {id, ok, result|error}
//   node sqlite-worker.mjs <dist adapter index.js> <db path> <node id> create-loop <room> <tasks per run>
//       creates runs forever, printing {committed: dagId} after each commit (for kill -9 tests)
//   node sqlite-worker.mjs <dist adapter index.js> <db path> <node id> listen
//       subscribes to onChange and returns from main: the process must still exit on its own
import process from "node:process";
import { createInterface } from "node:readline";
import { setTimeout as sleep } from "node:timers/promises";
import { pathToFileURL } from "node:url";

const [adapterPath, dbPath, nodeId, mode, ...rest] = process.argv.slice(2);
const { openSqliteStore } = await import(pathToFileURL(adapterPath).href);
const store = await openSqliteStore(dbPath, { busyTimeoutMs: 10_000 });
const session = { nodeId, bootId: String(process.pid) };
const out = (o) => process.stdout.write(`${JSON.stringify(o)}\n`);

async function waitUntil(at) {
  const ms = at - Date.now();
  if (ms > 2) await sleep(ms - 2);
  while (Date.now() < at); // the last ms spun, so the racers start within a fraction of a ms
}

const ops = {
  acquire: (c) => store.acquireLease(c.room, session, c.ttlMs).then((f) => ({ term: f.term })),
  insert: (c) => store.insertInboxEvent({ ...c.event, seenBy: nodeId }),
  claim: (c) => store.claimTask(offerFor(c)).then((t) => (t === null ? null : t.task.taskId)),
  drain: async (c) => {
    const got = [];
    for (let t = await store.claimTask(offerFor(c)); t !== null; t = await store.claimTask(offerFor(c)))
      got.push(`${t.task.runId}/${t.task.taskId}`);
    return got;
  },
};
const offerFor = (c) => ({ session, roomIds: c.roomIds, labels: [], actions: ["echo"], leaseMs: 60_000 });

if (mode === "racer") {
  out({ ready: true, pid: process.pid });
  const lines = createInterface({ input: process.stdin });
  for await (const line of lines) {
    const c = JSON.parse(line);
    if (c.op === "exit") break;
    if (c.at !== undefined) await waitUntil(c.at);
    try {
      out({ id: c.id, ok: true, result: await ops[c.op](c) });
    } catch (e) {
      out({ id: c.id, ok: false, error: e?.name ?? String(e), message: String(e?.message ?? e) });
    }
  }
  // Let go of stdin too, or the open pipe keeps the process alive after "exit".
  process.stdin.destroy();
  await store.close();
} else if (mode === "create-loop") {
  const [room, tasksPerRun] = rest;
  const fence = await store.acquireLease(room, session, 10 * 60_000);
  out({ ready: true, pid: process.pid });
  for (let i = 0; ; i++) {
    const dagId = `crash_${process.pid}_${i}`;
    const tasks = Array.from({ length: Number(tasksPerRun) }, (_, k) => ({
      id: `t${k}`,
      action: "echo",
      args: { k, pad: "x".repeat(200) },
      needs: k === 0 ? [] : [`t${k - 1}`],
      on: { labels: [], node: null },
      timeoutMs: null,
      queueTimeoutMs: null,
      retries: 0,
      retryBackoffMs: 1000,
      concurrencyKey: null,
      priority: 0,
    }));
    const dag = { id: dagId, description: null, maxParallel: null, tasks };
    const input = {
      roomId: room,
      dag,
      hash: dagId,
      publisher: "@crash:x",
      publishEventId: null,
      needsConfirmation: false,
      confirmTimeoutMs: 1,
    };
    await store.createRun({ fence }, input);
    out({ committed: dagId });
  }
} else if (mode === "listen") {
  store.onChange(() => {});
  out({ ready: true, pid: process.pid });
} else {
  throw new Error(`sqlite-worker: unknown mode ${mode}`);
}
