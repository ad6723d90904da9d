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
