/**
 * A core's gate before its edges' claims (docs/operations.md, "Edge nodes"; docs/architecture.md §3,
 * "Task lease"): under load the store's connections go to what keeps a guarantee (renewals,
 * finishes, releases: an attempt whose lease runs out is run again) rather than to claims, which are
 * optional work an edge asks for again.
 *
 * - QueueLook: a claim first asks whether any queued task could fit its offer, from ONE shared read
 *   of the queue's shapes (QueueReader), not a claim transaction each. A claim may use only a read
 *   that started after it arrived (FreshRead), so a task queued before the claim was sent is seen;
 *   one queued later is announced by the leader's wake, which makes the edge claim again.
 */
import type { ClaimBatch, NodeOffer, QueueReader, QueuedShape } from "../ports/store.js";
import { taskFits } from "../domain/claim-fit.js";

/**
 * A read shared by the calls that arrive while it is in flight, with one rule that keeps it true for
 * each of them: a call is answered only by a read that STARTED after the call arrived. A call
 * arriving while a read is in flight waits for the next one, which starts when that one ends; all
 * the calls arriving meanwhile share that next read. So at most one read is in flight, and any
 * number of calls cost at most two reads.
 */
export class FreshRead<T> {
  private inFlight: Promise<T> | null = null;
  /** The read that starts once the one in flight ends; the calls that arrived during it wait for it. */
  private following: Promise<T> | null = null;
  /** Reads started (tests read it). */
  reads = 0;

  constructor(private readonly read: () => Promise<T>) {}

  get(): Promise<T> {
    if (this.following !== null) return this.following;
    if (this.inFlight === null) return this.begin();
    const following = this.inFlight.then(
      () => this.begin(),
      () => this.begin(),
    );
    this.following = following;
    return following;
  }

  private begin(): Promise<T> {
    this.following = null;
    this.reads += 1;
    const read = this.read().finally(() => {
      if (this.inFlight === read) this.inFlight = null;
    });
    this.inFlight = read;
    return read;
  }
}

/**
 * Whether a claim with this offer could take a task, from the queue's shapes: null when a fitting
 * task is ready (the claim goes on to the store), else the claim's empty answer, with when the
 * soonest fitting task becomes ready.
 */
export function emptyClaimFor(shapes: readonly QueuedShape[], offer: NodeOffer): ClaimBatch | null {
  const node = {
    nodeId: offer.session.nodeId,
    labels: new Set(offer.labels),
    actions: new Set(offer.actions),
  };
  let nextReadyInMs: number | null = null;
  for (const shape of shapes) {
    if (!offer.roomIds.includes(shape.roomId) || !taskFits(shape, node)) continue;
    if (shape.ready > 0) return null;
    if (shape.nextReadyInMs !== null)
      nextReadyInMs = Math.min(nextReadyInMs ?? Infinity, shape.nextReadyInMs);
  }
  return { claimed: [], more: false, nextReadyInMs };
}

/** The shared look at the queue of a core's rooms before its edges' claims. */
export class QueueLook {
  private readonly shapes: FreshRead<QueuedShape[]>;

  constructor(store: QueueReader, rooms: readonly string[]) {
    this.shapes = new FreshRead(() => store.queuedShapes(rooms));
  }

  /** Reads of the queue made so far (tests and the bench read it). */
  get reads(): number {
    return this.shapes.reads;
  }

  /** The empty answer when no queued task fits the offer (no claim needed), null when one may. */
  async emptyClaim(offer: NodeOffer): Promise<ClaimBatch | null> {
    return emptyClaimFor(await this.shapes.get(), offer);
  }
}
