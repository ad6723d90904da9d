/**
 * `npm run bench`: builds nothing itself (the npm script runs `npm run build` first), runs every
 * section against dist/, and writes bench/results/latest.json and the results part of
 * bench/README.md. Quick mode by default (about 3 minutes on 2 cores); `--full` for more rounds;
 * `--only claim-pg,claim-sqlite,dag,floor,failover,chat,retention,http,edge` to run some sections (results are then partial).
 */
import { loadavg } from "node:os";
import { performance } from "node:perf_hooks";
import process from "node:process";
import { setTimeout } from "node:timers";
import { fileURLToPath, URL } from "node:url";
import { benchChat, hasStartCommand } from "./chat.mjs";
import { benchClaimPostgres } from "./claim-pg.mjs";
import { benchClaimSqlite } from "./claim-sqlite.mjs";
import { benchDagOverhead, SCENARIOS } from "./dag-overhead.mjs";
import { benchEdge } from "./edge.mjs";
import { benchFailover, FAILOVER_TTL_MS } from "./failover.mjs";
import { benchFloor, benchOneTaskRun, FLOOR_SHAPES } from "./floor.mjs";
import { benchHttp } from "./http.mjs";
import { benchRetention } from "./retention.mjs";
import { machineInfo } from "./lib/machine.mjs";
import { writeResults } from "./lib/report.mjs";
import { Scratch } from "./lib/scratch.mjs";
import { summarize } from "./lib/stats.mjs";
import { STORE_KINDS } from "./lib/stores.mjs";
import { judge } from "./lib/targets.mjs";

const BENCH_DIR = fileURLToPath(new URL(".", import.meta.url));
const SECTIONS = [
  "claim-pg",
  "claim-sqlite",
  "dag",
  "floor",
  "failover",
  "chat",
  "retention",
  "http",
  "edge",
];

const MODES = {
  quick: {
    claimPg: { rounds: 3, jobs: 500, workerCounts: [1, 4, 8], graphileJobs: 20_000, backlog: 10_000 },
    claimSqlite: { rounds: 3, jobs: 300, processCounts: [1, 2, 4] },
    dag: { rounds: 1, chainRounds: 3 },
    floor: { rounds: 2, oneTaskRuns: 10 },
    failover: { kills: 2, stops: 3 },
    chat: { samples: 50 },
    // The figure is "after 10,000 commands and 1,000 runs"; on PostgreSQL each command costs about
    // 15 commits, so quick mode drives a tenth there (the shape of the result is the same).
    retention: { commands: { sqlite: 10_000, postgres: 1_000 } },
    http: { seconds: 3 },
    // 1,000 edges in 4 processes against 3 cores; tasks kept modest, each is an `sh` process.
    edge: { edges: 1000, processes: 4, tasks: 3000, poolSize: 8, runTimeoutMs: 120_000 },
    watchdogMs: 18 * 60_000,
  },
  full: {
    claimPg: { rounds: 5, jobs: 2000, workerCounts: [1, 4, 8], graphileJobs: 20_000, backlog: 10_000 },
    claimSqlite: { rounds: 5, jobs: 1000, processCounts: [1, 2, 4] },
    dag: { rounds: 3, chainRounds: 5 },
    floor: { rounds: 5, oneTaskRuns: 20 },
    failover: { kills: 5, stops: 5 },
    chat: { samples: 100 },
    retention: { commands: { sqlite: 10_000, postgres: 10_000 } },
    http: { seconds: 10 },
    edge: { edges: 1000, processes: 8, tasks: 10_000, poolSize: 8, runTimeoutMs: 900_000 },
    watchdogMs: 80 * 60_000,
  },
};

function parseArgs(argv) {
  const opts = { mode: "quick", only: SECTIONS };
  for (const a of argv) {
    if (a === "--full") opts.mode = "full";
    else if (a === "--quick") opts.mode = "quick";
    else if (a.startsWith("--only=")) {
      opts.only = a.slice(7).split(",");
      const bad = opts.only.filter((s) => !SECTIONS.includes(s));
      if (bad.length > 0)
        throw new Error(`bench: unknown section ${bad.join(", ")} (known: ${SECTIONS.join(", ")})`);
    } else
      throw new Error(`bench: unknown argument ${a} (use --full, --quick or --only=${SECTIONS.join(",")})`);
  }
  return opts;
}

const log = (m) => process.stdout.write(`${m}\n`);
const ratios = (a, b) => a.map((x, i) => x / b[i]);
const mb = (kbs) => summarize(kbs.map((kb) => Math.round(kb / 1024)));

/** Per-pair CPU of the rounds: server and client µs, each summarised. */
const cpuSummary = (xs) => ({
  serverUs: summarize(xs.map((x) => x.serverUs)),
  clientUs: summarize(xs.map((x) => x.clientUs)),
  totalUs: summarize(xs.map((x) => x.serverUs + x.clientUs)),
});

function claimPgSummary(r) {
  const workers = {};
  for (const w of Object.keys(r.dagbot))
    workers[w] = {
      dagbot: summarize(r.dagbot[w]),
      apart: summarize(r.apart[w]),
      raw: summarize(r.raw[w]),
      ratioRaw: summarize(ratios(r.dagbot[w], r.raw[w])),
      ratioApartRaw: summarize(ratios(r.apart[w], r.raw[w])),
      // The effect of finishAndClaim alone: the node's loop over the same loop with the two apart.
      ratioApart: summarize(ratios(r.dagbot[w], r.apart[w])),
      dagbotCpu: cpuSummary(r.cpu.dagbot[w]),
      apartCpu: cpuSummary(r.cpu.apart[w]),
      rawCpu: cpuSummary(r.cpu.raw[w]),
    };
  const top = String(Math.max(...Object.keys(r.dagbot).map(Number)));
  return {
    finishAndClaim: r.finishAndClaim,
    workers,
    graphileSettings: r.graphileSettings,
    graphile: summarize(r.graphile),
    graphileCpu: cpuSummary(r.cpu.graphile),
    graphileDefault: summarize(r.graphileDefault),
    graphileDefaultCpu: cpuSummary(r.cpu.graphileDefault),
    graphilePromiseSettings: r.graphilePromiseSettings,
    graphilePromise: summarize(r.graphilePromise),
    graphilePromiseCpu: cpuSummary(r.cpu.graphilePromise),
    backlog: {
      queued: r.backlog.queued,
      perSecond: summarize(r.backlog.perSecond),
      ratio: summarize(r.backlog.ratio),
      cpu: cpuSummary(r.cpu.backlog),
    },
    ratioGraphile: summarize(ratios(r.dagbot[top], r.graphile)),
    ratioGraphileDefault: summarize(ratios(r.dagbot[top], r.graphileDefault)),
    ratioGraphilePromise: summarize(ratios(r.dagbot[top], r.graphilePromise)),
    errors: r.errors,
    firstError: r.firstError,
  };
}

function claimSqliteSummary(r) {
  const processes = {};
  for (const p of Object.keys(r.dagbot))
    processes[p] = {
      dagbot: summarize(r.dagbot[p]),
      raw: summarize(r.raw[p]),
      rawNormal: summarize(r.rawNormal[p]),
      ratioRaw: summarize(ratios(r.dagbot[p], r.raw[p])),
      dagbotNormal: summarize(r.dagbotNormal[p]),
      ratioRawNormal: summarize(ratios(r.dagbotNormal[p], r.rawNormal[p])),
      apart: summarize(r.apart[p]),
      apartNormal: summarize(r.apartNormal[p]),
      ratioApartRaw: summarize(ratios(r.apart[p], r.raw[p])),
      ratioApartRawNormal: summarize(ratios(r.apartNormal[p], r.rawNormal[p])),
      // The effect of finishAndClaim alone, with each pragma.
      ratioApart: summarize(ratios(r.dagbot[p], r.apart[p])),
      ratioApartNormal: summarize(ratios(r.dagbotNormal[p], r.apartNormal[p])),
      apartCpuUs: summarize(r.cpu.apart[p]),
      apartNormalCpuUs: summarize(r.cpu.apartNormal[p]),
      dagbotNormalCpuUs: summarize(r.cpu.dagbotNormal[p]),
      dagbotCpuUs: summarize(r.cpu.dagbot[p]),
      rawCpuUs: summarize(r.cpu.raw[p]),
      rawNormalCpuUs: summarize(r.cpu.rawNormal[p]),
    };
  return {
    finishAndClaim: r.finishAndClaim,
    processes,
    busyErrors: r.errors,
    firstError: r.firstError,
    rawErrors: r.rawErrors,
  };
}

function dagSummary(r) {
  const scenarios = {};
  for (const s of SCENARIOS) {
    const rounds = r.scenarios[s.key] ?? [];
    const pick = (f) => summarize(rounds.map(f));
    const pp = (k) => ({ p50: pick((x) => x[k].p50), p99: pick((x) => x[k].p99) });
    scenarios[s.key] = {
      label: s.label,
      statuses: rounds.map((x) => x.status),
      wallMs: pick((x) => x.wallMs),
      readyToClaimed: pp("readyToClaimed"),
      readyToQueued: pp("readyToQueued"),
      queuedToClaimed: pp("queuedToClaimed"),
      claimedToRecorded: pp("claimedToRecorded"),
    };
  }
  return {
    scenarios,
    idleRssMB: mb(r.idleRssKb),
    busyRssMB: mb(r.busyRssKb),
    busyErrorsInLogs: r.busyLogLines.length,
    busyErrorExamples: r.busyLogLines.slice(0, 3),
    warningsInLogs: r.warnings,
  };
}

/** Per shape: each variant's wall times, and the ratios to ninja taken per round. */
function floorSummary(r) {
  const shapes = {};
  for (const s of FLOOR_SHAPES) {
    const v = r.rounds[s.key];
    if (v === undefined) continue;
    const ratio = (x) =>
      v[x] === undefined || v.ninja === undefined ? undefined : summarize(ratios(v[x], v.ninja));
    shapes[s.key] = {
      label: s.label,
      ...Object.fromEntries(Object.entries(v).map(([k, xs]) => [k, summarize(xs)])),
      makeRatio: ratio("make"),
      nodeRatio: ratio("node"),
      sqliteRatio: ratio("sqlite"),
      // dagbot beside the Node floor: what dagbot itself adds to starting the processes from Node.
      sqliteOverNode: v.node === undefined ? undefined : summarize(ratios(v.sqlite, v.node)),
      // The same without an fsync at a commit (sqlite_synchronous = "normal"), and what the fsyncs
      // cost a task: (default − normal) / tasks, per round.
      ...(v["sqlite-normal"] === undefined || v.node === undefined
        ? {}
        : {
            normalOverNode: summarize(ratios(v["sqlite-normal"], v.node)),
            fsyncMsPerTask: summarize(v.sqlite.map((ms, i) => (ms - v["sqlite-normal"][i]) / s.tasks)),
            nodeMsPerTask: summarize(v.node.map((ms) => ms / s.tasks)),
          }),
      // DAGBOT_BENCH_DIST_B's build beside this one, per round (an A/B run).
      ...(v["sqlite-b"] === undefined
        ? {}
        : { sqliteBRatio: ratio("sqlite-b"), bOverA: summarize(ratios(v["sqlite-b"], v.sqlite)) }),
      postgresRatio: ratio("postgres"),
    };
  }
  return { slots: r.slots, shapes, loadAverages: r.loadAverages };
}

function failoverSummary(r) {
  return {
    ttlMs: FAILOVER_TTL_MS,
    killToAcquiredMs: summarize(r.killToAcquiredMs),
    killToFirstWriteMs: summarize(r.killToFirstWriteMs),
    stopToReleasedMs: summarize(r.stopToReleasedMs),
    stopToAcquiredMs: summarize(r.stopToAcquiredMs),
    busyErrorsInLogs: r.busyLogLines.length,
    busyErrorExamples: r.busyLogLines.slice(0, 3),
  };
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const cfg = MODES[opts.mode];
  const started = performance.now();
  const scratch = new Scratch();
  let interrupted = false;
  const onSignal = () => {
    interrupted = true;
    log("bench: interrupted; cleaning up");
    void scratch.cleanup().finally(() => process.exit(130));
  };
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  setTimeout(() => {
    log(`bench: watchdog: still running after ${cfg.watchdogMs / 60_000} min; giving up`);
    void scratch.cleanup().finally(() => process.exit(1));
  }, cfg.watchdogMs).unref();

  const results = { mode: opts.mode, sections: opts.only, machine: await machineInfo(), errors: {} };
  log(
    `bench (${opts.mode}): ${results.machine.nproc} × ${results.machine.cpuModel}, dagbot ${results.machine.versions.dagbot}`,
  );
  const section = async (name, fn) => {
    if (!opts.only.includes(name) || interrupted) return;
    const t = performance.now();
    log(`${name}:`);
    try {
      await fn();
    } catch (e) {
      results.errors[name] = e instanceof Error ? e.message : String(e);
      log(`  ${name} failed: ${results.errors[name]}`);
    }
    log(`  (${((performance.now() - t) / 1000).toFixed(1)} s)`);
  };
  try {
    await section("claim-pg", async () => {
      (results.claim ??= {}).postgres = claimPgSummary(
        await benchClaimPostgres(scratch, { ...cfg.claimPg, log }),
      );
    });
    await section("claim-sqlite", async () => {
      (results.claim ??= {}).sqlite = claimSqliteSummary(
        await benchClaimSqlite(scratch, { ...cfg.claimSqlite, log }),
      );
    });
    await section("dag", async () => {
      for (const kind of STORE_KINDS)
        (results.dag ??= {})[kind] = dagSummary(await benchDagOverhead(scratch, kind, { ...cfg.dag, log }));
    });
    await section("floor", async () => {
      // Before the floor's rounds start their PostgreSQL nodes: the start-up is timed on a quiet store.
      const oneTask = await benchOneTaskRun(scratch, { runs: cfg.floor.oneTaskRuns, log });
      results.floor = {
        ...floorSummary(await benchFloor(scratch, { rounds: cfg.floor.rounds, log })),
        oneTaskRun: { ...summarize(oneTask.ms), firstMs: oneTask.firstMs, quiet: oneTask.quiet },
      };
    });
    await section("failover", async () => {
      for (const kind of STORE_KINDS)
        (results.failover ??= {})[kind] = failoverSummary(
          await benchFailover(scratch, kind, { ...cfg.failover, log }),
        );
    });
    await section("retention", async () => {
      for (const kind of STORE_KINDS)
        (results.retention ??= {})[kind] = await benchRetention(scratch, kind, {
          commands: cfg.retention.commands[kind],
          log,
        });
    });
    await section("http", async () => {
      for (const kind of STORE_KINDS)
        (results.http ??= {})[kind] = await benchHttp(scratch, kind, { ...cfg.http, log });
    });
    await section("edge", async () => {
      // DAGBOT_BENCH_EDGES runs another fleet size (tasks scaled with it): where 1,000 do not fit.
      const edges = Number(process.env.DAGBOT_BENCH_EDGES ?? cfg.edge.edges);
      const tasks = Math.round((cfg.edge.tasks * edges) / cfg.edge.edges);
      results.edge = await benchEdge(scratch, { ...cfg.edge, edges, tasks, log });
    });
    if (opts.only.includes("chat") && !hasStartCommand()) {
      results.chat = { measured: false, reason: "`dagbot start` (the Matrix bot) is not built yet" };
    } else {
      await section("chat", async () => {
        results.chat = { measured: true, ...(await benchChat(scratch, { ...cfg.chat, log })) };
      });
      if (results.errors.chat !== undefined)
        results.chat = { measured: false, reason: `failed: ${results.errors.chat}` };
    }
  } finally {
    await scratch.cleanup();
  }
  results.durationS = (performance.now() - started) / 1000;
  results.loadAverageAtEnd = loadavg().map((x) => Math.round(x * 100) / 100);
  results.targets = judge(results);
  // A run of some sections must not replace the committed table of a whole run.
  const partial = SECTIONS.some((s) => !opts.only.includes(s));
  writeResults(BENCH_DIR, results, partial);
  log("");
  for (const t of results.targets)
    log(`${t.verdict.padEnd(12)} ${t.figure}: ${t.shown} (target ${t.target})`);
  log(
    `\nbench: ${results.durationS.toFixed(0)} s; results in ` +
      (partial
        ? "bench/results/partial.json (some sections only)"
        : "bench/results/latest.json and bench/README.md"),
  );
  if (Object.keys(results.errors).length > 0) process.exitCode = 1;
}

await main();
