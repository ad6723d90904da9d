/**
 * Section 3: leadership handoff under load, three `dagbot node` processes running a wide DAG.
 * kill -9 of the leader → the new leader's lease.acquired and its first fenced write (the first
 * event of the new term after the acquire), timed from the kill. SIGTERM of the leader → the new
 * leader's lease.acquired, timed from the signal. The load is a wide DAG (10 layers × 100, with
 * retries so a killed node's tasks run again), published again whenever it ends, so the leader
 * always has tasks to schedule when it takes over. Times are on the host clock, which both stores
 * use (PostgreSQL's now() runs on this machine).
 */
import { setTimeout as sleep } from "node:timers/promises";
import { Cluster, publishAndConfirm, ROOM, waitFor } from "./lib/cluster.mjs";
import { layered } from "./lib/dags.mjs";
import { freshStore } from "./lib/stores.mjs";

/** The default timings (10 s / 3 s / 1 s) scaled by 0.3, so a kill sample takes seconds, not tens. */
export const FAILOVER_LEASE = { ttl: "3s", renew_every: "900ms", acquire_every: "300ms" };
export const FAILOVER_TTL_MS = 3000;

async function lastSeq(store) {
  let since = 0;
  for (;;) {
    const page = await store.readEvents(ROOM, since, 1000);
    if (page.length === 0) return since;
    since = page[page.length - 1].seq;
  }
}

/** The new term's lease.acquired and first other event, once both are in the log. */
async function newTermEvents(store, sinceSeq, oldTerm, needWrite) {
  let acquired = null;
  let firstWrite = null;
  let since = sinceSeq;
  await waitFor(
    "the new leader's first write",
    async () => {
      for (;;) {
        const page = await store.readEvents(ROOM, since, 1000);
        for (const e of page) {
          if (e.term === null || e.term <= oldTerm) continue;
          if (e.kind === "lease.acquired") acquired ??= e;
          else if (acquired !== null && e.term === acquired.term) firstWrite ??= e;
        }
        if (page.length === 0) break;
        since = page[page.length - 1].seq;
      }
      return acquired !== null && (!needWrite || firstWrite !== null);
    },
    30_000,
    10,
  );
  return { acquired, firstWrite };
}

export async function benchFailover(scratch, kind, { kills, stops, log }) {
  const { dir, location, store } = await freshStore(scratch, kind, "failover");
  const cluster = new Cluster({ dir, storeUrl: location, store, capacity: 4, lease: FAILOVER_LEASE });
  const out = {
    loads: 0,
    killToAcquiredMs: [],
    killToFirstWriteMs: [],
    stopToAcquiredMs: [],
    stopToReleasedMs: [],
  };
  try {
    await cluster.startAll();
    await cluster.leader();
    let loadRun = null;
    let loads = 0;
    const keepLoaded = async () => {
      const r = loadRun === null ? null : await store.getRunById(loadRun);
      if (r === null || !["pending", "running", "canceling"].includes(r.status)) {
        loadRun = await publishAndConfirm(
          store,
          layered(`failover_load_${loads++}`, 10, 100, { retries: 3 }),
        );
        await sleep(500);
      }
    };
    for (let i = 0; i < kills + stops; i++) {
      const kill = i < kills;
      await keepLoaded();
      const lease = await cluster.leader();
      const victim = lease.holder.nodeId;
      const before = await lastSeq(store);
      const t0 = Date.now();
      if (kill) cluster.nodes.get(victim).child.kill("SIGKILL");
      else cluster.nodes.get(victim).child.kill("SIGTERM");
      const { acquired, firstWrite } = await newTermEvents(store, before, lease.term, kill);
      if (kill) {
        out.killToAcquiredMs.push(acquired.at - t0);
        out.killToFirstWriteMs.push(firstWrite.at - t0);
        log(
          `  ${kind} kill -9 ${victim}: new leader ${acquired.actor} acquired after ${acquired.at - t0} ms, ` +
            `first write (${firstWrite.kind}) after ${firstWrite.at - t0} ms`,
        );
      } else {
        const released = (await store.readEvents(ROOM, before, 1000)).find(
          (e) => e.kind === "lease.released" && e.term === lease.term,
        );
        out.stopToAcquiredMs.push(acquired.at - t0);
        if (released !== undefined) out.stopToReleasedMs.push(released.at - t0);
        log(
          `  ${kind} SIGTERM ${victim}: released after ${released === undefined ? "?" : released.at - t0} ms, ` +
            `new leader ${acquired.actor} after ${acquired.at - t0} ms`,
        );
      }
      await cluster.stop(victim, "SIGKILL");
      await cluster.start(victim);
    }
    out.loads = loads;
  } finally {
    await cluster.stopAll("SIGKILL");
    await store.close();
  }
  out.busyLogLines = cluster.logLines(/SQLITE_BUSY|database is locked/i);
  return out;
}
