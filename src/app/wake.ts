/**
 * How the engine's loops wait: abortable sleeps that a change-feed topic cuts short, with a short
 * leading-edge debounce so a burst of changes costs few passes, and a slow safety tick for what no change announces
 * (leases and deadlines passing, a notification lost with a dropped connection).
 */
import type { Clock } from "../ports/clock.js";
import type { ChangeFeed, ChangeTopic } from "../ports/store.js";

const DONE_WAITING = new Error("done waiting");

/**
 * Ends a sleep or a race that `controller` can cut short. abort() without a reason makes a
 * DOMException, stack and all, on every call: about 20 µs, 2 % of the node's thread in a run of
 * 1,000 short tasks, where every task ends a few waits. No wait reads the reason.
 */
export function endWait(controller: AbortController | null | undefined): void {
  controller?.abort(DONE_WAITING);
}

export class Waker {
  private pending = false;
  /** A wake since the last pass asked to skip the debounce. */
  private urgent = false;
  private sleeping: AbortController | null = null;
  /** Set while the debounce holds a pass back; an urgent wake ends it. */
  private holding: AbortController | null = null;
  /** When the last wait() returned, i.e. when the caller's latest pass began. */
  private lastPassAt: number | null = null;

  constructor(
    private readonly clock: Clock,
    /** The least time between two passes a wake starts, so a burst of changes costs few passes. */
    private readonly debounceMs = 15,
  ) {}

  /**
   * Ask the waiting loop to run again soon; a wake while it is busy is kept for its next wait.
   * `urgent` skips the debounce, for a change on the critical path of a dependency (a task ended,
   * the leader asking this worker to claim) that comes at most as often as tasks end; one pass
   * covers all that piled up while the last one ran.
   */
  wake(urgent = false): void {
    this.pending = true;
    if (urgent) {
      this.urgent = true;
      endWait(this.holding);
    }
    endWait(this.sleeping);
  }

  /**
   * Resolves when woken, after `maxMs` (the safety tick), or when `signal` aborts. Returns whether a
   * wake arrived, so the caller can tell a change from a tick. The debounce is on the leading edge:
   * the first change after a quiet spell (usually alone: one task finished, one command arrived) is
   * acted on at once, and within a burst passes stay at least `debounceMs` apart, so one pass covers
   * what piled up meanwhile. (Sleeping the whole debounce after every wake put it on the critical
   * path of every dependency: bench/README.md, DAG overhead.)
   */
  async wait(maxMs: number, signal: AbortSignal): Promise<boolean> {
    if (!this.pending && !signal.aborted) {
      const sleeping = new AbortController();
      this.sleeping = sleeping;
      try {
        await this.sleepUnless(maxMs, signal, sleeping);
      } finally {
        this.sleeping = null;
      }
    }
    const woken = this.pending;
    if (woken && !this.urgent && this.debounceMs > 0 && !signal.aborted && this.lastPassAt !== null) {
      const since = this.clock.monotonicMs() - this.lastPassAt;
      if (since < this.debounceMs) await this.hold(this.debounceMs - since, signal);
    }
    this.pending = false;
    this.urgent = false;
    this.lastPassAt = this.clock.monotonicMs();
    return woken;
  }

  private async hold(ms: number, signal: AbortSignal): Promise<void> {
    const holding = new AbortController();
    this.holding = holding;
    try {
      await this.sleepUnless(ms, signal, holding);
    } finally {
      this.holding = null;
    }
  }

  /** Sleeps `ms` unless `signal` or `cut` aborts first. */
  private async sleepUnless(ms: number, signal: AbortSignal, cut: AbortController): Promise<void> {
    const onAbort = (): void => endWait(cut);
    signal.addEventListener("abort", onAbort, { once: true });
    try {
      await this.clock.sleep(ms, cut.signal);
    } finally {
      signal.removeEventListener("abort", onAbort);
    }
  }
}

/**
 * Wakes `waker` on changes of the given topics in `roomId` (a change with no room counts for every
 * room). Returns the unsubscribe function.
 */
export function wakeOnChange(
  feed: ChangeFeed,
  waker: Waker,
  topics: readonly ChangeTopic[],
  roomIds: readonly string[] | null,
): () => void {
  const wanted = new Set(topics);
  return feed.onChange((topic, roomId) => {
    if (!wanted.has(topic)) return;
    if (roomIds !== null && roomId !== null && !roomIds.includes(roomId)) return;
    waker.wake();
  }, topics);
}

/**
 * `promise`'s outcome, or undefined as soon as `signal` aborts, whichever comes first. The abort
 * listener is removed when the promise settles, so a loop that races every turn against one
 * long-lived signal does not pile up listeners (Promise.race with whenAborted() would add one per
 * turn until the signal aborts: the leader's leak of one listener per lease renewal).
 * A rejection that arrives after the abort is dropped.
 */
export function unlessAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T | undefined> {
  if (signal.aborted) {
    promise.catch(() => {});
    return Promise.resolve(undefined);
  }
  return new Promise((resolve, reject) => {
    const onAbort = (): void => resolve(undefined);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(err);
      },
    );
  });
}

/**
 * A promise that resolves when `signal` aborts (at once if it already has). Its listener stays until
 * then: use it once per signal, never in a loop (see unlessAborted).
 */
export function whenAborted(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener("abort", () => resolve(), { once: true });
  });
}
