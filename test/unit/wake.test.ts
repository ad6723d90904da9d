/** The Waker's leading-edge debounce, over a clock whose sleeps only advance its time and are recorded. */
import { describe, expect, it } from "vitest";
import { Waker } from "../../src/app/wake.js";
import type { Clock } from "../../src/ports/clock.js";

class SteppingClock implements Clock {
  now = 1_000;
  readonly sleeps: number[] = [];
  monotonicMs(): number {
    return this.now;
  }
  wallMs(): number {
    return this.now;
  }
  sleep(ms: number): Promise<void> {
    this.sleeps.push(ms);
    this.now += ms;
    return Promise.resolve();
  }
}

/** A clock whose sleeps never end by themselves: only their abort signal ends them. */
class HeldClock implements Clock {
  now = 0;
  readonly held: number[] = [];
  monotonicMs(): number {
    return this.now;
  }
  wallMs(): number {
    return this.now;
  }
  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    this.held.push(ms);
    return new Promise((resolve) => {
      if (signal?.aborted === true) resolve();
      else signal?.addEventListener("abort", () => resolve(), { once: true });
    });
  }
}

describe("Waker", () => {
  const live = new AbortController().signal;

  it("acts at once on the first wake, and on a wake after a quiet spell longer than the debounce", async () => {
    const clock = new SteppingClock();
    const waker = new Waker(clock, 15);
    waker.wake();
    expect(await waker.wait(1_000, live)).toBe(true);
    clock.now += 40;
    waker.wake();
    expect(await waker.wait(1_000, live)).toBe(true);
    expect(clock.sleeps).toEqual([]);
  });

  it("keeps passes started by a burst of wakes at least the debounce apart", async () => {
    const clock = new SteppingClock();
    const waker = new Waker(clock, 15);
    waker.wake();
    await waker.wait(1_000, live);
    clock.now += 4; // the pass took 4 ms; more changes arrived meanwhile
    waker.wake();
    waker.wake();
    expect(await waker.wait(1_000, live)).toBe(true);
    expect(clock.sleeps).toEqual([11]);
  });

  it("sleeps the safety tick when nothing wakes it, and reports a tick", async () => {
    const clock = new SteppingClock();
    const waker = new Waker(clock, 15);
    expect(await waker.wait(1_000, live)).toBe(false);
    expect(clock.sleeps).toEqual([1_000]);
  });

  it("skips the debounce for an urgent wake within a burst, once", async () => {
    const clock = new SteppingClock();
    const waker = new Waker(clock, 15);
    waker.wake();
    await waker.wait(1_000, live);
    clock.now += 4; // the pass took 4 ms, and changes arrived meanwhile
    waker.wake();
    waker.wake(true);
    expect(await waker.wait(1_000, live)).toBe(true);
    clock.now += 1;
    // The urgency is spent by the pass it started: the next plain wake is debounced again.
    waker.wake();
    expect(await waker.wait(1_000, live)).toBe(true);
    expect(clock.sleeps).toEqual([14]);
  });

  it("ends a debounce already holding a pass back when an urgent wake arrives", async () => {
    const clock = new HeldClock();
    const waker = new Waker(clock, 15);
    waker.wake();
    await waker.wait(1_000, live);
    waker.wake();
    const passing = waker.wait(1_000, live);
    await Promise.resolve();
    expect(clock.held).toEqual([15]);
    waker.wake(true);
    expect(await passing).toBe(true);
    expect(clock.now).toBe(0);
  });

  it("never debounces when the debounce is 0", async () => {
    const clock = new SteppingClock();
    const waker = new Waker(clock, 0);
    for (let i = 0; i < 3; i++) {
      waker.wake();
      await waker.wait(1_000, live);
    }
    expect(clock.sleeps).toEqual([]);
  });
});
