/**
 * graphile-worker at its best for the claim section: run in its own process (so the bench's event
 * loop and garbage collector do not share its thread), on enough no-op jobs for a steady state.
 * Usage: node bench/graphile-child.mjs <database url> <jobs> <concurrency> <pool size>
 *   [<local queue size> <complete batch delay ms>]
 * The last two are graphile-worker's batching settings (preset.worker.localQueue.size and
 * completeJobBatchDelay); -1, their default, turns each off (bench/graphile-sweep.mjs chose the
 * bench's values).
 * Talks to the bench by lines: prints "ready" once the jobs are added, starts the runner on "go"
 * (so the bench's CPU meter covers the run only), prints one JSON line { perSecond, seconds,
 * clientUs } (clientUs: this process's CPU per job while the runner ran), and closes its
 * connections on "end" (after the bench has read the server's CPU of them).
 * The runner is timed from its first job's start until the jobs table is empty (every completion
 * written).
 */
import { EventEmitter } from "node:events";
import { performance } from "node:perf_hooks";
import process from "node:process";
import { createInterface } from "node:readline";
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";

const [url, jobsArg, concurrencyArg, poolArg, localQueueArg = "-1", batchDelayArg = "-1"] =
  process.argv.slice(2);
const jobs = Number(jobsArg);
const concurrency = Number(concurrencyArg);
const poolSize = Number(poolArg);
const localQueueSize = Number(localQueueArg);
const completeJobBatchDelay = Number(batchDelayArg);
if (
  url === undefined ||
  !(jobs > 0) ||
  !(concurrency > 0) ||
  !(poolSize > 0) ||
  !Number.isInteger(localQueueSize) ||
  !(completeJobBatchDelay >= -1)
)
  throw new Error(
    "usage: graphile-child.mjs <database url> <jobs> <concurrency> <pool size> [<local queue size> <complete batch delay ms>]",
  );

const reader = createInterface({ input: process.stdin });
const lines = reader[Symbol.asyncIterator]();
async function expectLine(word) {
  const { value, done } = await lines.next();
  if (done || value.trim() !== word) throw new Error(`graphile child: expected "${word}", got ${value}`);
}

const gw = await import("graphile-worker");
const logger = new gw.Logger(() => () => {});
const pool = new pg.Pool({ connectionString: url, max: poolSize });
// A connection closed under the pool (the scratch database dropped) must not crash the child.
pool.on("error", () => {});
pool.on("connect", (client) => client.on("error", () => {}));
const admin = new pg.Client({ connectionString: url });
await admin.connect();
const utils = await gw.makeWorkerUtils({ pgPool: pool, logger });
let runner = null;
try {
  await utils.migrate();
  for (let made = 0; made < jobs; made += 1000) {
    const n = Math.min(1000, jobs - made);
    await utils.addJobs(Array.from({ length: n }, () => ({ identifier: "noop", payload: {} })));
  }
  process.stdout.write("ready\n");
  await expectLine("go");
  let succeeded = 0;
  let t0 = null;
  let allSucceeded;
  const allDone = new Promise((resolve) => (allSucceeded = resolve));
  const cpu0 = process.cpuUsage();
  // Our own emitter, listened to before the runner starts: a job can succeed before run() resolves.
  const events = new EventEmitter();
  events.on("job:success", () => {
    succeeded += 1;
    if (succeeded === jobs) allSucceeded();
  });
  runner = await gw.run({
    pgPool: pool,
    events,
    concurrency,
    noHandleSignals: true,
    pollInterval: 1000,
    logger,
    // Only what is set: graphile-worker's own defaults otherwise (both off).
    preset: {
      worker: {
        ...(localQueueSize > 0 ? { localQueue: { size: localQueueSize } } : {}),
        ...(completeJobBatchDelay >= 0 ? { completeJobBatchDelay } : {}),
      },
    },
    taskList: {
      noop: async () => {
        t0 ??= performance.now();
      },
    },
  });
  const stall = new AbortController();
  await Promise.race([
    allDone,
    sleep(120_000, null, { signal: stall.signal }).then(() =>
      Promise.reject(new Error(`graphile-worker stalled after ${succeeded} of ${jobs} jobs`)),
    ),
  ]).finally(() => stall.abort());
  // job:success fires before the completion is written; the figure counts written completions.
  for (;;) {
    const { rows } = await admin.query("SELECT count(*)::int AS n FROM graphile_worker.jobs");
    if (rows[0].n === 0) break;
    await sleep(1);
  }
  const seconds = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  process.stdout.write(
    `${JSON.stringify({ perSecond: jobs / seconds, seconds, clientUs: (cpu.user + cpu.system) / jobs })}\n`,
  );
  await expectLine("end");
} finally {
  await runner?.stop();
  await utils.release();
  await pool.end();
  await admin.end();
  reader.close();
}
