/**
 * Opening a node's store until it works: a store that cannot be reached yet (PostgreSQL down,
 * restarting, refusing connections with "too many connections") is retried with capped, jittered
 * backoff and each failure is logged once with the next delay; a store that can never work as
 * configured (authentication failed, no such database, a schema newer than this dagbot, a SQLite
 * file that cannot be opened) is reported at once.
 */
import type { Logger } from "../ports/logger.js";
import type { Store } from "../ports/store.js";
import { backoffMs } from "../domain/backoff.js";

/** Node errno codes of a network that may come back. */
const TRANSIENT_ERRNO = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ECONNABORTED",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "EHOSTDOWN",
  "ENETUNREACH",
  "ENETDOWN",
  "EPIPE",
  "EAI_AGAIN",
]);

/**
 * SQLSTATEs of a server that may take us later: connection exceptions (class 08), insufficient
 * resources (class 53: too many connections, out of memory, disk full), operator intervention
 * (57P01 admin shutdown, 57P02 crash shutdown, 57P03 cannot connect now: starting up or in
 * recovery), serialization failures and deadlocks during the migration (40001, 40P01).
 */
function transientSqlState(code: string): boolean {
  return (
    code.startsWith("08") ||
    code.startsWith("53") ||
    code === "57P01" ||
    code === "57P02" ||
    code === "57P03" ||
    code === "40001" ||
    code === "40P01"
  );
}

/** Messages node-postgres gives a connection lost without a code. */
const LOST =
  /connection terminated|connection ended|terminating connection|timeout expired|server closed the connection/i;

/** Whether an error opening the store may go away by itself (retry) or needs a person (stop). */
export function isTransientStoreError(error: unknown): boolean {
  for (let e: unknown = error, depth = 0; e !== undefined && e !== null && depth < 8; depth += 1) {
    if (typeof e !== "object") break;
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string") {
      if (TRANSIENT_ERRNO.has(code)) return true;
      if (/^[0-9A-Z]{5}$/.test(code)) return transientSqlState(code);
    }
    const errors = (e as { errors?: unknown }).errors;
    // AggregateError (several addresses tried): transient when any attempt was.
    if (Array.isArray(errors) && errors.some((x) => isTransientStoreError(x))) return true;
    if (e instanceof Error && (e as { cause?: unknown }).cause === undefined && LOST.test(e.message))
      return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

export interface RetryTimings {
  /** The first wait (default 250 ms); each failure doubles it. */
  firstMs: number;
  /** The longest wait (default 15 s). */
  capMs: number;
}

export const DEFAULT_RETRY_TIMINGS: RetryTimings = { firstMs: 250, capMs: 15_000 };

/**
 * Calls `open` until it resolves; a transient failure is logged (attempt, error, the next delay)
 * and retried after a jittered delay (half to all of the doubled wait, capped). A permanent failure
 * rejects at once. Resolves with null when `stopped` resolves first (a signal during the wait).
 */
export async function openWithRetry(
  open: () => Promise<Store>,
  logger: Logger,
  describe: (error: unknown) => string,
  stopped: Promise<void>,
  timings: RetryTimings = DEFAULT_RETRY_TIMINGS,
): Promise<Store | null> {
  let stop = false;
  void stopped.then(() => {
    stop = true;
  });
  // Half to all of the doubled wait: nodes that lost the same store do not all come back in step.
  const policy = { baseMs: timings.firstMs, capMs: timings.capMs, jitter: [0.5, 1] as const };
  for (let attempt = 1; ; attempt += 1) {
    try {
      const store = await open();
      if (stop) {
        await store.close();
        return null;
      }
      if (attempt > 1) logger.info({ attempt }, "store reachable again");
      return store;
    } catch (error) {
      if (!isTransientStoreError(error)) throw error;
      const delayMs = backoffMs(policy, attempt - 1, Math.random);
      logger.warn(
        { attempt, retryInMs: delayMs, error: describe(error) },
        `cannot open the store (attempt ${attempt}); retrying in ${delayMs} ms`,
      );
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        stopped,
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, delayMs);
        }),
      ]);
      clearTimeout(timer);
      if (stop) return null;
    }
  }
}
