/**
 * The loop the leader's schedule and trigger loops share (schedules.ts, after.ts): a round, then a
 * wait for as long as the round asked or until a change of the room's runs, until `signal` aborts or
 * the leader is deposed. A fenced write of a round refused (a Conflict: another leader's term) deposes
 * this one; any other throw is counted and the round tried again after `tickMs`.
 */
import type { Clock } from "../ports/clock.js";
import { isConflict } from "../ports/errors.js";
import type { Logger } from "../ports/logger.js";
import type { ChangeFeed } from "../ports/store.js";
import { Waker, wakeOnChange } from "./wake.js";

export async function runFencedRounds(
  deps: {
    clock: Clock;
    onStoreError?: (() => void) | undefined;
    /** Run changes of the room wake the loop; without it the loop looks every `tickMs`. */
    feed?: ChangeFeed;
  },
  o: {
    roomId: string;
    /** The least time between two rounds, and the wait after a failed one. */
    tickMs: number;
    /** The loop's name in its log lines ("schedule", "trigger"). */
    name: string;
  },
  log: Logger,
  signal: AbortSignal,
  deposed: () => void,
  /** One round; returns how long to wait before the next (unless woken), or null to stop. */
  round: () => Promise<number | null>,
): Promise<void> {
  const waker = new Waker(deps.clock, o.tickMs);
  const unsubscribe =
    deps.feed === undefined ? () => {} : wakeOnChange(deps.feed, waker, ["runs"], [o.roomId]);
  try {
    while (!signal.aborted) {
      const waitMs = await guarded();
      if (waitMs === null) return;
      await waker.wait(waitMs, signal);
    }
  } finally {
    unsubscribe();
  }

  async function guarded(): Promise<number | null> {
    try {
      return await round();
    } catch (err) {
      if (isConflict(err)) {
        log.info({ reason: err.message }, `deposed: a fenced ${o.name} write was rejected`);
        deposed();
        return null;
      }
      deps.onStoreError?.();
      log.warn({ err: String(err) }, `${o.name} round failed; trying again`);
      return o.tickMs;
    }
  }
}
