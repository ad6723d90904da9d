/**
 * Sections 2 and 5: three `dagbot node` processes with the no-op action `true` on one store run
 * 1,000 independent tasks, a 200-deep chain and 10 layers × 100. Wall time and per-task latencies
 * come from the store's event log (task.queued → task.running → task.succeeded); a task's
 * dependencies are satisfied when its last need succeeded (for a task without needs: when the run
 * started). RSS of each node is sampled from /proc while idle and during the 1,000-task run.
 */
import { clearInterval, setInterval } from "node:timers";
import { setTimeout as sleep } from "node:timers/promises";
import { allEvents, Cluster, publishAndConfirm, rssKb, waitFor } from "./lib/cluster.mjs";
import { chain, independent, layered } from "./lib/dags.mjs";
import { percentile } from "./lib/stats.mjs";
import { freshStore } from "./lib/stores.mjs";

export const DAG_LEASE = { ttl: "10s", renew_every: "3s", acquire_every: "1s" };
export const NODE_CAPACITY = 4;
const TERMINAL = new Set(["succeeded", "failed", "canceled", "rejected", "expired"]);

export const SCENARIOS = [
  { key: "independent", label: "1,000 independent", make: (id) => independent(id, 1000) },
  { key: "chain", label: "200-deep chain", make: (id) => chain(id, 200) },
  { key: "layers", label: "10 layers × 100", make: (id) => layered(id, 10, 100) },
];

/** Per-task latencies of one finished run, from its events. */
export function taskLatencies(doc, events) {
  const mine = events.filter((e) => e.runId !== null);
  const start = mine.find((e) => e.kind === "run.running")?.at ?? null;
  const end = mine.find((e) => e.kind === "run.succeeded" || e.kind === "run.failed")?.at ?? null;
  const byTask = new Map();
  for (const e of mine) {
    if (e.taskId === null) continue;
    const t = byTask.get(e.taskId) ?? {};
    if (e.kind === "task.queued") t.queued = e.at;
    else if (e.kind === "task.running") t.running = e.at;
    else if (e.kind === "task.succeeded") t.done = e.at;
    else t.other = e.kind;
    byTask.set(e.taskId, t);
  }
  const readyToClaimed = [];
  const readyToQueued = [];
  const queuedToClaimed = [];
  const claimedToRecorded = [];
  let incomplete = 0;
  for (const task of doc.tasks) {
    const t = byTask.get(task.id);
    if (t === undefined || t.done === undefined || t.running === undefined || t.queued === undefined) {
      incomplete += 1;
      continue;
    }
    const needs = task.needs ?? [];
    const ready = needs.length === 0 ? start : Math.max(...needs.map((n) => byTask.get(n)?.done ?? NaN));
    if (ready !== null && Number.isFinite(ready)) {
      readyToClaimed.push(t.running - ready);
      readyToQueued.push(t.queued - ready);
    }
    queuedToClaimed.push(t.running - t.queued);
    claimedToRecorded.push(t.done - t.running);
  }
  const pct = (xs) => ({ p50: percentile(xs, 50), p99: percentile(xs, 99) });
  return {
    wallMs: start !== null && end !== null ? end - start : null,
    tasks: doc.tasks.length,
    incomplete,
    readyToClaimed: pct(readyToClaimed),
    readyToQueued: pct(readyToQueued),
    queuedToClaimed: pct(queuedToClaimed),
    claimedToRecorded: pct(claimedToRecorded),
  };
}

/** Max RSS (kB) per node while `during` runs, sampled every 100 ms. */
async function sampleRss(cluster, during) {
  const max = new Map();
  const sample = () => {
    for (const id of cluster.nodeIds) {
      const pid = cluster.pid(id);
      const kb = pid === null ? null : rssKb(pid);
      if (kb !== null) max.set(id, Math.max(max.get(id) ?? 0, kb));
    }
  };
  sample();
  const timer = setInterval(sample, 100);
  try {
    const result = await during();
    sample();
    return { result, maxKb: max };
  } finally {
    clearInterval(timer);
  }
}

async function runScenario(store, doc) {
  const runId = await publishAndConfirm(store, doc);
  const run = await waitFor(
    `run ${doc.id} to end`,
    async () => {
      const r = await store.getRunById(runId);
      return r !== null && TERMINAL.has(r.status) ? r : null;
    },
    300_000,
    100,
  );
  const events = (await allEvents(store)).filter((e) => e.runId === runId);
  return { status: run.status, ...taskLatencies(doc, events) };
}

export async function benchDagOverhead(
  scratch,
  kind,
  { rounds, chainRounds = rounds, log, scenarios = SCENARIOS.map((s) => s.key) },
) {
  const { dir, location, store } = await freshStore(scratch, kind, "dag");
  const cluster = new Cluster({ dir, storeUrl: location, store, capacity: NODE_CAPACITY, lease: DAG_LEASE });
  const out = { scenarios: {}, idleRssKb: [], busyRssKb: [] };
  try {
    await cluster.startAll();
    await cluster.leader();
    // Let start-up settle (JIT, first heartbeats) before calling the node idle.
    await sleep(1500);
    const idle = await sampleRss(cluster, () => sleep(1000));
    out.idleRssKb.push(Math.max(...idle.maxKb.values()));
    // The chain is the judged latency figure and the cheapest DAG, so it may get more rounds.
    for (let round = 0; round < Math.max(rounds, chainRounds); round++) {
      const keys = scenarios.filter((k) => (k === "chain" ? round < chainRounds : round < rounds));
      for (const s of SCENARIOS.filter((x) => keys.includes(x.key))) {
        const doc = s.make(`${s.key}_r${round}`);
        const sampled = await sampleRss(cluster, () => runScenario(store, doc));
        const r = sampled.result;
        if (s.key === "independent") out.busyRssKb.push(Math.max(...sampled.maxKb.values()));
        (out.scenarios[s.key] ??= []).push(r);
        log(
          `  ${kind} ${s.label} round ${round + 1}: ${r.status} in ${r.wallMs} ms; ready→claimed p50 ` +
            `${r.readyToClaimed.p50} p99 ${r.readyToClaimed.p99} ms; claimed→recorded p50 ${r.claimedToRecorded.p50} ` +
            `p99 ${r.claimedToRecorded.p99} ms`,
        );
      }
    }
  } finally {
    await cluster.stopAll("SIGTERM");
    await store.close();
  }
  // A busy SQLite file must be waited out inside the store, never surface in a node's loops.
  out.busyLogLines = cluster.logLines(/SQLITE_BUSY|database is locked/i);
  out.warnings = cluster.logLines(/"level":(40|50|60)/).length;
  return out;
}
