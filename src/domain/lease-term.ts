/**
 * A lease as its holder may trust it, on the holder's own monotonic clock: the room lease a leader
 * holds and the task lease a worker holds are both read through this value.
 *
 * A lease acquired or renewed by a write SENT at `sentAt` lasts until at least sentAt + ttl on the
 * store's clock (the store executed the write no earlier than it was sent), so the holder trusts it
 * until then and not a moment longer: a paused process wakes up to an expired term, never to a lease
 * it believes it still holds. Pure: every function takes the time it is asked about.
 */
import { backoffMs } from "./backoff.js";

export interface LeaseTerm {
  /** When the write that last succeeded (acquire, claim or renewal) was sent, monotonic ms. */
  readonly sentAt: number;
  /** How long the store keeps the lease after that write. */
  readonly ttlMs: number;
}

export function leaseTerm(sentAt: number, ttlMs: number): LeaseTerm {
  return { sentAt, ttlMs };
}

/**
 * The term after a renewal sent at `sentAt` succeeded. Renewals may come back out of order; an
 * older one never shortens the term.
 */
export function renewedTerm(term: LeaseTerm, sentAt: number): LeaseTerm {
  return sentAt > term.sentAt ? { sentAt, ttlMs: term.ttlMs } : term;
}

/** The last monotonic instant at which the holder may act on the lease. */
export function trustedUntil(term: LeaseTerm): number {
  return term.sentAt + term.ttlMs;
}

/** How long the holder may still trust the lease at `now` (zero or less: expired). */
export function remainingMs(term: LeaseTerm, now: number): number {
  return trustedUntil(term) - now;
}

export function isExpired(term: LeaseTerm, now: number): boolean {
  return remainingMs(term, now) <= 0;
}

/**
 * How long to wait for the answer to a renewal sent at `sentAt` before giving up on it: until the
 * term ends, less `reserveMs` the holder needs to act on a loss (a worker's margin and kill grace).
 * An answer that comes later is of no use: the holder has already let go.
 */
export function renewTimeoutMs(term: LeaseTerm, sentAt: number, reserveMs = 0): number {
  return Math.max(0, trustedUntil(term) - reserveMs - sentAt);
}

// A failed renewal is retried sooner than the regular period, doubling from this.
const RENEW_RETRY_BASE_MS = 200;

/**
 * The wait before the next renewal: the period (to the next multiple of it on `gridNowMs`, the
 * monotonic clock, when given), or after `failures` failed ones a shorter backoff.
 */
export function renewDelayMs(renewEveryMs: number, failures: number, gridNowMs?: number): number {
  if (failures === 0)
    // On a grid (multiples of renewEvery on the node's monotonic clock), the node's rooms renew
    // together and their renewals go out as one statement; the wait is never longer than renewEvery.
    return gridNowMs === undefined ? renewEveryMs : renewEveryMs - (gridNowMs % renewEveryMs);
  return backoffMs({ baseMs: RENEW_RETRY_BASE_MS, capMs: renewEveryMs }, failures);
}
