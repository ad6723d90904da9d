/**
 * Section 1, PostgreSQL: claim + complete per second through dagbot's store (one Store per node,
 * as `dagbot node` has: a pool of 10 connections shared by N concurrent claim/finish loops), next
 * to a raw SKIP LOCKED loop on a partial index (same pool size, same database) and graphile-worker
 * with concurrency 8 on no-op jobs, in the same run.
 */
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { URL } from "node:url";
import pg from "pg";
import { cpuMeter } from "./lib/cpu.mjs";
import { load } from "./lib/dist.mjs";
import { claimLoop, leadRoom, offer, queueTasks } from "./lib/queue.mjs";

const ROOM = "bench-claim";
const POOL_SIZE = 10;

/** dagbot: `workers` concurrent claim/finish loops over one Store. */
async function dagbotRound(store, fence, round, workers, jobs, meter) {
  await queueTasks(store, fence, `claim_r${round}_w${workers}`, jobs);
  const m = await meter.start();
  const t0 = performance.now();
  const results = await Promise.all(
    Array.from({ length: workers }, (_, i) => claimLoop(store, offer(ROOM, `bench-w${i}`))),
  );
  const seconds = (performance.now() - t0) / 1000;
  const cpu = await m.stop(jobs);
  const done = results.reduce((a, r) => a + r.done, 0);
  const errors = results.reduce((a, r) => a + r.errors, 0);
  if (done !== jobs) throw new Error(`dagbot pg claim: ${done} of ${jobs} done (${errors} errors)`);
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
 * graphile-worker 0.17: `jobs` no-op jobs added first, then a runner with concurrency 8 on a pool
 * of the same size until the jobs table is empty; timed from the first job's start.
 */
async function graphileRound(url, jobs, admin, meter) {
  const gw = await import("graphile-worker");
  const logger = new gw.Logger(() => () => {});
  const pool = new pg.Pool({ connectionString: url, max: POOL_SIZE });
  // A connection closed under the pool (the scratch database dropped) must not crash the bench.
  pool.on("error", () => {});
  pool.on("connect", (client) => client.on("error", () => {}));
  const utils = await gw.makeWorkerUtils({ pgPool: pool, logger });
  let runner = null;
  try {
    await utils.migrate();
    for (let made = 0; made < jobs; made += 1000) {
      const n = Math.min(1000, jobs - made);
      await utils.addJobs(Array.from({ length: n }, () => ({ identifier: "noop", payload: {} })));
    }
    let succeeded = 0;
    let t0 = null;
    let allSucceeded;
    const allDone = new Promise((resolve) => (allSucceeded = resolve));
    const m = await meter.start();
    runner = await gw.run({
      pgPool: pool,
      concurrency: 8,
      noHandleSignals: true,
      pollInterval: 1000,
      logger,
      taskList: {
        noop: async () => {
          t0 ??= performance.now();
        },
      },
    });
    runner.events.on("job:success", () => {
      succeeded += 1;
      if (succeeded === jobs) allSucceeded();
    });
    const stall = new AbortController();
    await Promise.race([
      allDone,
      sleep(120_000, null, { signal: stall.signal }).then(() =>
        Promise.reject(new Error("graphile-worker stalled")),
      ),
    ]).finally(() => stall.abort());
    // job:success fires before the completion is written; the figure counts written completions.
    for (;;) {
      const { rows } = await admin.query("SELECT count(*)::int AS n FROM graphile_worker.jobs");
      if (rows[0].n === 0) break;
      await sleep(1);
    }
    const seconds = (performance.now() - t0) / 1000;
    return { perSecond: jobs / seconds, cpu: await m.stop(jobs) };
  } finally {
    await runner?.stop();
    await utils.release();
    await pool.end();
  }
}

/**
 * Rounds of every variant, interleaved (dagbot, raw and graphile-worker take turns in each round),
 * so a slow moment of the machine hits all of them alike.
 */
export async function benchClaimPostgres(scratch, { rounds, jobs, workerCounts, log }) {
  const url = await scratch.database("claim");
  const { openPostgresStore } = await load("adapters/postgres/index.js");
  const store = await openPostgresStore(url, { poolSize: POOL_SIZE });
  // Idle connections stay open, so the CPU meter sees the same backends from start to end.
  const pool = new pg.Pool({ connectionString: url, max: POOL_SIZE, idleTimeoutMillis: 0 });
  pool.on("error", () => {});
  const admin = new pg.Client({ connectionString: url });
  admin.on("error", () => {});
  await admin.connect();
  const meter = cpuMeter(admin, new URL(url).pathname.slice(1));
  const out = {
    dagbot: {},
    raw: {},
    graphile: [],
    cpu: { dagbot: {}, raw: {}, graphile: [] },
    errors: 0,
    firstError: null,
  };
  const cpuLine = (c) => `${Math.round(c.serverUs)}+${Math.round(c.clientUs)} µs`;
  try {
    await pool.query(RAW_SCHEMA);
    const fence = await leadRoom(store, ROOM);
    // A warm-up so the first measured round does not pay for cold caches and statement preparation.
    await dagbotRound(store, fence, "warm", 4, 200, meter);
    await rawRound(pool, 4, 200, meter);
    for (let round = 0; round < rounds; round++) {
      for (const w of workerCounts) {
        const d = await dagbotRound(store, fence, round, w, jobs, meter);
        (out.dagbot[w] ??= []).push(d.perSecond);
        (out.cpu.dagbot[w] ??= []).push(d.cpu);
        out.errors += d.errors;
        out.firstError ??= d.firstError ?? null;
        const r = await rawRound(pool, w, jobs, meter);
        (out.raw[w] ??= []).push(r.perSecond);
        (out.cpu.raw[w] ??= []).push(r.cpu);
        log(
          `  pg round ${round + 1}: ${w} workers dagbot ${d.perSecond.toFixed(0)}/s (${cpuLine(d.cpu)}), ` +
            `raw ${r.perSecond.toFixed(0)}/s (${cpuLine(r.cpu)})`,
        );
      }
      const g = await graphileRound(url, jobs, admin, meter);
      out.graphile.push(g.perSecond);
      out.cpu.graphile.push(g.cpu);
      log(
        `  pg round ${round + 1}: graphile-worker (concurrency 8) ${g.perSecond.toFixed(0)}/s (${cpuLine(g.cpu)})`,
      );
    }
  } finally {
    await admin.end();
    await pool.end();
    await store.close();
  }
  return out;
}
