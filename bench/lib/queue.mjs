/**
 * Queued tasks made through dagbot's own store code, as a leader would make them: createRun of
 * independent no-op tasks (at most 1,000 per run, the DAG limit) and scheduleStep until all are
 * queued, under a lease the bench holds for the room. Also the claim/finish loop a worker runs.
 */
import { randomUUID } from "node:crypto";
import { load } from "./dist.mjs";

export const NOOP = "noop";
const MAX_TASKS_PER_RUN = 1000;
const OK = { outcome: "succeeded", exitCode: 0, output: "", error: null };

/** Takes the room's lease (long TTL) and lifts the room cap so scheduleStep queues every task. */
export async function leadRoom(store, roomId) {
  const session = { nodeId: "bench-leader", bootId: randomUUID().slice(0, 8) };
  const acquired = await store.acquireLease(roomId, session, 30 * 60 * 1000);
  const fence = { roomId, session, term: acquired.term };
  await store.setRoomCap(roomId, 100_000, { fence: fence });
  return fence;
}

/** Creates `count` queued no-op tasks in runs named `${prefix}_<i>`. */
export async function queueTasks(store, fence, prefix, count) {
  const { parseDag } = await load("domain/dag.js");
  let made = 0;
  for (let part = 0; made < count; part++) {
    const n = Math.min(MAX_TASKS_PER_RUN, count - made);
    const doc = {
      id: `${prefix}_${part}`,
      tasks: Array.from({ length: n }, (_, i) => ({ id: `t${i}`, action: NOOP })),
    };
    const parsed = parseDag(JSON.stringify(doc), "json");
    if (!parsed.ok) throw new Error(`bench DAG did not parse: ${JSON.stringify(parsed.issues[0])}`);
    const created = await store.createRun(
      { fence },
      {
        roomId: fence.roomId,
        dag: parsed.dag,
        hash: parsed.hash,
        publisher: "bench",
        publishEventId: null,
        needsConfirmation: false,
        confirmTimeoutMs: 60_000,
      },
    );
    if (created.kind !== "created") throw new Error(`bench run ${doc.id}: ${created.kind}`);
    made += n;
  }
  let queued = 0;
  while (queued < count) {
    const r = await store.scheduleStep(fence);
    queued += r.queued;
    if (r.queued === 0) throw new Error(`bench: only ${queued} of ${count} tasks got queued`);
  }
  return queued;
}

/** The worker's offer for the bench's no-op tasks. */
export function offer(roomId, nodeId) {
  return {
    session: { nodeId, bootId: randomUUID().slice(0, 8) },
    roomIds: [roomId],
    labels: [],
    actions: [NOOP],
    leaseMs: 60_000,
  };
}

/**
 * claimTask + finishTask until nothing is left. Store errors are counted, not thrown: the figure
 * "no busy error reaches the application" is this count.
 */
export async function claimLoop(store, theOffer) {
  let done = 0;
  let errors = 0;
  let firstError = null;
  for (;;) {
    let claimed;
    try {
      claimed = await store.claimTask(theOffer);
    } catch (e) {
      errors += 1;
      firstError ??= String(e?.cause ?? e);
      if (errors > 1000) break;
      continue;
    }
    if (claimed === null) break;
    try {
      await store.finishTask(claimed.token, OK);
      done += 1;
    } catch (e) {
      errors += 1;
      firstError ??= String(e?.cause ?? e);
    }
  }
  return { done, errors, firstError };
}
