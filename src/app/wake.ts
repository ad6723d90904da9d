/**
 * How the engine's loops wait: abortable sleeps that a change-feed topic cuts short, with a short
 * debounce so a burst of changes costs one pass, and a slow safety tick for what no change announces
 * (leases and deadlines passing, a notification lost with a dropped connection).
 */
import type { Clock } from "../ports/clock.js";
import type { ChangeFeed, ChangeTopic } from "../ports/store.js";

export class Waker {
  private pending = false;
  private sleeping: AbortController | null = null;

  constructor(
    private readonly clock: Clock,
    /** Time to let a burst of changes settle after the first one, so one pass sees them all. */
    private readonly debounceMs = 15,
  ) {}

  /** Ask the waiting loop to run again soon; a wake while it is busy is kept for its next wait. */
  wake(): void {
    this.pending = true;
    this.sleeping?.abort();
  }

  /**
   * Resolves when woken (after the debounce), after `maxMs` (the safety tick), or when `signal`
   * aborts. Returns whether a wake arrived, so the caller can tell a change from a tick.
   */
  async wait(maxMs: number, signal: AbortSignal): Promise<boolean> {
    if (!this.pending && !signal.aborted) {
      const sleeping = new AbortController();
      const onAbort = (): void => sleeping.abort();
      signal.addEventListener("abort", onAbort, { once: true });
      this.sleeping = sleeping;
      try {
        await this.clock.sleep(maxMs, sleeping.signal);
      } finally {
        signal.removeEventListener("abort", onAbort);
        this.sleeping = null;
      }
    }
    const woken = this.pending;
    if (woken && this.debounceMs > 0 && !signal.aborted) await this.clock.sleep(this.debounceMs, signal);
    this.pending = false;
    return woken;
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
  });
}

/** A promise that resolves when `signal` aborts (at once if it already has). */
export function whenAborted(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener("abort", () => resolve(), { once: true });
  });
}
