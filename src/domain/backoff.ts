/**
 * Exponential backoff, written once: a wait that doubles per failure from a base, stops doubling
 * after `maxDoublings`, never exceeds a cap, and is optionally spread by a random factor. Every
 * retrying loop (worker, leader, lease keeper, outbox, status cards, intake, sender, SQLite's busy
 * retries, store reconnects) and the task retry decision (task-retry.ts) read their wait from here.
 */

export interface Backoff {
  /** The wait at exponent 0. */
  readonly baseMs: number;
  /** No wait is longer (before jitter). */
  readonly capMs: number;
  /** The exponent stops growing here, so 2 ** n stays finite and exact. Default 30. */
  readonly maxDoublings?: number;
  /**
   * The capped wait is multiplied by a factor drawn from [low, high): several nodes that lost the
   * same server together do not all come back in step. Absent: no randomness, no rounding.
   */
  readonly jitter?: readonly [low: number, high: number];
}

const DEFAULT_MAX_DOUBLINGS = 30;

/**
 * The wait after `exponent` doublings (callers pass their failure count, or count minus one when
 * the first failure waits the base). `random` draws from [0, 1); it is only called when the policy
 * has jitter (and then required), and a jittered wait is rounded to whole ms.
 */
export function backoffMs(policy: Backoff, exponent: number, random?: () => number): number {
  const doublings = Math.min(Math.max(exponent, 0), policy.maxDoublings ?? DEFAULT_MAX_DOUBLINGS);
  const capped = Math.min(policy.capMs, policy.baseMs * 2 ** doublings);
  if (policy.jitter === undefined) return capped;
  // The domain draws no randomness of its own: the adapter that wants jitter passes Math.random.
  if (random === undefined) throw new TypeError("a jittered backoff needs a random source");
  const [low, high] = policy.jitter;
  return Math.round(capped * (low + random() * (high - low)));
}

/** The loops that retry a failed store call: 100 ms doubling, at most 5 s. */
export const STORE_CALL_BACKOFF: Backoff = { baseMs: 100, capMs: 5_000, maxDoublings: 6 };

/** The loops that send to the homeserver (outbox, status cards): 250 ms doubling, at most 30 s. */
export const CHAT_PASS_BACKOFF: Backoff = { baseMs: 250, capMs: 30_000, maxDoublings: 7 };

/** A task's retry wait doubles per failed attempt up to this ceiling (or its base, if that is larger). */
export const MAX_TASK_RETRY_BACKOFF_MS = 60 * 60 * 1000;
/** The doublings of a task's retry wait stop here. */
export const TASK_RETRY_MAX_DOUBLINGS = 30;

/**
 * How long a task waits before attempt `failedAttempt + 1`: its `retry_backoff` doubled per failed
 * attempt after the first. Both stores' finishes are given this wait as a value (decideFinish,
 * finishAnswers in task-states.ts); no store computes it again.
 */
export function taskRetryWaitMs(baseMs: number, failedAttempt: number): number {
  return backoffMs(
    {
      baseMs,
      capMs: Math.max(baseMs, MAX_TASK_RETRY_BACKOFF_MS),
      maxDoublings: TASK_RETRY_MAX_DOUBLINGS,
    },
    failedAttempt - 1,
  );
}
