/**
 * A leader's lease renewal while its node's store pool is saturated (docs/operations.md, "Running
 * many nodes"): a core-like Store (pool of 8) whose every pooled connection is held by a claim
 * waiting on a lock for HOLD_MS, with 32 more claims queued for the pool, renews its room's lease
 * as the lease batcher does (one syncLeases). On a build with the lease lane the renewal takes its
 * own connection; on one without, it waits in the pool's queue. Standalone, not a section of
 * `npm run bench`: `node bench/lease-lane.mjs [rounds]`, against dist/ or DAGBOT_BENCH_DIST (run
 * it once per build, in alternation, for an A/B). DAGBOT_BENCH_LANE_URL sends the Store through a
 * transaction-mode pooler instead (e.g. PgBouncer in front of the same server, database
 * dagbot_bench_lane; the lock is taken directly), where the lane helps only while the pooler has a
 * server connection free.
 */
import { performance } from "node:perf_hooks";
import process from "node:process";
import { URL } from "node:url";
import pg from "pg";
import { DIST, load } from "./lib/dist.mjs";
import { Scratch } from "./lib/scratch.mjs";

const POOL_SIZE = 8;
const QUEUED = 32;
const HOLD_MS = 3_000;
const ROOM = "!bench-lane:example.org";

const rounds = Number(process.argv[2] ?? 5);
const { openPostgresStore } = await load("adapters/postgres/index.js");
const scratch = new Scratch();
try {
  const direct = await scratch.database("lane");
  const viaPooler = process.env.DAGBOT_BENCH_LANE_URL;
  let url = direct;
  if (viaPooler !== undefined && viaPooler !== "") {
    const u = new URL(viaPooler);
    u.pathname = new URL(direct).pathname;
    url = u.toString();
  }
  const store = await openPostgresStore(url, {
    poolSize: POOL_SIZE,
    pooler: url === direct ? "none" : "transaction",
  });
  const session = { nodeId: "bench-leader", bootId: "b1" };
  const acquired = await store.acquireLease(ROOM, session, 10_000);
  const times = [];
  for (let r = 0; r < rounds; r++) {
    const holder = new pg.Client({ connectionString: direct });
    await holder.connect();
    await holder.query("BEGIN; LOCK TABLE tasks IN ACCESS EXCLUSIVE MODE");
    const released = new Promise((resolve) => setTimeout(resolve, HOLD_MS)).then(() =>
      holder.query("COMMIT"),
    );
    const claims = Array.from({ length: POOL_SIZE + QUEUED }, (_, i) =>
      store
        .claimTask({
          session: { nodeId: `w${i}`, bootId: "b1" },
          roomIds: [ROOM],
          labels: [],
          actions: ["noop"],
          leaseMs: 60_000,
        })
        .catch(() => null),
    );
    await new Promise((resolve) => setTimeout(resolve, 200)); // the claims take the pool
    const at = performance.now();
    const [answer] = await store.syncLeases(session, 10_000, [{ roomId: ROOM, term: acquired.term }]);
    const ms = performance.now() - at;
    if (answer?.outcome !== "renewed") throw new Error(`bench lease lane: ${JSON.stringify(answer)}`);
    times.push(ms);
    await released;
    await Promise.all(claims);
    await holder.end();
  }
  await store.close();
  const sorted = [...times].sort((a, b) => a - b);
  console.log(
    JSON.stringify({
      dist: DIST,
      pooler: url !== direct,
      pool: POOL_SIZE,
      queued: QUEUED,
      holdMs: HOLD_MS,
      renewalMs: times.map((t) => Math.round(t * 10) / 10),
      medianMs: Math.round(sorted[Math.floor(sorted.length / 2)] * 10) / 10,
    }),
  );
} finally {
  await scratch.cleanup();
}
