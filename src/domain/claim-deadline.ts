/**
 * The deadlines of a worker's claim on a task, on the worker's own monotonic clock: when it
 * may still start the action, when it must begin stopping it, and by when every process of the action
 * must be gone, so that the action has ended before the store could give the task to another node.
 *
 * A claim or renewal SENT at `s` makes the store's lease last until at least s + ttl on the store's
 * clock: the store executed the write no earlier than it was sent. Assuming this machine's monotonic
 * clock and the store's clock run at the same rate (within `margin` over one ttl), no other node can
 * be handed the task before s + ttl. So, counted from the last renewal that succeeded:
 *
 *   stopBy = s + ttl - margin        every process of the action is gone (SIGKILL sent)
 *   termAt = stopBy - kill_grace     SIGTERM unless a renewal succeeded since; no start at or after it
 *
 * The worker renews every renew_every, so a claim whose store is healthy is never stopped when
 *
 *   renew_every + margin + kill_grace < ttl
 *
 * (the renewal has the difference to come back); the node config rejects a config that breaks it.
 */
import { formatDuration } from "./duration.js";
import { backoffMs } from "./backoff.js";
import { leaseTerm, trustedUntil } from "./lease-term.js";

export interface ClaimTimings {
  /** The task lease: how long the store keeps the claim after a renewal. */
  ttlMs: number;
  /** How often the worker renews a running task's lease. */
  renewEveryMs: number;
  /** Kept between the end of the action and the earliest the lease could expire. */
  marginMs: number;
}

export interface ClaimDeadlines {
  /** The earliest the store could see the lease expired (on the worker's clock). */
  expiresAt: number;
  /** Every process of the action must be gone by then. */
  stopBy: number;
  /** SIGTERM to the action then, unless renewed; the action is never started at or after it. */
  termAt: number;
}

/** The default margin: a tenth of the ttl (1 s at the default 10 s). */
export function defaultMarginMs(ttlMs: number): number {
  return Math.round(ttlMs / 10);
}

/** The deadlines after the last renewal that succeeded, sent at `lastOkSentAt`. */
export function claimDeadlines(lastOkSentAt: number, t: ClaimTimings, killGraceMs: number): ClaimDeadlines {
  const expiresAt = trustedUntil(leaseTerm(lastOkSentAt, t.ttlMs));
  const stopBy = expiresAt - t.marginMs;
  return { expiresAt, stopBy, termAt: stopBy - killGraceMs };
}

/** Whether the action may be started at `now`: only while there is time to stop it before stopBy. */
export function mayStart(now: number, d: ClaimDeadlines): boolean {
  return now < d.termAt;
}

/**
 * Whether a claim is still as good as a renewal sent now: it was sent less than `margin` ago. The
 * worker starts the action on such a claim without renewing it first (the store gave it the task
 * until sentAt + ttl at the earliest, and every deadline counts from sentAt); an older claim (this
 * process paused, a slow store) is renewed before the action starts.
 */
export function claimIsFresh(now: number, sentAt: number, t: ClaimTimings): boolean {
  return now - sentAt < t.marginMs;
}

// A failed renewal is retried soon (doubling from this), never later than the regular period nor
// RETRY_CAP_MS: once an unreachable store is back, a renewal follows within a second.
const RETRY_BASE_MS = 100;
const RETRY_CAP_MS = 1_000;

/**
 * When to send the next renewal: renew_every after the last one that succeeded was sent; after
 * `failures` failed attempts in a row (the last sent at `lastTryAt`), sooner, with a doubling backoff.
 */
export function nextRenewalAt(
  lastOkSentAt: number,
  lastTryAt: number,
  failures: number,
  t: ClaimTimings,
): number {
  if (failures === 0) return lastOkSentAt + t.renewEveryMs;
  const capMs = Math.min(t.renewEveryMs, RETRY_CAP_MS);
  return lastTryAt + backoffMs({ baseMs: RETRY_BASE_MS, capMs, maxDoublings: 10 }, failures - 1);
}

/**
 * The longest store outage that stops no action of `killGraceMs`: the outage may begin just before a
 * renewal is due (renew_every after the last success), and once it ends the next try comes within
 * the retry cap; the action must still be renewed before termAt. 45 s at the defaults (task_ttl 60 s,
 * renew_every 3 s, task_margin 6 s, kill_grace 5 s).
 */
export function storeOutageBoundMs(t: ClaimTimings, killGraceMs: number): number {
  return Math.max(0, renewalSlackMs(t, killGraceMs) - Math.min(t.renewEveryMs, RETRY_CAP_MS));
}

/**
 * Why a worker stops an action it could not renew, in words: the store unreachable since the
 * first renewal that failed (`firstFailedAt`, null when none failed: the process itself was held
 * up), counted to `now`.
 */
export function unrenewedWords(now: number, lastOkSentAt: number, firstFailedAt: number | null): string {
  if (firstFailedAt === null)
    return `no renewal of the task lease was answered for ${formatDuration(now - lastOkSentAt)}`;
  return `the store was unreachable for ${formatDuration(now - firstFailedAt)}`;
}

/**
 * Time left between a renewal's send and termAt for its answer to come back: positive when the
 * relation renew_every + margin + kill_grace < ttl holds.
 */
export function renewalSlackMs(t: ClaimTimings, killGraceMs: number): number {
  return t.ttlMs - t.renewEveryMs - t.marginMs - killGraceMs;
}

/** Why an action's kill_grace breaks the relation, in words naming the keys; null when it holds. */
export function claimTimingProblem(t: ClaimTimings, killGraceMs: number): string | null {
  if (renewalSlackMs(t, killGraceMs) > 0) return null;
  const d = formatDuration;
  return (
    `${d(killGraceMs)} is too long for the task lease: lease.renew_every (${d(t.renewEveryMs)}) + ` +
    `lease.task_margin (${d(t.marginMs)}) + kill_grace must be shorter than lease.task_ttl (${d(t.ttlMs)}), so that ` +
    `a renewal can succeed before the worker must start stopping the action; shorten kill_grace, ` +
    `lease.renew_every or lease.task_margin, or lengthen lease.task_ttl`
  );
}
