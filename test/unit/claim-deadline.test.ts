/**
 * The deadline arithmetic of a worker's claim (domain/claim-deadline.ts), on a fake clock: a timeline
 * of renewals that succeed, fail or hang, checked against the store's view of the lease.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { ClaimTimings } from "../../src/domain/claim-deadline.js";
import {
  claimDeadlines,
  claimTimingProblem,
  defaultMarginMs,
  mayStart,
  nextRenewalAt,
  renewalSlackMs,
  storeOutageBoundMs,
  unrenewedWords,
} from "../../src/domain/claim-deadline.js";

const DEFAULTS: ClaimTimings = { ttlMs: 10_000, renewEveryMs: 3_000, marginMs: 1_000 };

describe("claim deadlines", () => {
  it("count from the send time of the last renewal that succeeded", () => {
    expect(claimDeadlines(50_000, DEFAULTS, 5_000)).toEqual({
      expiresAt: 60_000,
      stopBy: 59_000,
      termAt: 54_000,
    });
    expect(defaultMarginMs(10_000)).toBe(1_000);
    expect(defaultMarginMs(2_000)).toBe(200);
  });

  it("allow a start only before termAt", () => {
    const d = claimDeadlines(0, DEFAULTS, 5_000);
    expect(mayStart(3_999, d)).toBe(true);
    expect(mayStart(4_000, d)).toBe(false);
    expect(mayStart(9_000, d)).toBe(false);
  });

  it("renew every renew_every, and retry a failure sooner with a doubling backoff", () => {
    expect(nextRenewalAt(1_000, 1_000, 0, DEFAULTS)).toBe(4_000);
    expect(nextRenewalAt(1_000, 4_000, 1, DEFAULTS)).toBe(4_100);
    expect(nextRenewalAt(1_000, 4_100, 2, DEFAULTS)).toBe(4_300);
    expect(nextRenewalAt(1_000, 4_300, 3, DEFAULTS)).toBe(4_700);
    // Never later than a second after the last try: the store back, the renewal follows soon.
    expect(nextRenewalAt(1_000, 9_000, 30, DEFAULTS)).toBe(10_000);
  });

  it("state the relation renew_every + margin + kill_grace < ttl, naming the keys when it breaks", () => {
    expect(renewalSlackMs(DEFAULTS, 5_000)).toBe(1_000);
    expect(claimTimingProblem(DEFAULTS, 5_000)).toBeNull();
    expect(claimTimingProblem(DEFAULTS, 6_000)).toBe(
      "6s is too long for the task lease: lease.renew_every (3s) + lease.task_margin (1s) + kill_grace must be " +
        "shorter than lease.task_ttl (10s), so that a renewal can succeed before the worker must start stopping " +
        "the action; shorten kill_grace, lease.renew_every or lease.task_margin, or lengthen lease.task_ttl",
    );
  });

  it("bound the store outage that stops no action: 45 s at the default task lease, none at the room lease's", () => {
    const task: ClaimTimings = { ttlMs: 60_000, renewEveryMs: 3_000, marginMs: defaultMarginMs(60_000) };
    expect(storeOutageBoundMs(task, 5_000)).toBe(45_000);
    // An outage that begins just before a renewal is due, ends within the bound, and is followed
    // by a try within the retry cap: that try is sent before termAt.
    const lastOk = 0;
    const outageEnds = task.renewEveryMs + storeOutageBoundMs(task, 5_000);
    expect(outageEnds + 1_000).toBeLessThanOrEqual(claimDeadlines(lastOk, task, 5_000).termAt);
    expect(storeOutageBoundMs(DEFAULTS, 5_000)).toBe(0);
  });

  it("say why an action is stopped: the store unreachable since the first failed renewal, or no answer at all", () => {
    expect(unrenewedWords(40_000, 3_000, 9_000)).toBe("the store was unreachable for 31s");
    expect(unrenewedWords(12_000, 3_000, null)).toBe("no renewal of the task lease was answered for 9s");
  });

  it("on a fake clock: a worker whose renewals answer within the slack never reaches termAt", () => {
    fc.assert(
      fc.property(
        timingsArb(),
        fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 50 }),
        (c, rtts) => {
          let now = 0;
          let lastOk = 0;
          for (const share of rtts) {
            now = nextRenewalAt(lastOk, lastOk, 0, c.timings);
            const termAt = claimDeadlines(lastOk, c.timings, c.killGraceMs).termAt;
            expect(now).toBeLessThan(termAt);
            // The answer comes back before termAt: any round trip shorter than the slack.
            const answeredAt = now + share * (renewalSlackMs(c.timings, c.killGraceMs) - 1);
            expect(answeredAt).toBeLessThan(termAt);
            lastOk = now;
          }
        },
      ),
    );
  });

  it("on a fake clock: once renewals stop, the action is gone before the store could see the lease expired", () => {
    fc.assert(
      fc.property(
        timingsArb(),
        fc.array(fc.record({ ok: fc.boolean(), rtt: fc.integer({ min: 0, max: 5_000 }) }), { maxLength: 40 }),
        // The store's clock against ours: at most 100 ppm apart, far inside the margin over one ttl.
        fc.double({ min: -1e-4, max: 1e-4, noNaN: true }),
        (c, renewals, drift) => {
          const storeTime = (local: number) => local * (1 + drift);
          let lastOkSent = 0;
          // The claim itself: executed by the store no earlier than it was sent.
          let storeExpiry = storeTime(0) + c.timings.ttlMs;
          let now = 0;
          for (const r of renewals) {
            const sent = Math.max(now, nextRenewalAt(lastOkSent, now, r.ok ? 0 : 1, c.timings));
            const { termAt } = claimDeadlines(lastOkSent, c.timings, c.killGraceMs);
            if (sent >= termAt) break; // the worker stops the action instead of renewing
            const executed = sent + r.rtt / 2;
            now = sent + r.rtt;
            if (!r.ok || now >= termAt) continue; // failed, or answered too late to count
            storeExpiry = Math.max(storeExpiry, storeTime(executed) + c.timings.ttlMs);
            lastOkSent = sent;
          }
          const { stopBy, termAt } = claimDeadlines(lastOkSent, c.timings, c.killGraceMs);
          // SIGKILL at stopBy on our clock comes before the store could hand the task to anyone.
          expect(storeTime(stopBy)).toBeLessThanOrEqual(storeExpiry - c.timings.marginMs / 2);
          expect(termAt + c.killGraceMs).toBe(stopBy);
        },
      ),
    );
  });
});

/** Timings that satisfy the relation, with a kill_grace that fits. */
function timingsArb() {
  return fc
    .record({
      ttlMs: fc.integer({ min: 500, max: 120_000 }),
      renewShare: fc.double({ min: 0.05, max: 0.6, noNaN: true }),
      marginShare: fc.double({ min: 0.05, max: 0.2, noNaN: true }),
      graceShare: fc.double({ min: 0, max: 1, noNaN: true }),
    })
    .map(({ ttlMs, renewShare, marginShare, graceShare }) => {
      const renewEveryMs = Math.max(1, Math.floor(ttlMs * renewShare));
      const marginMs = Math.max(1, Math.floor(ttlMs * marginShare));
      const room = ttlMs - renewEveryMs - marginMs - 2;
      const killGraceMs = Math.floor(room * graceShare);
      return { timings: { ttlMs, renewEveryMs, marginMs }, killGraceMs };
    })
    .filter((c) => renewalSlackMs(c.timings, c.killGraceMs) > 1);
}
