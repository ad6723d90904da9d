/**
 * One process of the edge section's load (bench/edge.mjs): many edge nodes in one Node process, each
 * dist's startEdgeNode over its own EdgeStore client with its own node id and edge token, all
 * sharing one action executor (one action supervisor). Each edge's claim calls are timed as the
 * edge's client sees them (the HTTP round trip, a move to the next core included).
 *
 * Started with fork() and one argument, a JSON spec file (node ids, tokens, cores, config). Sends
 * {ready} once every edge has started, and on {stop} stops them all and sends {stats}.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { readFileSync } from "node:fs";
import { monitorEventLoopDelay, performance } from "node:perf_hooks";
import process from "node:process";
import { setTimeout as sleep } from "node:timers/promises";
import { load } from "./lib/dist.mjs";

const spec = JSON.parse(readFileSync(process.argv[2], "utf8"));
const { EdgeStore } = await load("adapters/edge/edge-store.js");
const { startEdgeNode } = await load("app/edge-node.js");
const { systemClock } = await load("adapters/clock/system-clock.js");
const { DEFAULT_LEADER_TIMINGS } = await load("app/leader.js");
const { loadConfig } = await load("config/load-config.js");
const { engineSettings, makeLogger, nodeExecutor } = await load("composition/engine-settings.js");

const loaded = loadConfig({ file: spec.config, env: {}, needsMatrixToken: false });
if (!loaded.ok) throw new Error(`edge child: config: ${JSON.stringify(loaded.issues)}`);
const config = loaded.config;
const base = engineSettings(config);
const logger = makeLogger(config);
const executor = nodeExecutor(config, process.env, logger);

// How late this process's own event loop runs: a late loop inflates the latencies it measures.
const loopDelay = monitorEventLoopDelay({ resolution: 10 });
loopDelay.enable();
const claimMs = [];
/** The same, of the claims sent once the tasks were published ({run} from the parent): the run's own. */
const runClaimMs = [];
let inRun = false;
const finishAndClaimMs = [];
const failures = { claim: 0, finishAndClaim: 0 };
/** Claims the edge answered itself (a busy core's Retry-After not passed) and claims a core refused as busy. */
const claimsUnsent = { local: 0, busy: 0 };

/**
 * Which claim call a request belongs to: only a claim that reached a core and was served is timed,
 * so "no task now" answered by the edge itself (0 ms) or a core's 503 busy never counts as a fast
 * claim (they are counted apart).
 */
const inClaim = new AsyncLocalStorage();
const realFetch = globalThis.fetch;
/** Requests sent, by route and answer ("/v1/edge/claim 200"), and errors (no answer). */
const requests = {};
/** One request of an edge's client answered (its status) or not (null); the claims' counted for their call. */
function exchanged(path, status) {
  const route = path.split("?")[0];
  const key = `${route} ${status ?? "error"}`;
  requests[key] = (requests[key] ?? 0) + 1;
  const call = inClaim.getStore();
  if (call !== undefined && status !== null && route === "/v1/edge/claim") {
    call.sent += 1;
    if (status === 503) call.busy += 1;
  }
}
// A build whose client sends with fetch (before the onExchange option): its requests seen here.
globalThis.fetch = async (url, init) => {
  const path = new URL(String(url)).pathname;
  let res;
  try {
    res = await realFetch(url, init);
  } catch (e) {
    exchanged(path, null);
    throw e;
  }
  exchanged(path, res.status);
  return res;
};

/** The edge's client, its claim calls timed. */
class TimedEdgeStore extends EdgeStore {
  async claimTasks(offer, max) {
    const t = performance.now();
    const sentInRun = inRun;
    const call = { sent: 0, busy: 0 };
    try {
      const batch = await inClaim.run(call, () => super.claimTasks(offer, max));
      if (call.sent === 0) claimsUnsent.local += 1;
      else if (call.busy === call.sent) claimsUnsent.busy += 1;
      else {
        claimMs.push(performance.now() - t);
        if (sentInRun) runClaimMs.push(performance.now() - t);
      }
      return batch;
    } catch (e) {
      failures.claim += 1;
      throw e;
    }
  }

  async finishAndClaim(token, result, offer, max) {
    const t = performance.now();
    try {
      const answer = await super.finishAndClaim(token, result, offer, max);
      finishAndClaimMs.push(performance.now() - t);
      return answer;
    } catch (e) {
      failures.finishAndClaim += 1;
      throw e;
    }
  }
}

const edges = [];
for (const { nodeId, token, cores } of spec.edges) {
  const store = new TimedEdgeStore({
    cores,
    token,
    logger,
    requestTimeoutMs: spec.requestTimeoutMs,
    onExchange: exchanged,
  });
  const node = startEdgeNode(
    {
      nodeId,
      labels: base.labels,
      capacity: base.capacity,
      roomIds: base.roomIds,
      actions: base.actions,
      taskLeaseMs: base.taskLeaseMs,
      taskRenewEveryMs: base.taskRenewEveryMs,
      taskMarginMs: base.taskMarginMs,
      heartbeatEveryMs: spec.heartbeatEveryMs,
      workerPollMs: base.workerPollMs,
      debounceMs: DEFAULT_LEADER_TIMINGS.debounceMs,
    },
    { store, executor, clock: systemClock, logger, bootId: globalThis.crypto.randomUUID().slice(0, 8) },
  );
  edges.push({ nodeId, store, node, firstCore: cores[0] });
  // Spread the edges' first heartbeats (and so every later one) over the start.
  await sleep(spec.startGapMs);
}
process.send({ ready: edges.length });

process.on("message", async (m) => {
  if (m?.run === true) inRun = true;
  if (m?.stop !== true) return;
  const onCore = {};
  let moved = 0;
  for (const e of edges) {
    onCore[e.store.core] = (onCore[e.store.core] ?? 0) + 1;
    if (e.store.core !== e.firstCore) moved += 1;
  }
  await Promise.race([
    Promise.all(edges.map((e) => e.node.stop({ graceMs: 1000 }))),
    sleep(spec.stopTimeoutMs),
  ]);
  for (const e of edges) e.store.close();
  // Why the edges' workers claimed (Worker.claims), summed; absent from a build without them.
  const byCause = {};
  for (const e of edges)
    for (const [cause, c] of Object.entries(e.node.claims?.byCause ?? {})) {
      const sum = (byCause[cause] ??= { statements: 0, empty: 0, tasks: 0 });
      sum.statements += c.statements;
      sum.empty += c.empty;
      sum.tasks += c.tasks;
    }
  const loop = { p50Ms: loopDelay.percentile(50) / 1e6, p99Ms: loopDelay.percentile(99) / 1e6 };
  process.send(
    {
      stats: {
        claimMs,
        runClaimMs,
        claimsUnsent,
        finishAndClaimMs,
        failures,
        onCore,
        moved,
        loop,
        requests,
        byCause,
      },
    },
    () => process.exit(0),
  );
});
