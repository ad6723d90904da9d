/**
 * A core's gate before its edges' claims (docs/operations.md, "Edge nodes"; docs/architecture.md §3,
 * "Task lease"): under load the store's connections go to what keeps a guarantee (renewals,
 * finishes, releases: an attempt whose lease runs out is run again) rather than to claims, which are
 * optional work an edge asks for again.
 *
 * - QueueLook: a claim first asks whether any queued task could fit its offer, from ONE shared read
 *   of the queue's shapes (QueueReader), not a claim transaction each. A claim may use only a read
 *   that started after it arrived (FreshRead), so a task queued before the claim was sent is seen;
 *   one queued later is announced by the leader's wake, which makes the edge claim again. Only
 *   "nothing fits" must be fresh: while a recent read found work, the claims that fit it go on,
 *   and so does the claim of an edge the leader just woke (the wake says work was queued for it).
 * - ClaimAdmission: a claim reaches the store only while the claims in flight leave part of the
 *   store pool to the other calls and the pool is not already full of them; others wait their turn,
 *   and a claim past the wait bound, or waiting too long, is refused (ClaimsBusyError: the edge
 *   claims again after a short while). Every other call goes straight on, only counted.
 */
import type { Clock } from "../ports/clock.js";
import type { ClaimBatch, NodeOffer, QueueReader, QueuedShape } from "../ports/store.js";
import { nodesNamedBy } from "../ports/store.js";
import { taskFits } from "../domain/claim-fit.js";

/**
 * A read shared by the calls that arrive while it is in flight, with one rule that keeps it true for
 * each of them: a call is answered only by a read that STARTED after the call arrived. A call
 * arriving while a read is in flight waits for the next one, which starts when that one ends; all
 * the calls arriving meanwhile share that next read. So at most one read is in flight, and any
 * number of calls cost at most two reads. With `spacing`, reads also start at least `gapMs` apart:
 * a call arriving sooner after the last start waits for the next read with the others (calls spread
 * over time then share reads too, at the cost of at most `gapMs` of wait).
 */
export class FreshRead<T> {
  private inFlight: Promise<T> | null = null;
  /** The read that starts next (when the one in flight ends and the gap passed); calls wait for it. */
  private following: Promise<T> | null = null;
  private lastStart = -Infinity;
  /** Reads started (tests read it). */
  reads = 0;

  constructor(
    private readonly read: () => Promise<T>,
    private readonly spacing?: { clock: Pick<Clock, "monotonicMs" | "sleep">; gapMs: number },
  ) {}

  get(): Promise<T> {
    if (this.following !== null) return this.following;
    if (this.inFlight === null && this.untilGap() <= 0) return this.begin();
    this.following = this.next();
    return this.following;
  }

  private untilGap(): number {
    return this.spacing === undefined
      ? 0
      : this.lastStart + this.spacing.gapMs - this.spacing.clock.monotonicMs();
  }

  private async next(): Promise<T> {
    if (this.inFlight !== null)
      await this.inFlight.then(
        () => undefined,
        () => undefined,
      );
    const wait = this.untilGap();
    if (wait > 0) await this.spacing!.clock.sleep(wait);
    return this.begin();
  }

  private begin(): Promise<T> {
    this.following = null;
    this.reads += 1;
    this.lastStart = this.spacing?.clock.monotonicMs() ?? 0;
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

/**
 * How long a read that found ready work sends the claims that fit it straight to the store, without
 * a fresh read each. Only "nothing fits" must be fresh: a claim sent on for work already taken finds
 * nothing, as every claim did before the look, and says so (claimedNothing).
 */
export const FOUND_WORK_FOR_MS = 1_000;

/**
 * The least time between two starts of a core's read of the queue: an idle fleet's safety ticks
 * arrive spread over time (a thousand edges every 10 s), and without a gap nearly each would start
 * a read of its own. 10 ms makes that at most a hundred reads a second a core (each one read-only
 * statement: no WAL flush, no commit lock), and delays a claim at most that long (a claim that fits
 * work a recent read found does not wait: FOUND_WORK_FOR_MS). Under the bench's 1,000 edges the
 * claims a core served waited 84 ms at the median with 100 ms, 14–16 ms with 20 and 6 ms with 10,
 * at the same throughput and connections; the idle fleet's cores and server went from 2.6 % and
 * 1.8 % of the machine to 3.1 % and 3.2 % (bench/README.md, "Edge nodes").
 */
export const READ_GAP_MS = 10;

/** Past this many woken nodes remembered, those heard of longer than FOUND_WORK_FOR_MS ago are dropped. */
const WOKEN_KEPT = 4096;

/** The shared look at the queue of a core's rooms before its edges' claims. */
export class QueueLook {
  private readonly shapes: FreshRead<QueuedShape[]>;
  /** The last read, while it found ready work (and not longer than FOUND_WORK_FOR_MS). */
  private found: { shapes: QueuedShape[]; at: number } | null = null;
  /** The nodes a leader's wake named lately, and when this core heard it (monotonic ms). */
  private readonly woken = new Map<string, number>();
  /** When a wake that named no node (every node) was heard last. */
  private wokenAll = -Infinity;

  constructor(
    store: QueueReader,
    rooms: readonly string[],
    private readonly clock: Pick<Clock, "monotonicMs" | "sleep">,
    gapMs = READ_GAP_MS,
  ) {
    this.shapes = new FreshRead(() => store.queuedShapes(rooms), { clock, gapMs });
  }

  /** Reads of the queue made so far (tests and the bench read it). */
  get reads(): number {
    return this.shapes.reads;
  }

  /**
   * A leader's wake reached this core (its change feed's "wake"), naming the nodes it wakes (a name
   * may carry "/N", how many to take: nodesNamedBy reads it as wakeFor does), or none for every node: each of them claims next because work
   * was queued for it, so that claim goes on to the store without waiting for a read (up to
   * READ_GAP_MS). A "go on" is never wrong, only a claim transaction that may find nothing.
   */
  heardWake(nodes: readonly string[] | undefined): void {
    const now = this.clock.monotonicMs();
    if (nodes === undefined) {
      this.wokenAll = now;
      return;
    }
    if (this.woken.size > WOKEN_KEPT)
      for (const [node, at] of this.woken) if (now - at >= FOUND_WORK_FOR_MS) this.woken.delete(node);
    for (const name of nodes) for (const node of nodesNamedBy(name)) this.woken.set(node, now);
  }

  /** The empty answer when no queued task fits the offer (no claim needed), null when one may. */
  async emptyClaim(offer: NodeOffer): Promise<ClaimBatch | null> {
    const now = this.clock.monotonicMs();
    const wokenAt = this.woken.get(offer.session.nodeId);
    if (wokenAt !== undefined) this.woken.delete(offer.session.nodeId);
    if (now - Math.max(wokenAt ?? -Infinity, this.wokenAll) < FOUND_WORK_FOR_MS) return null;
    const found = this.found;
    if (
      found !== null &&
      this.clock.monotonicMs() - found.at < FOUND_WORK_FOR_MS &&
      emptyClaimFor(found.shapes, offer) === null
    )
      return null;
    const shapes = await this.shapes.get();
    this.found = shapes.some((s) => s.ready > 0) ? { shapes, at: this.clock.monotonicMs() } : null;
    return emptyClaimFor(shapes, offer);
  }

  /** A claim sent on took nothing: the work the last read found may be gone; the next claims read afresh. */
  claimedNothing(): void {
    this.found = null;
  }
}

/** A claim refused for load before the store was asked: the edge asks again after `retryAfterS`. */
export class ClaimsBusyError extends Error {
  override readonly name = "ClaimsBusyError";
  constructor(
    readonly retryAfterS: number,
    why: string,
  ) {
    super(`the core is busy (${why}); claim again in about ${retryAfterS} s`);
  }
}

/**
 * The bounds of a refused claim's Retry-After (its edge's client spreads it: src/adapters/edge/
 * edge-store.ts). Between them, the time the claims ahead of it take to pass at the recent pace:
 * those waiting now, and those refused within the last BUSY_RETRY_AFTER_MAX_S, which come back
 * before it. An edge that asks sooner is refused again, and each refusal costs the core a request
 * and the edge's machine as much: with a thousand edges on a core that serves tens of claims a
 * second, the claims waiting alone said 1 to 3 s, and the edges asked ten times for each claim
 * served (bench/README.md, "Edge nodes"). An edge still takes a task the moment a finish of its
 * own claims one (finish-and-claim), and a refusal is work delayed at most this long.
 */
export const BUSY_RETRY_AFTER_MIN_S = 1;
export const BUSY_RETRY_AFTER_MAX_S = 10;

/**
 * How long a claim may wait its turn before it is refused rather than sent: well within the edge's
 * request timeout (10 s), whose expiry on a claim costs a look at what the session holds.
 */
export const CLAIM_WAIT_MAX_MS = 2_000;

/**
 * The share of the store pool kept from claims, for the calls that keep a guarantee: a quarter, at
 * least one connection when the pool has two or more. A pool of one is shared as it comes.
 */
export function claimSlotsFor(poolSize: number): number {
  const reserved = poolSize > 1 ? Math.max(1, Math.floor(poolSize / 4)) : 0;
  return Math.max(1, poolSize - reserved);
}

/** How many claims may wait their turn: four per pool connection, a wait of a few claims' time each. */
export function claimWaitBoundFor(poolSize: number): number {
  return poolSize * 4;
}

export class ClaimAdmission {
  /** Edge store calls in flight, claims included. */
  private inFlight = 0;
  private claiming = 0;
  /** The claims waiting their turn, first come first; each is admitted with its turn counted. */
  private readonly waiting: (() => void)[] = [];
  readonly claimSlots: number;
  readonly waitBound: number;
  /** Claims refused for load (tests and the bench read it). */
  refused = 0;
  /** How long a claim held its turn lately (ms, a moving average): the pace of the queue. */
  private claimMs = 0;
  /** Refusals per second of the last BUSY_RETRY_AFTER_MAX_S seconds, by second modulo their count. */
  private readonly refusedBySecond = new Array<number>(BUSY_RETRY_AFTER_MAX_S).fill(0);
  /** The second (monotonic, floor) refusedBySecond was last moved to. */
  private refusedSecond = 0;

  constructor(
    private readonly poolSize: number,
    private readonly clock: Pick<Clock, "sleep" | "monotonicMs">,
    private readonly waitMaxMs = CLAIM_WAIT_MAX_MS,
  ) {
    this.claimSlots = claimSlotsFor(poolSize);
    this.waitBound = claimWaitBoundFor(poolSize);
  }

  /** Claims waiting their turn now. */
  get queued(): number {
    return this.waiting.length;
  }

  /** Runs a claim once its turn comes; ClaimsBusyError, before `call` runs, when it would wait past the bounds. */
  async claim<T>(call: () => Promise<T>): Promise<T> {
    if (this.waiting.length === 0 && this.hasRoom()) this.take();
    else await this.waitTurn();
    const started = this.clock.monotonicMs();
    try {
      return await call();
    } finally {
      const took = this.clock.monotonicMs() - started;
      this.claimMs = this.claimMs === 0 ? took : 0.8 * this.claimMs + 0.2 * took;
      this.claiming -= 1;
      this.inFlight -= 1;
      this.pass();
    }
  }

  /** Runs a call that is never refused (a renewal, a finish, a release, an output write), counted. */
  async other<T>(call: () => Promise<T>): Promise<T> {
    this.inFlight += 1;
    try {
      return await call();
    } finally {
      this.inFlight -= 1;
      this.pass();
    }
  }

  private hasRoom(): boolean {
    return this.claiming < this.claimSlots && this.inFlight < this.poolSize;
  }

  private take(): void {
    this.claiming += 1;
    this.inFlight += 1;
  }

  /** Resolves with its turn taken (counted by pass), or rejects busy. */
  private waitTurn(): Promise<void> {
    if (this.waiting.length >= this.waitBound)
      return Promise.reject(this.busy("the claims waiting are at the bound"));
    return new Promise<void>((resolve, reject) => {
      const timer = new AbortController();
      const waiter = (): void => {
        timer.abort();
        resolve();
      };
      this.waiting.push(waiter);
      void this.clock.sleep(this.waitMaxMs, timer.signal).then(() => {
        if (timer.signal.aborted) return;
        const at = this.waiting.indexOf(waiter);
        if (at < 0) return;
        this.waiting.splice(at, 1);
        reject(this.busy(`a claim waited ${this.waitMaxMs} ms for its turn`));
      });
    });
  }

  /** Hands freed room to the claims waiting, first come first. */
  private pass(): void {
    while (this.waiting.length > 0 && this.hasRoom()) {
      this.take();
      this.waiting.shift()!();
    }
  }

  /** The claims refused within the last BUSY_RETRY_AFTER_MAX_S seconds (they come back), this one counted. */
  private refusedLately(): number {
    const second = Math.floor(this.clock.monotonicMs() / 1000);
    const n = this.refusedBySecond.length;
    for (let s = Math.max(this.refusedSecond + 1, second - n + 1); s <= second; s += 1)
      this.refusedBySecond[s % n] = 0;
    this.refusedSecond = Math.max(this.refusedSecond, second);
    this.refusedBySecond[second % n]! += 1;
    return this.refusedBySecond.reduce((a, b) => a + b, 0);
  }

  private busy(why: string): ClaimsBusyError {
    this.refused += 1;
    // Ahead of this claim when it comes back: those waiting, and those refused lately (before it).
    const ahead = this.waiting.length + this.refusedLately() - 1;
    const passMs = (ahead * this.claimMs) / this.claimSlots;
    const retryAfterS = Math.min(
      BUSY_RETRY_AFTER_MAX_S,
      Math.max(BUSY_RETRY_AFTER_MIN_S, Math.ceil(passMs / 1000)),
    );
    return new ClaimsBusyError(retryAfterS, why);
  }
}
