/**
 * Section 10, edge nodes (docs/operations.md, "Edge nodes"): 1,000 edge nodes against 3 core nodes on
 * one PostgreSQL database. The cores are real `dagbot node` processes holding the store and serving
 * /v1/edge/* with one edge token per edge; the edges are the load, many per process
 * (bench/edge-child.mjs: dist's startEdgeNode over its own EdgeStore client each), each with its own
 * node id and token, spread over the cores in three orders. Each task's action is `sh` appending one
 * line (run/task and attempt) to a records file, so what ran is counted from the actions' own records.
 * About mid-run, a core that is not the room's leader is killed with SIGKILL (a leader's loss is the
 * failover section's figure); the edges that talked to it move to the others.
 *
 * Figures, side by side from the same run: the PostgreSQL connections to the bench database
 * (pg_stat_activity sampled every 200 ms, the maximum; the bench's own watching store included),
 * the claim call's latency as the edge's client sees it (p50, p99), tasks per second, commits per
 * second (pg_stat_database.xact_commit over the run), each task run exactly once (from the records),
 * and the CPU each part of the machine spent over the run (cores, edge processes, PostgreSQL).
 */
import { createHash, randomBytes } from "node:crypto";
import { fork } from "node:child_process";
import { closeSync, cpSync, existsSync, openSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath, URL } from "node:url";
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { track } from "./lib/children.mjs";
import { Cluster, publishAndConfirm, waitFor } from "./lib/cluster.mjs";
import { adminUrl } from "./lib/scratch.mjs";
import { percentile } from "./lib/stats.mjs";
import { freshStore } from "./lib/stores.mjs";

const CHILD = fileURLToPath(new URL("./edge-child.mjs", import.meta.url));
/** The edges' heartbeat: every 10 s, a realistic interval for a large fleet (a core's default is 5 s). */
export const EDGE_HEARTBEAT_MS = 10_000;
/** Tasks per published DAG (a DAG document holds at most 64 KiB and 1,000 tasks). */
const TASKS_PER_DAG = 500;
const CORES = ["core-1", "core-2", "core-3"];
const TICK_MS = 10;

const sha = (t) => createHash("sha256").update(t).digest("hex");

async function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

function coreConfig({ nodeId, store, port, poolSize, cap, maxStreams, tokens }) {
  const tables = tokens
    .map(
      ({ nodeId: edge, token }) =>
        `[[http.tokens]]\nname = "${edge}"\nsha256 = "${sha(token)}"\nlevel = "edge"\nnode = "${edge}"\n`,
    )
    .join("\n");
  return `store_pool_size = ${poolSize}
node_id = "${nodeId}"
labels = ["core"]
capacity = 4
store = "${store}"
log_level = "warn"

[limits]
global_cap = ${cap}

[actions.true]
argv = ["true"]
timeout = "1m"
kill_grace = "1s"

[lease]
ttl = "10s"
renew_every = "3s"
acquire_every = "1s"

[http]
listen = "127.0.0.1:${port}"
max_streams = ${maxStreams}
max_connections = ${maxStreams * 4}
metrics = "open"

${tables}`;
}

/** The edges' shared config: capacity 1, the `append` action writing one record per run. */
function edgeConfig({ cores, tokenFile, records }) {
  const script = `printf '%s %s\\n' "$DAGBOT_RUN_ID/$DAGBOT_TASK_ID" "$DAGBOT_ATTEMPT" >> "$0"`;
  return `node_id = "edge-template"
labels = ["edge"]
capacity = 1
log_level = "warn"

[edge]
cores = ${JSON.stringify(cores)}
token_file = ${JSON.stringify(tokenFile)}

[lease]
ttl = "20s"
task_ttl = "15s"
renew_every = "5s"
acquire_every = "1s"

[actions.append]
argv = ["sh", "-c", ${JSON.stringify(script)}, ${JSON.stringify(records)}]
timeout = "1m"
kill_grace = "1s"
`;
}

function readRecords(path) {
  if (!existsSync(path)) return [];
  return readFileSync(path, "utf8")
    .split("\n")
    .filter((l) => l !== "");
}

function cpuMs(pid) {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
    // utime, stime, and the reaped children's (an edge process's action supervisor and its actions).
    return (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) * TICK_MS;
  } catch {
    return null;
  }
}

/** Busy and total CPU ms of the machine, from /proc/stat. */
function machineCpuMs() {
  const f = readFileSync("/proc/stat", "utf8").split("\n")[0].trim().split(/\s+/).slice(1).map(Number);
  const total = f.reduce((a, b) => a + b, 0);
  const idle = f[3] + f[4];
  return { busy: (total - idle) * TICK_MS, total: total * TICK_MS };
}

/** pids of the postgres processes (backends and the server's own) on this machine. */
function postgresPids() {
  const out = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (readFileSync(`/proc/${name}/comm`, "utf8").trim() === "postgres") out.push(Number(name));
    } catch {
      // gone
    }
  }
  return out;
}

/**
 * The claim route's time inside a core (dagbot_http_request_duration_seconds from its /metrics):
 * requests and mean ms, and the share answered within 25 ms; null when the core is gone.
 */
async function serverClaimTimes(base) {
  try {
    const text = await (await fetch(`${base}/metrics`)).text();
    const pick = (suffix, extra = "") => {
      const re = new RegExp(`^dagbot_http_request_duration_seconds_${suffix}\\{([^}]*)\\} (\\S+)$`, "gm");
      for (const m of text.matchAll(re))
        if (m[1].includes('route="/v1/edge/claim"') && m[1].includes(extra)) return Number(m[2]);
      return null;
    };
    const count = pick("count");
    const sum = pick("sum");
    const within25 = pick("bucket", 'le="0.025"');
    if (count === null || count === 0) return null;
    return { requests: count, meanMs: (1000 * sum) / count, within25msShare: within25 / count };
  } catch {
    return null;
  }
}

/** A core's edge claims by how it answered them (dagbot_edge_claims_total{answer}); null when gone. */
async function edgeClaimAnswers(base) {
  try {
    const text = await (await fetch(`${base}/metrics`, { signal: AbortSignal.timeout(10_000) })).text();
    const out = {};
    for (const m of text.matchAll(/^dagbot_edge_claims_total\{answer="([^"]+)"\} (\S+)$/gm))
      out[m[1]] = Number(m[2]);
    return out;
  } catch {
    return null;
  }
}

/** CPU between two snapshots as a share of the whole machine (all its cores = 100 %), per part. */
function cpuShares(a, b) {
  const machineMs = b.machine.total - a.machine.total;
  const share = (ms) => Math.round((1000 * ms) / machineMs) / 10;
  const delta = (x, y) => (x === null || y === null || y === undefined ? 0 : Math.max(0, x - y));
  let postgres = 0;
  for (const [pid, ms] of b.postgres) postgres += delta(ms, a.postgres.get(pid) ?? 0);
  return {
    machine: share(b.machine.busy - a.machine.busy),
    cores: Object.fromEntries(Object.keys(a.cores).map((id) => [id, share(delta(b.cores[id], a.cores[id]))])),
    edgeProcesses: share(b.edges.reduce((sum, ms, i) => sum + delta(ms, a.edges[i]), 0)),
    postgres: share(postgres),
  };
}

export async function benchEdge(
  scratch,
  { edges: edgeCount, processes, tasks, poolSize, idleSeconds = 10, runTimeoutMs = 180_000, log },
) {
  const { dir, location, store } = await freshStore(scratch, "postgres", "edge");
  const database = new URL(location).pathname.slice(1);
  const records = join(dir, "records.txt");
  const ports = [];
  for (const _ of CORES) ports.push(await freePort());
  const bases = ports.map((p) => `http://127.0.0.1:${p}`);
  const edges = Array.from({ length: edgeCount }, (_, i) => {
    const k = i % CORES.length;
    return {
      nodeId: `edge-${String(i).padStart(4, "0")}`,
      token: randomBytes(24).toString("hex"),
      // Three orders, so each core is the first core of a third of the edges.
      cores: [...bases.slice(k), ...bases.slice(0, k)],
    };
  });
  const cap = Math.min(edgeCount, 1000);
  const maxStreams = edgeCount + 100;
  const cluster = new Cluster({
    dir,
    storeUrl: location,
    store,
    lease: { ttl: "10s", renew_every: "3s", acquire_every: "1s" },
    count: 0,
  });
  CORES.forEach((nodeId, i) => {
    const path = join(dir, `${nodeId}.toml`);
    writeFileSync(
      path,
      coreConfig({ nodeId, store: location, port: ports[i], poolSize, cap, maxStreams, tokens: edges }),
    );
    cluster.configs.set(nodeId, path);
  });
  const tokenFile = join(dir, "edge.token");
  writeFileSync(tokenFile, "unused: each edge is given its own token", { mode: 0o600 });
  const edgeConfigPath = join(dir, "edge.toml");
  writeFileSync(edgeConfigPath, edgeConfig({ cores: bases, tokenFile, records }));

  const admin = new pg.Client({ connectionString: adminUrl() });
  await admin.connect();
  const children = [];
  let sampler = null;
  let sampling = false;
  const out = {
    edges: edgeCount,
    processes,
    tasks,
    coreCount: CORES.length,
    poolSize,
    heartbeatMs: EDGE_HEARTBEAT_MS,
  };
  try {
    await cluster.startAll();
    const leader0 = await cluster.leader();
    await waitFor("the cores' HTTP APIs", async () => {
      for (const b of bases) {
        try {
          if ((await fetch(`${b}/healthz`)).status !== 200) return false;
        } catch {
          return false;
        }
      }
      return true;
    });

    // The edges, `processes` processes of edgeCount / processes edges each, started over ~10 s.
    const per = Math.ceil(edgeCount / processes);
    const startT = performance.now();
    for (let p = 0; p < processes; p++) {
      const mine = edges.slice(p * per, (p + 1) * per);
      if (mine.length === 0) continue;
      const specPath = join(dir, `edges-${p}.json`);
      writeFileSync(
        specPath,
        JSON.stringify({
          config: edgeConfigPath,
          edges: mine,
          heartbeatEveryMs: EDGE_HEARTBEAT_MS,
          requestTimeoutMs: 10_000,
          startGapMs: Math.max(1, Math.floor(10_000 / mine.length)),
          stopTimeoutMs: 15_000,
        }),
        { mode: 0o600 },
      );
      const logFd = openSync(join(dir, `edges-${p}.log`), "a");
      const child = track(fork(CHILD, [specPath], { stdio: ["ignore", logFd, logFd, "ipc"], execArgv: [] }));
      closeSync(logFd);
      const ready = new Promise((resolve, reject) => {
        child.on("message", (m) => m?.ready !== undefined && resolve());
        child.once("exit", (code) => reject(new Error(`edge process ${p} exited with ${code}; see ${dir}`)));
      });
      ready.catch(() => {});
      children.push({ child, ready });
    }
    await Promise.all(children.map((c) => c.ready));
    await waitFor(
      `${edgeCount} edges' heartbeats`,
      async () =>
        (await store.listNodes()).filter((n) => n.session.nodeId.startsWith("edge-")).length >= edgeCount,
      60_000,
      500,
    );
    out.startS = (performance.now() - startT) / 1000;
    log(
      `  ${edgeCount} edges in ${processes} processes registered through ${CORES.length} cores in ${out.startS.toFixed(1)} s`,
    );

    // Connections: sampled over the whole run; commits and CPU: from the first publish to the last success.
    let maxConnections = 0;
    sampling = true;
    sampler = (async () => {
      while (sampling) {
        const r = await admin.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1", [
          database,
        ]);
        maxConnections = Math.max(maxConnections, r.rows[0].n);
        await sleep(200);
      }
    })();
    const commits = async () => {
      await admin.query("SELECT pg_stat_clear_snapshot()");
      const r = await admin.query(
        "SELECT xact_commit::bigint AS c FROM pg_stat_database WHERE datname = $1",
        [database],
      );
      return Number(r.rows[0].c);
    };
    const cpuParts = () => ({
      cores: Object.fromEntries(CORES.map((id) => [id, cpuMs(cluster.pid(id))])),
      edges: children.map((c) => cpuMs(c.child.pid)),
      postgres: new Map(postgresPids().map((pid) => [pid, cpuMs(pid)])),
      machine: machineCpuMs(),
    });

    // Idle: the edges' heartbeats and safety ticks alone, what the fleet costs with no work.
    const idle0 = { commits: await commits(), cpu: cpuParts(), t: performance.now() };
    await sleep(idleSeconds * 1000);
    const idleS = (performance.now() - idle0.t) / 1000;
    out.idle = {
      seconds: idleS,
      commitsPerSecond: ((await commits()) - idle0.commits) / idleS,
      cpuSharePercent: cpuShares(idle0.cpu, cpuParts()),
    };
    log(
      `  idle ${idleS.toFixed(0)} s: ${out.idle.commitsPerSecond.toFixed(0)} commits/s; CPU % ${JSON.stringify(out.idle.cpuSharePercent)}`,
    );

    const commits0 = await commits();
    const cpu0 = cpuParts();
    const t0 = performance.now();
    for (const { child } of children) child.send({ run: true });
    const runIds = [];
    const dags = Math.ceil(tasks / TASKS_PER_DAG);
    for (let d = 0; d < dags; d++) {
      const n = Math.min(TASKS_PER_DAG, tasks - d * TASKS_PER_DAG);
      const doc = {
        id: `edge-${d}`,
        tasks: Array.from({ length: n }, (_, i) => ({
          id: `t${String(i).padStart(4, "0")}`,
          action: "append",
        })),
      };
      runIds.push(await publishAndConfirm(store, doc));
    }
    const publishedS = (performance.now() - t0) / 1000;

    // About mid-run: kill -9 of a core that is not the leader.
    const leader = await cluster.leader();
    const victim = CORES.find((id) => id !== leader.holder.nodeId);
    // Half the tasks, or half the time the run is given (from the first publish), whichever comes first.
    const left = (ms) => Math.max(1_000, ms - (performance.now() - t0));
    await waitFor(
      "half the tasks run",
      async () => readRecords(records).length >= tasks / 2,
      left(runTimeoutMs / 2),
      100,
    ).catch(() => {});
    const killedAtS = (performance.now() - t0) / 1000;
    const doneBeforeKill = readRecords(records).length;
    await cluster.stop(victim, "SIGKILL");
    log(`  killed ${victim} (kill -9) at ${killedAtS.toFixed(1)} s, ${doneBeforeKill}/${tasks} tasks run`);

    // A fleet that cannot keep up is reported as it stands at the bound, not waited for.
    const ended = (r) => r !== null && ["succeeded", "failed", "canceled"].includes(r.status);
    let timedOut = false;
    await waitFor(
      "every run to end",
      async () => (await Promise.all(runIds.map((id) => store.getRunById(id)))).every(ended),
      left(runTimeoutMs),
      250,
    ).catch(() => {
      timedOut = true;
    });
    const statuses = (await Promise.all(runIds.map((id) => store.getRunById(id)))).map((r) =>
      r === null ? "missing" : r.status,
    );
    const seconds = (performance.now() - t0) / 1000;
    const cpu1 = cpuParts();
    const serverClaim = {};
    const coreClaimAnswers = {};
    for (const [i, id] of CORES.entries())
      if (id !== victim) {
        serverClaim[id] = await serverClaimTimes(bases[i]);
        coreClaimAnswers[id] = await edgeClaimAnswers(bases[i]);
      }
    const commits1 = await commits();
    sampling = false;
    await sampler;
    sampler = null;

    // Exactly once, from the actions' own records.
    const lines = readRecords(records);
    const seen = new Map();
    for (const l of lines) {
      const key = l.split(" ")[0];
      seen.set(key, (seen.get(key) ?? 0) + 1);
    }
    const duplicates = [...seen.values()].reduce((a, n) => a + Math.max(0, n - 1), 0);
    const expected = new Set();
    for (const runId of runIds)
      for (const t of await store.listTasks(runId)) expected.add(`${runId}/${t.taskId}`);
    const missing = [...expected].filter((k) => !seen.has(k)).length;
    // Attempts past the first: a task run again after its lease expired (its node taken for lost).
    const rerun = lines.filter((l) => l.split(" ")[1] !== "1").length;

    // The edges' own figures: claim latencies, where they ended up.
    const stats = await Promise.all(
      children.map(
        ({ child }) =>
          new Promise((resolve) => {
            child.on("message", (m) => m?.stats !== undefined && resolve(m.stats));
            child.once("exit", () => resolve(null));
            child.send({ stop: true });
          }),
      ),
    );
    const claimMs = stats.flatMap((s) => s?.claimMs ?? []);
    const runClaimMs = stats.flatMap((s) => s?.runClaimMs ?? []);
    // What the edges sent (by route and answer) and why their workers claimed, over their whole life.
    const edgeRequests = {};
    const claimsByCause = {};
    for (const s of stats) {
      for (const [k, n] of Object.entries(s?.requests ?? {})) edgeRequests[k] = (edgeRequests[k] ?? 0) + n;
      for (const [cause, c] of Object.entries(s?.byCause ?? {})) {
        const sum = (claimsByCause[cause] ??= { statements: 0, empty: 0, tasks: 0 });
        sum.statements += c.statements;
        sum.empty += c.empty;
        sum.tasks += c.tasks;
      }
    }
    const finishAndClaimMs = stats.flatMap((s) => s?.finishAndClaimMs ?? []);
    const onCore = {};
    for (const s of stats)
      for (const [core, n] of Object.entries(s?.onCore ?? {})) {
        const id = CORES[bases.indexOf(core)] ?? core;
        onCore[id] = (onCore[id] ?? 0) + n;
      }
    Object.assign(out, {
      killed: victim,
      leader: leader.holder.nodeId,
      leaderAtStart: leader0.holder.nodeId,
      publishedS,
      killedAtS,
      doneBeforeKill,
      seconds,
      statuses,
      timedOut,
      succeeded: statuses.every((s) => s === "succeeded"),
      records: lines.length,
      distinct: seen.size,
      duplicates,
      missing,
      rerun,
      exactlyOnce: duplicates === 0 && missing === 0 && seen.size === tasks,
      maxConnections,
      commits: commits1 - commits0,
      commitsPerSecond: (commits1 - commits0) / seconds,
      // Tasks that ran (distinct records) over the run: all of them, unless the bound cut it short.
      tasksPerSecond: seen.size / seconds,
      // Only claims a core served: "no task now" answered by the edge itself while a busy core's
      // Retry-After runs, and claims a core refused as busy, are counted apart, not timed.
      claims: claimMs.length,
      claimsAnsweredByTheEdge: stats.reduce((a, s) => a + (s?.claimsUnsent?.local ?? 0), 0),
      claimsRefusedBusy: stats.reduce((a, s) => a + (s?.claimsUnsent?.busy ?? 0), 0),
      claimP50Ms: percentile(claimMs, 50),
      claimP99Ms: percentile(claimMs, 99),
      // The claims sent from the first publish on (the start's and the idle window's left out).
      runClaims: runClaimMs.length,
      runClaimP50Ms: percentile(runClaimMs, 50),
      runClaimP99Ms: percentile(runClaimMs, 99),
      finishAndClaims: finishAndClaimMs.length,
      finishAndClaimP50Ms: percentile(finishAndClaimMs, 50),
      finishAndClaimP99Ms: percentile(finishAndClaimMs, 99),
      failedCalls: stats.reduce(
        (a, s) => ({
          claim: a.claim + (s?.failures.claim ?? 0),
          finishAndClaim: a.finishAndClaim + (s?.failures.finishAndClaim ?? 0),
        }),
        { claim: 0, finishAndClaim: 0 },
      ),
      // Inside the surviving cores (their whole life, the idle minute included) and the load's own loop lag.
      serverClaim,
      coreClaimAnswers,
      edgeRequests,
      claimsByCause,
      edgeLoopDelayP99Ms: Math.max(...stats.map((x) => x?.loop?.p99Ms ?? 0)),
      edgesMoved: stats.reduce((a, s) => a + (s?.moved ?? 0), 0),
      edgesOnCoreAtEnd: onCore,
      // CPU over the run as a share of the whole machine (all cores = 100 %).
      cpuSharePercent: cpuShares(cpu0, cpu1),
    });
    log(
      `  ${seen.size}/${tasks} tasks run in ${seconds.toFixed(1)} s${timedOut ? " (the bound)" : ""}: ${out.tasksPerSecond.toFixed(0)} tasks/s, ${out.commitsPerSecond.toFixed(0)} commits/s; ` +
        `PG connections max ${maxConnections}; claim p50 ${out.claimP50Ms?.toFixed(1)} ms, p99 ${out.claimP99Ms?.toFixed(1)} ms (${claimMs.length} claims served; ${out.claimsRefusedBusy} refused busy, ${out.claimsAnsweredByTheEdge} answered by the edge)`,
    );
    log(
      `  records ${lines.length}, distinct ${seen.size}, duplicates ${duplicates}, missing ${missing}; runs ${statuses.join(",")}; ` +
        `${out.edgesMoved} edges moved core; in the cores a claim took ${Object.values(serverClaim)
          .map((c) => c?.meanMs?.toFixed(1))
          .join(
            "/",
          )} ms on average; edge processes' loop delay p99 ${out.edgeLoopDelayP99Ms.toFixed(0)} ms; CPU % machine ${out.cpuSharePercent.machine}, cores ${Object.values(out.cpuSharePercent.cores).join("/")}, ` +
        `edge processes ${out.cpuSharePercent.edgeProcesses}, postgres ${out.cpuSharePercent.postgres}`,
    );
    log(
      `  claims sent in the run (from the first publish): ${runClaimMs.length} served, p50 ${out.runClaimP50Ms?.toFixed(1)} ms, p99 ${out.runClaimP99Ms?.toFixed(1)} ms`,
    );
    log(`  edge requests ${JSON.stringify(edgeRequests)}`);
    log(
      `  claims by cause ${JSON.stringify(claimsByCause)}; cores answered ${JSON.stringify(coreClaimAnswers)}`,
    );
  } finally {
    sampling = false;
    await sampler?.catch(() => {});
    // An edge process exits once it sent its figures (and wrote its --cpu-prof, if asked): a while for that.
    await Promise.race([
      Promise.all(
        children.map(({ child }) =>
          child.exitCode === null ? new Promise((r) => child.once("exit", r)) : null,
        ),
      ),
      sleep(5_000),
    ]);
    for (const { child } of children) if (child.exitCode === null) child.kill("SIGKILL");
    await cluster.stopAll();
    // DAGBOT_BENCH_EDGE_KEEP: the run's folder (node configs and logs) kept there, for a post-mortem.
    if (process.env.DAGBOT_BENCH_EDGE_KEEP !== undefined)
      cpSync(dir, join(process.env.DAGBOT_BENCH_EDGE_KEEP, `edge-${Date.now()}`), { recursive: true });
    await store.close();
    await admin.end().catch(() => {});
  }
  return out;
}
