/**
 * Section "scale", `npm run bench:scale`: N real node processes on one PostgreSQL, for
 * N in 5, 10, 20, 40 (as many as the machine carries), one room and five rooms.
 *
 * One room, `dagbot node` processes (capacity 4, room cap 64, store_pool_size 2, default lease
 * timings 10 s / 3 s / 1 s):
 * - idle: commits/s of the database (pg_stat_database.xact_commit delta over the window, the
 *   bench's own two reads included) and connections per node (pg_stat_activity);
 * - a 500-task load (500 independent `true` tasks, one run): tasks/s from the first task.running to
 *   the last task.succeeded in the event log, server CPU per task (every backend of the database,
 *   /proc), commits per task, the most connections seen, and empty claims per claimed task from
 *   the workers' own counts (logged at stop; claims sent by the 10 s safety tick are counted apart);
 * - failover: kill -9 of the leader → the new term's lease.acquired, on the host clock.
 * Five rooms: the same nodes serving five rooms each (bench/scale-node.mjs), idle only.
 *
 * Writes bench/results/scale.json and the generated part of the "Scale" section of bench/README.md.
 * `--counts=5,10` picks the fleet sizes; `--idle=30` the idle window in seconds; `--one-room` leaves
 * out the five-room part (quicker while iterating); `--idle-only` measures only the idle part (with
 * `--counts=1`: what a leader alone costs); `--cap=128` another room cap than 64; `--label=before`
 * with DAGBOT_BENCH_DIST pointing at another build records a comparison run under that label
 * (results/scale-<label>.json, README untouched).
 */
import { spawn } from "node:child_process";
import { closeSync, existsSync, openSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath, URL } from "node:url";
import pg from "pg";
import { track } from "./lib/children.mjs";
import { allEvents, publishAndConfirm, ROOM, waitFor } from "./lib/cluster.mjs";
import { cpuMeter } from "./lib/cpu.mjs";
import { independent } from "./lib/dags.mjs";
import { CLI, DIST, load } from "./lib/dist.mjs";
import { machineInfo } from "./lib/machine.mjs";
import { Scratch } from "./lib/scratch.mjs";

const BENCH_DIR = fileURLToPath(new URL(".", import.meta.url));
const NODE_SCRIPT = join(BENCH_DIR, "scale-node.mjs");
const FIVE_ROOMS = ["scale-r1", "scale-r2", "scale-r3", "scale-r4", "scale-r5"];
const CAPACITY = 4;
let ROOM_CAP = 64;
const POOL = 2;
const TASKS = 500;
const SETTLE_MS = 12_000;
const log = (m) => process.stdout.write(`${m}\n`);
const round = (x, d = 2) => Math.round(x * 10 ** d) / 10 ** d;
const load1 = () => loadavg().map((x) => round(x));

function parseArgs(argv) {
  const o = { counts: [5, 10, 20, 40], idleS: 30, label: null, fiveRooms: true, idleOnly: false };
  for (const a of argv) {
    if (a.startsWith("--counts=")) o.counts = a.slice(9).split(",").map(Number);
    else if (a.startsWith("--idle=")) o.idleS = Number(a.slice(7));
    else if (a.startsWith("--label=")) o.label = a.slice(8);
    else if (a === "--one-room") o.fiveRooms = false;
    else if (a === "--idle-only") o.idleOnly = true;
    else if (a.startsWith("--cap=")) o.cap = Number(a.slice(6));
    else throw new Error(`bench scale: unknown argument ${a}`);
  }
  return o;
}

function nodeToml(nodeId, url) {
  return [
    `node_id = "${nodeId}"`,
    `labels = ["linux"]`,
    `capacity = ${CAPACITY}`,
    `store = "${url}"`,
    `store_pool_size = ${POOL}`,
    `log_level = "info"`,
    ``,
    `[limits]`,
    `global_cap = ${ROOM_CAP}`,
    ``,
    `[actions.true]`,
    `argv = ["true"]`,
    `timeout = "1m"`,
    ``,
  ].join("\n");
}

/** The fleet of one scenario: N processes, their logs, and the database they share. */
class Fleet {
  constructor(dir, url, count, rooms) {
    this.dir = dir;
    this.url = url;
    this.rooms = rooms;
    this.ids = Array.from({ length: count }, (_, i) => `node-${String(i + 1).padStart(2, "0")}`);
    this.children = new Map();
  }

  spawn(nodeId) {
    const config = join(this.dir, `${nodeId}.toml`);
    writeFileSync(config, nodeToml(nodeId, this.url));
    const out = openSync(join(this.dir, `${nodeId}.log`), "a");
    const args =
      this.rooms === null ? [CLI, "node", "--config", config] : [NODE_SCRIPT, config, this.rooms.join(",")];
    const child = track(spawn(process.execPath, args, { stdio: ["ignore", "ignore", out] }));
    closeSync(out);
    const exited = new Promise((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })));
    this.children.set(nodeId, { child, exited });
  }

  async startAll(store) {
    for (const id of this.ids) this.spawn(id);
    await waitFor(
      `${this.ids.length} nodes to register`,
      async () => {
        const dead = [...this.children].filter(([, c]) => c.child.exitCode !== null);
        if (dead.length > 0) throw new Error(`${dead[0][0]} exited; see ${this.dir}`);
        const listed = await store.listNodes().catch(() => []);
        return listed.length >= this.ids.length;
      },
      180_000,
      500,
    );
  }

  alive() {
    return [...this.children.values()].filter((c) => c.child.exitCode === null && c.child.signalCode === null)
      .length;
  }

  kill(nodeId, signal) {
    this.children.get(nodeId)?.child.kill(signal);
  }

  async stopAll() {
    for (const c of this.children.values()) if (c.child.exitCode === null) c.child.kill("SIGTERM");
    await Promise.all(
      [...this.children.values()].map(async (c) => {
        const t = setTimeout(() => c.child.kill("SIGKILL"), 30_000);
        await c.exited;
        clearTimeout(t);
      }),
    );
  }

  pids() {
    return [...this.children.values()].map((c) => c.child.pid).filter((p) => p !== undefined);
  }

  /** The workers' own claim counts, summed over the nodes that stopped gracefully. */
  claimCounts() {
    const sum = {
      nodes: 0,
      statements: 0,
      empty: 0,
      tasks: 0,
      tick: 0,
      tickEmpty: 0,
      lateWakeEmpty: 0,
      maxWakeDelayMs: 0,
      byCause: {},
    };
    for (const id of this.ids) {
      const file = join(this.dir, `${id}.log`);
      if (!existsSync(file)) continue;
      for (const line of readFileSync(file, "utf8").split("\n")) {
        if (!line.includes("worker stopped claiming")) continue;
        const j = JSON.parse(line);
        sum.nodes += 1;
        sum.statements += j.claimStatements;
        sum.empty += j.emptyClaims;
        sum.tasks += j.claimedTasks;
        sum.tick += j.tickClaims;
        sum.tickEmpty += j.tickEmptyClaims;
        sum.lateWakeEmpty += j.lateWakeEmpty ?? 0;
        sum.maxWakeDelayMs = Math.max(sum.maxWakeDelayMs, j.maxWakeDelayMs ?? 0);
        for (const [cause, k] of Object.entries(j.byCause ?? {})) {
          const t = (sum.byCause[cause] ??= { statements: 0, empty: 0, tasks: 0 });
          t.statements += k.statements;
          t.empty += k.empty;
          t.tasks += k.tasks;
        }
      }
    }
    return sum;
  }

  /** The leaders' wake-up counts: each node's last "wake-ups so far" line, summed. */
  wakeCounts() {
    const sum = { leaders: 0, demandReads: 0, wakes: 0, nodesWoken: 0, tasksAsked: 0, holdsPassed: 0 };
    for (const id of this.ids) {
      const file = join(this.dir, `${id}.log`);
      if (!existsSync(file)) continue;
      let last = null;
      for (const line of readFileSync(file, "utf8").split("\n"))
        if (line.includes("wake-ups so far")) last = JSON.parse(line);
      if (last === null) continue;
      sum.leaders += 1;
      for (const k of ["demandReads", "wakes", "nodesWoken", "tasksAsked", "holdsPassed"]) sum[k] += last[k];
    }
    return sum;
  }

  logLines(pattern) {
    const out = [];
    for (const id of this.ids) {
      const file = join(this.dir, `${id}.log`);
      if (!existsSync(file)) continue;
      for (const line of readFileSync(file, "utf8").split("\n"))
        if (pattern.test(line)) out.push(`${id}: ${line.slice(0, 240)}`);
    }
    return out;
  }
}

const TICK_MS = 10;

/** CPU ms (utime + stime + reaped children's) of each process in the trees under `roots`, by pid. */
function treeCpuMs(roots) {
  const stats = new Map();
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const f = readFileSync(`/proc/${name}/stat`, "utf8").split(") ")[1].split(" ");
      stats.set(Number(name), {
        ppid: Number(f[1]),
        ms: (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) * TICK_MS,
      });
    } catch {
      // gone meanwhile
    }
  }
  const inTree = new Set(roots);
  for (let grew = true; grew;) {
    grew = false;
    for (const [pid, st] of stats)
      if (!inTree.has(pid) && inTree.has(st.ppid)) {
        inTree.add(pid);
        grew = true;
      }
  }
  const out = new Map();
  for (const pid of inTree) if (stats.has(pid)) out.set(pid, stats.get(pid).ms);
  return out;
}

/** CPU used between two treeCpuMs snapshots (a process new since counts from zero). */
function cpuDelta(before, after) {
  let ms = 0;
  for (const [pid, v] of after) ms += Math.max(0, v - (before.get(pid) ?? 0));
  return ms;
}

async function dbStats(admin, db) {
  const { rows } = await admin.query(
    `SELECT (SELECT xact_commit FROM pg_stat_database WHERE datname = $1)::bigint AS commits,
            (SELECT count(*) FROM pg_stat_activity WHERE datname = $1
                AND application_name IN ('dagbot', 'dagbot-lease', 'dagbot-listen'))::int AS connections`,
    [db],
  );
  return { commits: Number(rows[0].commits), connections: rows[0].connections };
}

/** Samples the fleet's connections every 250 ms until stop() is called; resolves with the most seen. */
function connectionSampler(admin, db) {
  let running = true;
  let most = 0;
  const loop = (async () => {
    while (running) {
      most = Math.max(most, (await dbStats(admin, db)).connections);
      await sleep(250);
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return most;
    },
  };
}

async function idleWindow(admin, db, idleS, count, fleet) {
  const sampler = connectionSampler(admin, db);
  const nodes0 = treeCpuMs(fleet.pids());
  const a = await dbStats(admin, db);
  const t0 = performance.now();
  await sleep(idleS * 1000);
  const b = await dbStats(admin, db);
  const seconds = (performance.now() - t0) / 1000;
  const most = await sampler.stop();
  const nodeCpuMs = cpuDelta(nodes0, treeCpuMs(fleet.pids()));
  const commitsPerS = (b.commits - a.commits) / seconds;
  return {
    /** CPU of every node process and its action supervisor, % of one core per node. */
    nodeCpuPctPerNode: round((nodeCpuMs / (seconds * 1000) / count) * 100),
    commitsPerS: round(commitsPerS, 1),
    commitsPerSPerNode: round(commitsPerS / count),
    connections: b.connections,
    connectionsPerNode: round(most / count),
    mostConnections: most,
  };
}

async function scenario(scratch, admin, count, rooms, idleS, idleOnly) {
  const part = `scale_${count}_${rooms === null ? 1 : rooms.length}`;
  const url = await scratch.database(part);
  const db = new URL(url).pathname.slice(1);
  const dir = scratch.dir(part);
  const { openPostgresStore } = await load("adapters/postgres/index.js");
  const benchUrl = new URL(url);
  benchUrl.searchParams.set("application_name", "dagbot-bench");
  const store = await openPostgresStore(benchUrl.toString(), { poolSize: 2 });
  const fleet = new Fleet(dir, url, count, rooms);
  const out = { nodes: count, rooms: rooms === null ? 1 : rooms.length, loadAverageAtStart: load1() };
  try {
    const t0 = performance.now();
    await fleet.startAll(store);
    out.startS = round((performance.now() - t0) / 1000, 1);
    const leaderRooms = rooms ?? [ROOM];
    // The bench's own reads may meet a full server (40 nodes' connections): try again.
    await waitFor("a leader in every room", async () => {
      const leases = await Promise.all(leaderRooms.map((r) => store.getLease(r))).catch(() => null);
      return leases !== null && leases.every((l) => l !== null && l.holder !== null);
    });
    await sleep(SETTLE_MS);
    out.idle = await idleWindow(admin, db, idleS, count, fleet);
    out.alive = fleet.alive();
    log(
      `  ${count} nodes, ${out.rooms} room(s): idle ${out.idle.commitsPerS} commits/s ` +
        `(${out.idle.commitsPerSPerNode}/node), ${out.idle.connectionsPerNode} connections/node, ` +
        `node CPU ${out.idle.nodeCpuPctPerNode} %/node, started in ${out.startS} s, load ${load1().join(" / ")}`,
    );
    if (rooms === null && !idleOnly) {
      out.fanout = await fanoutProbe(url, admin, db, count, fleet);
      out.load = await loadRun(store, admin, db, count, fleet, url);
      out.failover = await failover(store, fleet);
    }
  } finally {
    await fleet.stopAll();
    await store.close();
  }
  if (rooms === null && out.load !== undefined) {
    const c = fleet.claimCounts();
    const wakeStatements = c.statements - c.tick;
    const wakeEmpty = c.empty - c.tickEmpty;
    out.claims = {
      ...c,
      // The leader killed by the failover step logs no counts: its share is missing.
      emptyPerClaimedTask: c.tasks === 0 ? null : round(wakeEmpty / c.tasks, 3),
      emptyPerClaimStatement: wakeStatements === 0 ? null : round(wakeEmpty / wakeStatements, 3),
    };
    out.wakes = fleet.wakeCounts();
    log(
      `    claims (${c.nodes} nodes' counts): ${c.statements} statements, ${c.tasks} tasks, ` +
        `${c.empty} empty (${c.tickEmpty} of them by the safety tick) → ${out.claims.emptyPerClaimedTask} empty per claimed task`,
    );
    const causes = Object.entries(c.byCause)
      .map(([k, v]) => `${k} ${v.statements}/${v.tasks}/${v.empty}`)
      .join(", ");
    log(
      `    by cause (statements/tasks/empty): ${causes}; empty after a late wake (> 300 ms) ${c.lateWakeEmpty}, ` +
        `longest wake-to-claim ${c.maxWakeDelayMs} ms`,
    );
    const w = out.wakes;
    log(
      `    leaders: ${w.demandReads} demand reads, ${w.wakes} wakes naming ${w.nodesWoken} nodes for ${w.tasksAsked} tasks, ` +
        `${w.holdsPassed} holds passed unclaimed`,
    );
  }
  out.storeErrors = fleet.logLines(/too many connections|store error/i).length;
  out.loadAverageAtEnd = load1();
  return out;
}

/**
 * What one NOTIFY on the channel every node LISTENs to costs with this many nodes: 2,000
 * notifications (a `runs` change) for a room no node serves, each in its own transaction (the worst case: the hot path batches its own), and the CPU
 * the node processes and the database's backends used meanwhile. Every node's LISTEN connection receives and parses each one.
 */
async function fanoutProbe(url, admin, db, count, fleet) {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const meter = cpuMeter(admin, db);
  const cpu = await meter.start();
  const nodes0 = treeCpuMs(fleet.pids());
  const n = 2000;
  for (let i = 0; i < n; i += 1) await client.query(`SELECT pg_notify('dagbot', 'runs:fanout-probe\n${i}')`);
  // Let the listeners drain what was sent.
  await sleep(1000);
  const used = await cpu.stop(n);
  const nodeMs = cpuDelta(nodes0, treeCpuMs(fleet.pids()));
  await client.end();
  const out = {
    notifications: n,
    nodeUsPerNotification: round((nodeMs * 1000) / n, 1),
    nodeUsPerNotificationPerNode: round((nodeMs * 1000) / n / count, 1),
    serverUsPerNotification: round(used.serverUs, 1),
  };
  log(
    `    fan-out: one NOTIFY costs the nodes ${out.nodeUsPerNotification} µs (${out.nodeUsPerNotificationPerNode} per node) ` +
      `and the server ${out.serverUsPerNotification} µs`,
  );
  return out;
}

/** Runs `tasks` independent tasks and waits for the run to end; returns the nodes that ran one. */
async function runToEnd(store, id, tasks) {
  const runId = await publishAndConfirm(store, independent(id, tasks));
  await waitFor(
    `the ${tasks}-task run to end`,
    async () => {
      const r = await store.getRunById(runId);
      return r !== null && !["pending", "running", "canceling"].includes(r.status) ? r.status : null;
    },
    600_000,
    100,
  );
  return runId;
}

async function loadRun(store, admin, db, count, fleet, url) {
  // Warm up first: a node starts its action supervisor (a Node process) with its first action, so
  // a cold fleet's first tasks wait for it and its start-up CPU lands on them (at 20 nodes, 20
  // supervisors for 500 tasks: the slowest tenth held a slot 0.67 s, 0.35 s warm). Two
  // tasks per slot; a node that gets none stays cold, and the measured run then includes it.
  const t0 = performance.now();
  await runToEnd(store, `scale_warm_${count}`, count * CAPACITY * 2);
  const warmUpS = round((performance.now() - t0) / 1000, 1);
  // A listener like every node's: how many notifications each node receives per task.
  // At 40 nodes the server's 100 connections are nearly all taken: without a free one, no count.
  let listener = new pg.Client({ connectionString: url });
  let heard = 0;
  let heardHot = 0;
  try {
    await listener.connect();
    listener.on("notification", (m) => (m.channel === "dagbot" ? (heard += 1) : (heardHot += 1)));
    await listener.query("LISTEN dagbot");
    await listener.query("LISTEN dagbot_tasks");
  } catch {
    await listener.end().catch(() => {});
    listener = null;
  }
  const meter = cpuMeter(admin, db);
  const sampler = connectionSampler(admin, db);
  const a = await dbStats(admin, db);
  const cpu = await meter.start();
  const nodes0 = treeCpuMs(fleet.pids());
  const runId = await runToEnd(store, `scale_${count}`, TASKS);
  const used = await cpu.stop(TASKS);
  await listener?.end();
  const nodeCpuMs = cpuDelta(nodes0, treeCpuMs(fleet.pids()));
  const b = await dbStats(admin, db);
  const most = await sampler.stop();
  const events = (await allEvents(store)).filter((e) => e.runId === runId);
  const started = events.filter((e) => e.kind === "task.running").map((e) => e.at);
  const ended = events.filter((e) => e.kind === "task.succeeded").map((e) => e.at);
  const spanS = (Math.max(...ended) - Math.min(...started)) / 1000;
  // Claimed → recorded, per task: how long a slot is held for a `true` (claim, renewal, the action
  // under the supervisor, the finish), which with a fixed number of slots sets the rate.
  const runningAt = new Map(events.filter((e) => e.kind === "task.running").map((e) => [e.taskId, e.at]));
  const held = events
    .filter((e) => e.kind === "task.succeeded" && runningAt.has(e.taskId))
    .map((e) => e.at - runningAt.get(e.taskId))
    .sort((x, y) => x - y);
  const pct = (q) =>
    held.length === 0 ? null : held[Math.min(held.length - 1, Math.floor(q * held.length))];
  const nodesUsed = new Set(
    events.filter((e) => e.kind === "task.running").map((e) => e.actor?.split("/")[0]),
  );
  const out = {
    succeeded: ended.length,
    tasksPerS: round(ended.length / spanS, 1),
    spanS: round(spanS, 2),
    serverCpuMsPerTask: round(used.serverUs / 1000, 2),
    nodeCpuMsPerTask: round(nodeCpuMs / TASKS, 2),
    slotHeldMs: { p50: pct(0.5), p90: pct(0.9) },
    warmUpS,
    notificationsPerTask: listener === null ? null : round(heard / TASKS, 1),
    hotNotificationsPerTask: listener === null ? null : round(heardHot / TASKS, 1),
    commitsPerTask: round((b.commits - a.commits) / TASKS, 1),
    mostConnections: most,
    connectionsPerNode: round(most / count),
    nodesThatRanTasks: nodesUsed.size,
    alive: fleet.alive(),
  };
  log(
    `    500 tasks: ${out.tasksPerS} tasks/s, server CPU ${out.serverCpuMsPerTask} ms/task, nodes' CPU ${out.nodeCpuMsPerTask} ms/task, ` +
      `slot held p50 ${out.slotHeldMs.p50} ms, p90 ${out.slotHeldMs.p90} ms, ` +
      `${out.notificationsPerTask} notifications/task to every node, ${out.hotNotificationsPerTask} to the leader, ` +
      `${out.commitsPerTask} commits/task, up to ${most} connections (${out.connectionsPerNode}/node), ${out.nodesThatRanTasks} nodes ran tasks`,
  );
  return out;
}

async function failover(store, fleet) {
  const lease = await store.getLease(ROOM);
  const victim = lease.holder.nodeId;
  const before = (await allEvents(store)).at(-1)?.seq ?? 0;
  const t0 = Date.now();
  fleet.kill(victim, "SIGKILL");
  const acquired = await waitFor(
    "a new leader",
    async () =>
      (await store.readEvents(ROOM, before, 1000)).find(
        (e) => e.kind === "lease.acquired" && e.term > lease.term,
      ) ?? null,
    30_000,
    20,
  );
  const out = {
    victim,
    killToAcquiredMs: acquired.at - t0,
    leaseLeftAtKillMs: lease.expiresAt - lease.now,
    newLeader: acquired.actor,
  };
  log(`    kill -9 of the leader ${victim}: ${acquired.actor} leads after ${out.killToAcquiredMs} ms`);
  return out;
}

function readmeTable(r) {
  const rows = [];
  for (const s of r.scenarios.filter((x) => x.rooms === 1)) {
    const five = r.scenarios.find((x) => x.rooms === 5 && x.nodes === s.nodes);
    const c = s.claims;
    const atStart =
      c === undefined || c.tasks === 0
        ? ""
        : ` (${round(((c.byCause.start?.empty ?? 0) + (c.byCause.wakeAll?.empty ?? 0)) / c.tasks, 3)} at start)`;
    rows.push(
      `| ${s.nodes} | ${s.idle.commitsPerS} (${s.idle.commitsPerSPerNode}/node) | ` +
        `${five === undefined ? "–" : `${five.idle.commitsPerS} (${round(five.idle.commitsPerSPerNode / 5)}/node/room)`} | ` +
        `${s.idle.connectionsPerNode} (${s.load?.connectionsPerNode ?? "–"} under load) | ${s.load?.tasksPerS ?? "–"} | ` +
        `${c?.emptyPerClaimedTask ?? "–"}${atStart} | ${s.load?.serverCpuMsPerTask ?? "–"} ms | ` +
        `${s.load?.nodeCpuMsPerTask ?? "–"} ms | ${s.fanout?.nodeUsPerNotification ?? "–"} µs | ${s.load?.commitsPerTask ?? "–"} | ` +
        `${s.failover?.killToAcquiredMs ?? "–"} ms | ${s.loadAverageAtStart.join(" / ")} |`,
    );
  }
  return [
    `Run of ${r.machine.date}: ${r.machine.nproc} × ${r.machine.cpuModel}, PostgreSQL ${r.machine.versions.postgres}, ` +
      `dagbot ${r.machine.versions.dagbot}; capacity ${CAPACITY} per node, room cap ${ROOM_CAP}, store_pool_size ${POOL}, ` +
      `idle window ${r.idleS} s; ${Math.round(r.durationS)} s in all.`,
    "",
    "| nodes | idle commits/s, 1 room | idle commits/s, 5 rooms | connections per node, idle | 500 tasks: tasks/s | empty claims per claimed task | server CPU per task | nodes' CPU per task | nodes' CPU per NOTIFY | commits per task | failover after kill -9 | load average (1/5/15 min) at start |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ...rows,
  ].join("\n");
}

const START = "<!-- scale:start (generated by npm run bench:scale; do not edit by hand) -->";
const END = "<!-- scale:end -->";

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  if (opts.cap !== undefined) ROOM_CAP = opts.cap;
  const started = performance.now();
  const scratch = new Scratch();
  const onSignal = () => void scratch.cleanup().finally(() => process.exit(130));
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  const admin = new pg.Client({
    connectionString: process.env.DAGBOT_BENCH_PG_URL ?? "postgres://postgres@127.0.0.1:5432/postgres",
  });
  await admin.connect();
  const results = {
    label: opts.label,
    dist: DIST,
    idleS: opts.idleS,
    roomCap: ROOM_CAP,
    machine: await machineInfo(),
    scenarios: [],
  };
  log(`bench scale (${opts.label ?? "current"}): ${opts.counts.join(", ")} nodes; dist ${DIST}`);
  try {
    for (const count of opts.counts) {
      for (const rooms of opts.fiveRooms ? [null, FIVE_ROOMS] : [null]) {
        try {
          results.scenarios.push(await scenario(scratch, admin, count, rooms, opts.idleS, opts.idleOnly));
        } catch (e) {
          log(
            `  ${count} nodes, ${rooms === null ? 1 : 5} room(s) failed: ${e instanceof Error ? e.message : e}`,
          );
          results.scenarios.push({ nodes: count, rooms: rooms === null ? 1 : 5, error: String(e) });
        }
      }
    }
  } finally {
    await admin.end();
    await scratch.cleanup();
  }
  results.durationS = (performance.now() - started) / 1000;
  results.loadAverageAtEnd = load1();
  const name = opts.label === null ? "scale.json" : `scale-${opts.label}.json`;
  writeFileSync(join(BENCH_DIR, "results", name), `${JSON.stringify(results, null, 2)}\n`);
  if (opts.label === null) {
    const readme = join(BENCH_DIR, "README.md");
    const text = readFileSync(readme, "utf8");
    const a = text.indexOf(START);
    const b = text.indexOf(END);
    const ok = results.scenarios.filter((s) => s.error === undefined);
    const generated = `${START}\n\n${readmeTable({ ...results, scenarios: ok })}\n\n${END}`;
    if (a !== -1 && b !== -1)
      writeFileSync(readme, text.slice(0, a) + generated + text.slice(b + END.length));
  }
  log(`bench scale: ${Math.round(results.durationS)} s; results in bench/results/${name}`);
}

await main();
