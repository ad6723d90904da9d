/**
 * Leadership of one room (docs/architecture.md §3): acquire the room's lease, renew it while leading, release
 * it on a graceful stop. While the lease is held, the leader work runs under an AbortSignal that is
 * aborted the moment leadership is in doubt: a renewal rejected (ConflictError), the leader work
 * reporting a fenced write rejected, or the TTL passing on this process's MONOTONIC clock since the
 * last renewal that succeeded (a paused process must not wake up believing it leads).
 */
import type { Clock } from "../ports/clock.js";
import type { Logger } from "../ports/logger.js";
import type { ChangeFeed, LeaderFence, LeaseStore, Session } from "../ports/store.js";
import { isConflict } from "../ports/errors.js";
import type { RenewFailure } from "./engine-observer.js";
import { Waker, unlessAborted, wakeOnChange, whenAborted } from "./wake.js";
import { STORE_CALL_BACKOFF, backoffMs } from "../domain/backoff.js";
import { leaseTerm, remainingMs, renewDelayMs, renewedTerm } from "../domain/lease-term.js";

export interface LeaseTimings {
  /** How long a lease lives after its last renewal, on the store's clock. */
  ttlMs: number;
  /** How often the leader renews; well under the TTL so one lost renewal is not a lost lease. */
  renewEveryMs: number;
  /**
   * How often a follower tries to take the lease when it does not know when the holder's lease
   * expires (a store error). A follower that knows waits for that expiry, or for the lease row to
   * change (a release, a new holder), whichever comes first.
   */
  acquireEveryMs: number;
}

export const DEFAULT_LEASE_TIMINGS: LeaseTimings = {
  ttlMs: 10_000,
  renewEveryMs: 3_000,
  acquireEveryMs: 1_000,
};

/** Why leading stopped: a graceful stop, a rejected fenced write, or no renewal within the TTL. */
export type LeadEnd = "stopping" | "deposed" | "expired";

/**
 * The work done while leading. It must stop soon after `signal` aborts and resolve when it has.
 * Calling `deposed()` reports a fenced write that was rejected: leadership ends at once.
 */
export type LeadWork = (fence: LeaderFence, signal: AbortSignal, deposed: () => void) => Promise<void>;

export interface LeaseKeeperDeps {
  store: LeaseStore & ChangeFeed;
  clock: Clock;
  logger: Logger;
  session: Session;
  roomId: string;
  timings: LeaseTimings;
  lead: LeadWork;
  /**
   * Renew on the grid of renewEvery multiples on the monotonic clock, which every keeper of the node
   * shares, so a node's renewals coincide and its lease batcher sends them as one statement.
   */
  alignRenewals?: boolean;
  /** Observes leadership changes (composition, tests, the `nodes` view of this process). */
  onChange?: (fence: LeaderFence | null, end?: LeadEnd) => void;
  /** Observes each failed renewal (metrics): rejected by the store as a conflict, or a store error. */
  onRenewFailure?: (why: RenewFailure) => void;
  /** Observes each store call of the keeper (acquire, renew, release) that failed other than as a conflict. */
  onStoreError?: () => void;
}

// Slack after the store says the lease expires before trying to take it, so the attempt does not
// arrive a hair early and lose to rounding.
const EXPIRY_SLACK_MS = 20;
export class LeaseKeeper {
  private readonly stopping = new AbortController();
  private readonly waker: Waker;
  private loop: Promise<void> | null = null;
  private current: LeaderFence | null = null;
  private readonly log: Logger;

  constructor(private readonly deps: LeaseKeeperDeps) {
    this.waker = new Waker(deps.clock, 0);
    this.log = deps.logger.child({ room: deps.roomId });
  }

  /** The fence while this node leads the room, else null. */
  get fence(): LeaderFence | null {
    return this.current;
  }

  start(): void {
    if (this.loop !== null) return;
    const unsubscribe = wakeOnChange(this.deps.store, this.waker, ["lease"], [this.deps.roomId]);
    this.loop = this.follow().finally(unsubscribe);
  }

  /** Stops the leader work, waits for it, then releases the lease so a follower takes over at once. */
  async stop(): Promise<void> {
    this.stopping.abort();
    await this.loop;
  }

  private async follow(): Promise<void> {
    const { store, clock, session, roomId, timings } = this.deps;
    let failures = 0;
    while (!this.stopping.signal.aborted) {
      const sentAt = clock.monotonicMs();
      let fence: LeaderFence;
      try {
        const acquired = await store.acquireLease(roomId, session, timings.ttlMs);
        fence = { roomId: acquired.roomId, session: acquired.session, term: acquired.term };
        failures = 0;
      } catch (err) {
        let delay = timings.acquireEveryMs;
        if (isConflict(err)) {
          delay = await this.untilExpiry(err.found);
        } else {
          failures += 1;
          this.deps.onStoreError?.();
          delay = backoffMs({ ...STORE_CALL_BACKOFF, baseMs: timings.acquireEveryMs }, failures);
          this.log.warn({ err: String(err), retryInMs: delay }, "lease acquire failed");
        }
        await this.waker.wait(delay, this.stopping.signal);
        continue;
      }
      if (this.stopping.signal.aborted) {
        await this.release(fence);
        break;
      }
      await this.leadWhileHeld(fence, sentAt);
    }
  }

  /**
   * How long a follower waits before its next attempt: until the holder's lease expires (the failed
   * acquire's answer says when, on the store's clock), at most one TTL in case a notification was
   * lost. A release or a new holder wakes it sooner (the "lease" change).
   */
  private async untilExpiry(found: Record<string, unknown> | null): Promise<number> {
    const { ttlMs } = this.deps.timings;
    let expiresAt = found?.expiresAt;
    let now = found?.now;
    let holder = found?.holder;
    if (typeof expiresAt !== "number" || typeof now !== "number") {
      try {
        const lease = await this.deps.store.getLease(this.deps.roomId);
        if (lease === null) return EXPIRY_SLACK_MS;
        ({ expiresAt, now } = lease);
        holder = lease.holder;
      } catch {
        return this.deps.timings.acquireEveryMs;
      }
    }
    if (holder === null || holder === undefined) return EXPIRY_SLACK_MS;
    const left = (expiresAt as number) - (now as number) + EXPIRY_SLACK_MS;
    return Math.max(EXPIRY_SLACK_MS, Math.min(ttlMs, left));
  }

  private async leadWhileHeld(fence: LeaderFence, acquireSentAt: number): Promise<void> {
    const { store, clock, timings } = this.deps;
    const leading = new AbortController();
    let end: LeadEnd | null = null;
    const finish = (why: LeadEnd): void => {
      leading.abort();
      if (end === null) {
        end = why;
        if (why !== "stopping") {
          // Leadership is gone now, not when the leader work has wound down: say so at once.
          this.current = null;
          this.log.warn({ term: fence.term, why }, "lost leadership");
          this.deps.onChange?.(null, why);
        }
      }
    };
    const onStop = (): void => finish("stopping");
    this.stopping.signal.addEventListener("abort", onStop, { once: true });

    // The lease expires ttl after the store executed our last write, which was no earlier than when
    // we sent it; counting from the send on our monotonic clock keeps the local deadline ahead of it.
    let term = leaseTerm(acquireSentAt, timings.ttlMs);
    this.current = fence;
    this.log.info({ term: fence.term }, "leading");
    this.deps.onChange?.(fence);

    const work = this.deps
      .lead(fence, leading.signal, () => finish("deposed"))
      .catch((err: unknown) => {
        this.log.error({ err: String(err), term: fence.term }, "leader work crashed");
      });

    const watchdog = (async () => {
      while (!leading.signal.aborted) {
        const left = remainingMs(term, clock.monotonicMs());
        if (left <= 0) return finish("expired");
        await clock.sleep(left, leading.signal);
      }
    })();

    let failures = 0;
    while (!leading.signal.aborted) {
      const grid = this.deps.alignRenewals === true ? clock.monotonicMs() : undefined;
      await clock.sleep(renewDelayMs(timings.renewEveryMs, failures, grid), leading.signal);
      if (leading.signal.aborted) break;
      const sentAt = clock.monotonicMs();
      try {
        // A hung store must not hold leadership open: the race ends when leading is aborted, and a
        // renewal that returns after that is ignored.
        const renewed = await unlessAborted(store.renewLease(fence, timings.ttlMs), leading.signal);
        if (renewed === undefined) break;
        term = renewedTerm(term, sentAt);
        failures = 0;
      } catch (err) {
        if (isConflict(err)) {
          this.deps.onRenewFailure?.("conflict");
          finish("deposed");
          break;
        }
        this.deps.onRenewFailure?.("error");
        this.deps.onStoreError?.();
        // The store is unreachable: keep trying; the watchdog ends leadership once the TTL has
        // passed locally, whatever the store says later.
        failures += 1;
        this.log.warn({ err: String(err), term: fence.term }, "lease renewal failed");
      }
    }

    await Promise.all([work, watchdog, whenAborted(leading.signal)]);
    this.stopping.signal.removeEventListener("abort", onStop);
    if ((end ?? "stopping") === "stopping") {
      await this.release(fence);
      this.current = null;
      this.log.info({ term: fence.term }, "released leadership");
      this.deps.onChange?.(null, "stopping");
    }
  }

  private async release(fence: LeaderFence): Promise<void> {
    try {
      await this.deps.store.releaseLease(fence);
    } catch (err) {
      // Conflict: it had already expired or been taken, which is what release wanted anyway.
      if (!isConflict(err)) {
        this.deps.onStoreError?.();
        this.log.warn({ err: String(err), term: fence.term }, "lease release failed");
      }
    }
  }
}
