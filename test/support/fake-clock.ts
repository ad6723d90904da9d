/**
 * A Clock (src/ports/clock.ts) whose time moves only when a test says so. Sleeps wait for `advance`
 * to pass their deadline (or for their signal), in deadline order, and the loops they belong to run
 * to their next sleep before time moves on: a lease expiring after 10 s is tested in no real time.
 */
import type { Clock } from "../../src/ports/clock.js";

interface Sleeper {
  at: number;
  seq: number;
  wake: () => void;
}

/** Lets every pending promise chain (and the timers-free I/O of fakes) run. */
export async function settle(rounds = 5): Promise<void> {
  for (let i = 0; i < rounds; i += 1) await new Promise<void>((resolve) => setImmediate(resolve));
}

export class FakeClock implements Clock {
  private now: number;
  private seq = 0;
  private readonly sleepers = new Set<Sleeper>();

  constructor(
    start = 1_000,
    /** wallMs() is this plus the monotonic time. */
    private readonly wallOffset = Date.UTC(2030, 0, 1),
  ) {
    this.now = start;
  }

  monotonicMs(): number {
    return this.now;
  }

  wallMs(): number {
    return this.wallOffset + this.now;
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve) => {
      if (signal?.aborted === true) return resolve();
      const sleeper: Sleeper = {
        at: this.now + Math.max(0, ms),
        seq: (this.seq += 1),
        wake: () => {
          this.sleepers.delete(sleeper);
          signal?.removeEventListener("abort", sleeper.wake);
          resolve();
        },
      };
      this.sleepers.add(sleeper);
      signal?.addEventListener("abort", sleeper.wake, { once: true });
    });
  }

  /** How many sleeps are waiting. */
  get sleeping(): number {
    return this.sleepers.size;
  }

  /**
   * Moves time forward by `ms`: each sleep due on the way wakes at its own deadline (time stands
   * there while the woken code runs to its next await), then time stops at now + ms.
   */
  async advance(ms: number): Promise<void> {
    const target = this.now + ms;
    await settle();
    for (;;) {
      let next: Sleeper | null = null;
      for (const s of this.sleepers) {
        if (s.at <= target && (next === null || s.at < next.at || (s.at === next.at && s.seq < next.seq))) {
          next = s;
        }
      }
      if (next === null) break;
      this.now = Math.max(this.now, next.at);
      next.wake();
      await settle();
    }
    this.now = target;
    await settle();
  }
}
