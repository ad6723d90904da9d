// The lease term a holder trusts, on its own clock: pure arithmetic, no store and no real time.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  isExpired,
  leaseTerm,
  remainingMs,
  renewDelayMs,
  renewTimeoutMs,
  renewedTerm,
  trustedUntil,
} from "../../src/domain/lease-term.js";

describe("lease term", () => {
  it("is trusted for ttl after the send of the write that succeeded, and not a moment longer", () => {
    const term = leaseTerm(5_000, 10_000);
    expect(trustedUntil(term)).toBe(15_000);
    expect(remainingMs(term, 14_999)).toBe(1);
    expect(isExpired(term, 14_999)).toBe(false);
    expect(isExpired(term, 15_000)).toBe(true);
    expect(remainingMs(term, 20_000)).toBe(-5_000);
  });

  it("moves with a renewal sent later; an older renewal coming back late never shortens it", () => {
    const term = leaseTerm(0, 10_000);
    const renewed = renewedTerm(term, 3_000);
    expect(trustedUntil(renewed)).toBe(13_000);
    expect(renewedTerm(renewed, 2_000)).toBe(renewed);
  });

  it("gives a renewal until the term ends, less what the holder needs to let go", () => {
    const term = leaseTerm(0, 10_000);
    expect(renewTimeoutMs(term, 3_000)).toBe(7_000);
    expect(renewTimeoutMs(term, 3_000, 1_000 + 5_000)).toBe(1_000);
    expect(renewTimeoutMs(term, 9_000, 2_000)).toBe(0);
  });

  it("renews every period while renewals succeed, sooner with a doubling backoff after failures", () => {
    expect([0, 1, 2, 3, 4, 10].map((f) => renewDelayMs(3_000, f))).toEqual([
      3_000, 400, 800, 1_600, 3_000, 3_000,
    ]);
  });

  it("a holder acting only while not expired never acts past the store's expiry", () => {
    // Store time = holder time + skew ≥ holder time (the store executed the write after it was sent).
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 1e9 }),
        fc.integer({ min: 1, max: 600_000 }),
        fc.integer({ min: 0, max: 5_000 }),
        fc.integer({ min: 0, max: 1_200_000 }),
        (sentAt, ttl, delay, later) => {
          const term = leaseTerm(sentAt, ttl);
          const storeExpiry = sentAt + delay + ttl;
          const now = sentAt + later;
          if (!isExpired(term, now)) expect(now).toBeLessThan(storeExpiry);
        },
      ),
    );
  });
});
