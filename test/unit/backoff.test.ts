// The one backoff rule: doubling from a base, bounded doublings, a cap, jitter from an injected random.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { Backoff } from "../../src/domain/backoff.js";
import {
  CHAT_PASS_BACKOFF,
  MAX_TASK_RETRY_BACKOFF_MS,
  STORE_CALL_BACKOFF,
  backoffMs,
  taskRetryWaitMs,
} from "../../src/domain/backoff.js";

/** A fake random that hands out the given draws in turn and counts the calls. */
function draws(...values: number[]): (() => number) & { calls: number } {
  const next = Object.assign(
    () => {
      const v = values[next.calls % values.length] ?? 0;
      next.calls += 1;
      return v;
    },
    { calls: 0 },
  );
  return next;
}

describe("backoffMs", () => {
  it("doubles from the base per exponent and stops at the cap", () => {
    const waits = [0, 1, 2, 3, 4, 5, 6, 7, 20].map((n) => backoffMs(STORE_CALL_BACKOFF, n));
    expect(waits).toEqual([100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000]);
  });

  it("stops doubling at maxDoublings even under a high cap", () => {
    const policy: Backoff = { baseMs: 250, capMs: 1_000_000, maxDoublings: 7 };
    expect(backoffMs(policy, 7)).toBe(32_000);
    expect(backoffMs(policy, 50)).toBe(32_000);
    expect(backoffMs(CHAT_PASS_BACKOFF, 50)).toBe(30_000);
  });

  it("treats a negative exponent as zero", () => {
    expect(backoffMs(STORE_CALL_BACKOFF, -3)).toBe(100);
  });

  it("draws no random number without jitter", () => {
    const random = draws(0.9);
    expect(backoffMs(STORE_CALL_BACKOFF, 2, random)).toBe(400);
    expect(random.calls).toBe(0);
  });

  it("spreads a jittered wait over [low, high) of the capped wait, rounded", () => {
    const policy: Backoff = { baseMs: 500, capMs: 30_000, jitter: [0.8, 1.2] };
    expect(backoffMs(policy, 0, draws(0))).toBe(400);
    expect(backoffMs(policy, 0, draws(0.5))).toBe(500);
    expect(backoffMs(policy, 1, draws(0.99))).toBe(1196);
    // Jitter applies after the cap: a capped wait may be up to high × cap.
    expect(backoffMs(policy, 20, draws(0.75))).toBe(33_000);
  });

  it("refuses jitter without a random source (the domain draws none itself)", () => {
    expect(() => backoffMs({ baseMs: 1, capMs: 10, jitter: [0.5, 1] }, 1)).toThrow(/random source/);
  });

  it("never exceeds high × cap and never goes below low × base", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 10_000 }),
        fc.integer({ min: 1, max: 1_000_000 }),
        fc.integer({ min: -5, max: 100 }),
        fc.double({ min: 0, max: 0.999_999, noNaN: true }),
        (baseMs, capMs, exponent, r) => {
          const policy: Backoff = { baseMs, capMs, jitter: [0.5, 1.5] };
          const wait = backoffMs(policy, exponent, () => r);
          expect(wait).toBeLessThanOrEqual(Math.round(capMs * 1.5));
          expect(wait).toBeGreaterThanOrEqual(Math.round(Math.min(baseMs, capMs) * 0.5));
        },
      ),
    );
  });
});

describe("taskRetryWaitMs", () => {
  it("waits the base after the first failed attempt, then doubles", () => {
    expect([1, 2, 3, 4].map((a) => taskRetryWaitMs(1000, a))).toEqual([1000, 2000, 4000, 8000]);
  });

  it("is capped at an hour, or at the base when that is larger", () => {
    expect(taskRetryWaitMs(1000, 40)).toBe(MAX_TASK_RETRY_BACKOFF_MS);
    expect(taskRetryWaitMs(2 * MAX_TASK_RETRY_BACKOFF_MS, 5)).toBe(2 * MAX_TASK_RETRY_BACKOFF_MS);
  });
});
