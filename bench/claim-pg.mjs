/**
 * Section 1, PostgreSQL: claim + complete per second through dagbot's store (one Store and one
 * offer per node, as `dagbot node` has: a pool of 10 connections shared by its N slots' concurrent
 * claim/finish loops), as a
 * node runs it now (finishAndClaim while ready tasks are left) and with the finish and the next
 * claim apart (as before it), next to a raw SKIP LOCKED loop on a partial index (same pool size,
 * same database) and graphile-worker with concurrency 8 on no-op jobs, at its fastest settings and
 * at its defaults, in the same run.
 */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { performance } from "node:perf_hooks";
import process from "node:process";
import { createInterface } from "node:readline";
import { fileURLToPath, URL } from "node:url";
import pg from "pg";
import { cpuMeter } from "./lib/cpu.mjs";
import { load } from "./lib/dist.mjs";
import { claimLoop, hasFinishAndClaim, leadRoom, offer, queueTasks } from "./lib/queue.mjs";

const ROOM = "bench-claim";
const POOL_SIZE = 10;

/** dagbot: `workers` concurrent claim/finish loops over one Store (`apart`: see claimLoop). */
async function dagbotRound(store, fence, round, workers, jobs, meter, apart = false) {
  await queueTasks(store, fence, `claim_r${round}_w${workers}${apart ? "_apart" : ""}`, jobs);
  const m = await meter.start();
  const t0 = performance.now();
  // One node with `workers` slots, as `dagbot node --capacity N` runs them: one offer for all.
  const node = offer(ROOM, "bench-node");
  const results = await Promise.all(Array.from({ length: workers }, () => claimLoop(store, node, { apart })));
  const seconds = (performance.now() - t0) / 1000;
  const cpu = await m.stop(jobs);
  const done = results.reduce((a, r) => a + r.done, 0);
  const errors = results.reduce((a, r) => a + r.errors, 0);
  if (done !== jobs)
    throw new Error(`dagbot pg claim${apart ? " (apart)" : ""}: ${done} of ${jobs} done (${errors} errors)`);
  return {
    perSecond: done / seconds,
    cpu,
    errors,
    firstError: results.find((r) => r.firstError)?.firstError,
  };
}

const RAW_SCHEMA = `
CREATE TABLE IF NOT EXISTS raw_jobs (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  status text NOT NULL,
  priority integer NOT NULL DEFAULT 0,
  locked_by text,
  updated_at timestamptz
);
CREATE INDEX IF NOT EXISTS raw_jobs_queued ON raw_jobs (priority DESC, id) WHERE status = 'queued';`;

const RAW_CLAIM = `UPDATE raw_jobs SET status = 'running', locked_by = $1, updated_at = now()
  WHERE id = (SELECT id FROM raw_jobs WHERE status = 'queued' ORDER BY priority DESC, id LIMIT 1 FOR UPDATE SKIP LOCKED)
  RETURNING id`;
const RAW_DONE = `UPDATE raw_jobs SET status = 'done', updated_at = now() WHERE id = $1 AND status = 'running'`;

/** The limit: the same claim/complete pair in two bare statements, nothing else. */
async function rawRound(pool, workers, jobs, meter) {
  await pool.query("INSERT INTO raw_jobs (status) SELECT 'queued' FROM generate_series(1, $1)", [jobs]);
  const m = await meter.start();
  const t0 = performance.now();
  const counts = await Promise.all(
    Array.from({ length: workers }, async (_, i) => {
      let n = 0;
      for (;;) {
        const { rows } = await pool.query(RAW_CLAIM, [`raw-${i}`]);
        if (rows.length === 0) return n;
        await pool.query(RAW_DONE, [rows[0].id]);
        n += 1;
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  const cpu = await m.stop(jobs);
  const done = counts.reduce((a, b) => a + b, 0);
  if (done !== jobs) throw new Error(`raw pg claim: ${done} of ${jobs} done`);
  return { perSecond: done / seconds, cpu };
}

/**
 * graphile-worker's batching settings: `localQueue` (preset.worker.localQueue.size, jobs fetched and
 * locked per query) and `completeBatchDelay` (completeJobBatchDelay, ms to gather completions into
 * one statement); -1 is graphile-worker's default for both (off).
 */
export const GRAPHILE_DEFAULT = { name: "default", localQueue: -1, completeBatchDelay: -1 };
/**
 * Its fastest settings for this workload on this machine with a local queue of at most 1 % of the
 * round's jobs (bench/graphile-sweep.mjs; the figures and why the bound are in bench/README.md,
 * Findings, "graphile-worker at its best"): the bench judges dagbot against these.
 */
export const GRAPHILE_BEST = {
  name: "localQueue 200, completeJobBatchDelay 0 ms",
  localQueue: 200,
  completeBatchDelay: 0,
};
/**
 * graphile-worker keeping dagbot's promise: it fetches only as many jobs as it has free slots
 * (localQueue 8 = concurrency 8), so no job sits locked in one worker's queue while another worker
 * could run it, as a dagbot node claims only for free slots; completions still batched, at once. The
 * judged comparison (bench/README.md, "graphile-worker at dagbot's promise"): a local queue of 200
 * is faster because it promises less.
 */
export const GRAPHILE_AT_OUR_PROMISE = {
  name: "localQueue 8 (its free slots), completeJobBatchDelay 0 ms",
  localQueue: 8,
  completeBatchDelay: 0,
};

/**
 * graphile-worker 0.17 at its best (bench/graphile-child.mjs): in its own process, on `jobs` no-op
 * jobs added first (enough for a steady state), concurrency 8, a pool of the same size; timed from
 * the first job's start until the jobs table is empty. Server CPU is metered here, over the run.
 */
export async function graphileRound(url, jobs, meter, settings = GRAPHILE_DEFAULT) {
  const child = spawn(
    process.execPath,
    [
      fileURLToPath(new URL("./graphile-child.mjs", import.meta.url)),
      url,
      String(jobs),
      "8",
      String(POOL_SIZE),
      String(settings.localQueue),
      String(settings.completeBatchDelay),
    ],
    { stdio: ["pipe", "pipe", "inherit"] },
  );
  const exited = once(child, "exit");
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const next = async (what) => {
    const { value, done } = await lines.next();
    if (done) throw new Error(`graphile-worker child ended before ${what} (exit ${child.exitCode})`);
    return value;
  };
  try {
    const first = await next("ready");
    if (first !== "ready") throw new Error(`graphile-worker child: no ready line (${first})`);
    const m = await meter.start();
    child.stdin.write("go\n");
    const result = JSON.parse(await next("its result"));
    const cpu = await m.stop(jobs);
    // Closing its stdin too: the child's line reader would otherwise keep it alive.
    child.stdin.end("end\n");
    const [code] = await exited;
    if (code !== 0) throw new Error(`graphile-worker child exited ${code}`);
    return { perSecond: result.perSecond, cpu: { serverUs: cpu.serverUs, clientUs: result.clientUs } };
  } finally {
    if (child.exitCode === null) child.kill("SIGKILL");
  }
}

/**
 * The claim path with a large backlog: tasks queued once in their own database (its own Store),
 * then each round `jobs` of them claimed and finished by 8 workers running the node's loop, so
 * every pick runs with at least 10,000 still queued behind it (statistics as autovacuum left them).
 */
async function backlogRound(store, jobs) {
  const budget = { left: jobs };
  const backlogNode = offer(ROOM, "bench-backlog-node");
  const m0 = performance.now();
  const results = await Promise.all(
    Array.from({ length: 8 }, () => claimLoop(store, backlogNode, { budget })),
  );
  const done = results.reduce((a, r) => a + r.done, 0);
  if (done !== jobs)
    throw new Error(
      `dagbot pg backlog: ${done} of ${jobs} done (${results.find((r) => r.firstError)?.firstError ?? "backlog ran out"})`,
    );
  return { done, seconds: (performance.now() - m0) / 1000 };
}

/** A connected client on `url` and a CPU meter of that database's backends. */
export async function metered(url) {
  const admin = new pg.Client({ connectionString: url });
  admin.on("error", () => {});
  await admin.connect();
  return { admin, meter: cpuMeter(admin, new URL(url).pathname.slice(1)) };
}

/**
 * Rounds of every variant, interleaved (dagbot, raw, dagbot over a backlog and graphile-worker take
 * turns in each round), so a slow moment of the machine hits all of them alike. Each of the last
 * two has its own database.
 */
export async function benchClaimPostgres(
  scratch,
  { rounds, jobs, workerCounts, graphileJobs, backlog, log },
) {
  const url = await scratch.database("claim");
  const backlogUrl = await scratch.database("backlog");
  const graphileUrl = await scratch.database("graphile");
  const graphileDefaultUrl = await scratch.database("graphile_default");
  const graphilePromiseUrl = await scratch.database("graphile_promise");
  const { openPostgresStore } = await load("adapters/postgres/index.js");
  const store = await openPostgresStore(url, { poolSize: POOL_SIZE });
  const backlogStore = await openPostgresStore(backlogUrl, { poolSize: POOL_SIZE });
  // Idle connections stay open, so the CPU meter sees the same backends from start to end.
  const pool = new pg.Pool({ connectionString: url, max: POOL_SIZE, idleTimeoutMillis: 0 });
  pool.on("error", () => {});
  const { admin, meter } = await metered(url);
  const backlogSide = await metered(backlogUrl);
  const graphileSide = await metered(graphileUrl);
  const graphileDefaultSide = await metered(graphileDefaultUrl);
  const graphilePromiseSide = await metered(graphilePromiseUrl);
  const out = {
    finishAndClaim: hasFinishAndClaim(store),
    dagbot: {},
    apart: {},
    raw: {},
    graphile: [],
    graphileSettings: GRAPHILE_BEST,
    graphileDefault: [],
    graphilePromise: [],
    graphilePromiseSettings: GRAPHILE_AT_OUR_PROMISE,
    backlog: { queued: backlog, perSecond: [], ratio: [] },
    cpu: {
      dagbot: {},
      apart: {},
      raw: {},
      graphile: [],
      graphileDefault: [],
      graphilePromise: [],
      backlog: [],
    },
    errors: 0,
    firstError: null,
  };
  const cpuLine = (c) => `${Math.round(c.serverUs)}+${Math.round(c.clientUs)} µs`;
  const top = Math.max(...workerCounts);
  try {
    await pool.query(RAW_SCHEMA);
    const fence = await leadRoom(store, ROOM);
    const backlogFence = await leadRoom(backlogStore, ROOM);
    // Enough that `backlog` tasks are still queued behind the last pick of the last round.
    await queueTasks(backlogStore, backlogFence, "backlog", backlog + 200 + rounds * jobs);
    // A warm-up so the first measured round does not pay for cold caches and statement preparation.
    await dagbotRound(store, fence, "warm", 4, 200, meter);
    await dagbotRound(store, fence, "warm", 4, 200, meter, true);
    await rawRound(pool, 4, 200, meter);
    await backlogRound(backlogStore, 200);
    for (let round = 0; round < rounds; round++) {
      for (const w of workerCounts) {
        // The two dagbot loops swap places every round: the tasks table grows as the run goes on.
        const loops = {};
        for (const apart of round % 2 === 0 ? [false, true] : [true, false])
          loops[apart ? "apart" : "dagbot"] = await dagbotRound(store, fence, round, w, jobs, meter, apart);
        for (const [key, d] of Object.entries(loops)) {
          (out[key][w] ??= []).push(d.perSecond);
          (out.cpu[key][w] ??= []).push(d.cpu);
          out.errors += d.errors;
          out.firstError ??= d.firstError ?? null;
        }
        const d = loops.dagbot;
        const a = loops.apart;
        const r = await rawRound(pool, w, jobs, meter);
        (out.raw[w] ??= []).push(r.perSecond);
        (out.cpu.raw[w] ??= []).push(r.cpu);
        log(
          `  pg round ${round + 1}: ${w} workers dagbot ${d.perSecond.toFixed(0)}/s (${cpuLine(d.cpu)}), ` +
            `finish and claim apart ${a.perSecond.toFixed(0)}/s (${cpuLine(a.cpu)}), ` +
            `raw ${r.perSecond.toFixed(0)}/s (${cpuLine(r.cpu)})`,
        );
        if (w === top) {
          const m = await backlogSide.meter.start();
          const b = await backlogRound(backlogStore, jobs);
          const cpu = await m.stop(b.done);
          const perSecond = b.done / b.seconds;
          out.backlog.perSecond.push(perSecond);
          out.backlog.ratio.push(perSecond / d.perSecond);
          out.cpu.backlog.push(cpu);
          log(
            `  pg round ${round + 1}: ${w} workers dagbot with ${backlog}+ tasks queued ` +
              `${perSecond.toFixed(0)}/s (${cpuLine(cpu)})`,
          );
        }
      }
      const peers = [
        ["graphile", graphileUrl, graphileSide, GRAPHILE_BEST],
        ["graphilePromise", graphilePromiseUrl, graphilePromiseSide, GRAPHILE_AT_OUR_PROMISE],
        ["graphileDefault", graphileDefaultUrl, graphileDefaultSide, GRAPHILE_DEFAULT],
      ];
      // The peers take turns too: each round starts with another one.
      const order = peers.map((_, i) => peers[(i + round) % peers.length]);
      for (const [key, peerUrl, side, settings] of order) {
        const g = await graphileRound(peerUrl, graphileJobs, side.meter, settings);
        out[key].push(g.perSecond);
        out.cpu[key].push(g.cpu);
        log(
          `  pg round ${round + 1}: graphile-worker ${settings.name} (own process, ${graphileJobs} jobs, ` +
            `concurrency 8) ${g.perSecond.toFixed(0)}/s (${cpuLine(g.cpu)})`,
        );
      }
    }
  } finally {
    for (const c of [
      admin,
      backlogSide.admin,
      graphileSide.admin,
      graphileDefaultSide.admin,
      graphilePromiseSide.admin,
    ])
      await c.end();
    await pool.end();
    await store.close();
    await backlogStore.close();
  }
  return out;
}
