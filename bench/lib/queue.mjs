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

/** Whether this build's Store has finishAndClaim (an older build via DAGBOT_BENCH_DIST may not). */
export const hasFinishAndClaim = (store) => typeof store.finishAndClaim === "function";

/**
 * A worker's claim/finish loop with one slot, until a claim finds nothing. As a node does now:
 * claimTasks(offer, 1); while it holds a task, when the last batch said `more` (fitting ready
 * tasks were left) the slot is handed on with finishAndClaim(token, OK, offer, 1) and the loop goes
 * on with the task that returns, else finishTask and a fresh claim. `apart: true` (and a build
 * without finishAndClaim) keeps the finish and the next claim apart, as nodes did before it.
 * Store errors are counted, not thrown: the figure "no busy error reaches the application" is this
 * count. A refused finish leaves its task unfinished (so the round's count shows it) and the loop
 * claims afresh. `budget` ({ left }), shared by loops, caps the claims they make in all (each
 * claim, alone or in a finishAndClaim, takes one); the loop ends when it is spent.
 */
export async function claimLoop(store, theOffer, { apart = false, budget = { left: Infinity } } = {}) {
  const together = !apart && hasFinishAndClaim(store);
  // claimTasks(offer, 1) is what a node sends; a build from before it has only claimTask.
  const claimOne =
    typeof store.claimTasks === "function"
      ? () => store.claimTasks(theOffer, 1)
      : async () => {
          const claimed = await store.claimTask(theOffer);
          return { claimed: claimed === null ? [] : [claimed], more: false };
        };
  let done = 0;
  let errors = 0;
  let firstError = null;
  const failed = (e) => {
    errors += 1;
    firstError ??= String(e?.cause ?? e);
  };
  for (;;) {
    if (budget.left <= 0) break;
    budget.left -= 1;
    let batch;
    try {
      batch = await claimOne();
    } catch (e) {
      budget.left += 1;
      failed(e);
      if (errors > 1000) break;
      continue;
    }
    let task = batch.claimed[0];
    if (task === undefined) break;
    let more = batch.more;
    while (task !== undefined) {
      if (together && more && budget.left > 0) {
        budget.left -= 1;
        let next;
        try {
          next = await store.finishAndClaim(task.token, OK, theOffer, 1);
        } catch (e) {
          // Refused or failed as a whole: nothing was claimed either.
          budget.left += 1;
          failed(e);
          break;
        }
        done += 1;
        task = next.batch.claimed[0];
        more = next.batch.more;
        // The claim half found nothing: the loop ends as after any empty claim.
        if (task === undefined) return { done, errors, firstError };
      } else {
        try {
          await store.finishTask(task.token, OK);
          done += 1;
        } catch (e) {
          failed(e);
        }
        task = undefined;
      }
    }
  }
  return { done, errors, firstError };
}
