/**
 * The worker of one node (docs/architecture.md §3, §4 step 4): claims queued tasks that fit its labels, actions
 * and free slots, runs each with the executor, renews the task's lease while it runs, and records
 * the end of the attempt with its fencing token. A renewal that is rejected means the task is no
 * longer ours: the action is killed and nothing is written. A renewal that reports `canceling` kills
 * the action and records `canceled`. Retries and backoff are decided by the store's finishTask.
 * While an action runs, its output so far is written to the store at most once per outputEveryMs
 * and only when it changed (none for an action that ends sooner), fenced by the same token.
 *
 * The worker fences itself (domain/claim-deadline.ts): it tracks each claim's deadlines on
 * its own monotonic clock from the send time of the last renewal that succeeded, renews the claim
 * just before starting the action unless the claim itself was sent less than `margin` ago, never
 * starts it past termAt, and when it could not renew in
 * time it stops the action (SIGTERM at termAt, SIGKILL at stopBy) and writes no outcome; once the
 * store answers again it hands the attempt back with its reason (releaseTask: "the store was
 * unreachable for 46s"), so the task runs again at once. The executor's supervisor holds the same
 * deadline, so it also holds while this process is stopped.
 *
 * Outputs (domain/outputs.ts): before the action starts, a task whose arguments say
 * `{tasks.ID.outputs.NAME}` gets its producers' published values put in (substituteOutputs); after
 * a successful exit, what the action wrote to DAGBOT_OUTPUT is checked against the task's declared
 * outputs (parseOutputFile), and a refusal fails the attempt with the reason as its error. The
 * values go to the store with the finish, which keeps them only with the success.
 *
 * A slot that frees while the last claim (fresh, see SELF_SERVE_MS) left fitting tasks behind is
 * handed straight to the next task: the finish and a claim of one task go in one commit
 * (finishAndClaim) instead of a finish and a claim of their own.
 */
import type { ClaimDeadlines, ClaimTimings } from "../domain/claim-deadline.js";
import {
  claimDeadlines,
  claimIsFresh,
  defaultMarginMs,
  mayStart,
  nextRenewalAt,
  unrenewedWords,
} from "../domain/claim-deadline.js";
import type { LeaseTerm } from "../domain/lease-term.js";
import { isExpired, leaseTerm, renewTimeoutMs, renewedTerm } from "../domain/lease-term.js";
import type { Clock } from "../ports/clock.js";
import type { ActionDefinition, ExecClaim, ExecResult, Executor } from "../ports/executor.js";
import type { Logger } from "../ports/logger.js";
import type {
  ChangeFeed,
  ClaimBatch,
  ClaimedTask,
  NodeOffer,
  Session,
  TaskClaimer,
  TaskResult,
  WorkerTaskReader,
  WorkerTaskView,
} from "../ports/store.js";
import { isConflict } from "../ports/errors.js";
import type { CommittedWrite } from "../ports/store.js";
import { madeClaimable, wakeFor } from "../ports/store.js";
import { OutputWriter } from "./output-writer.js";
import { endWait, Waker } from "./wake.js";
import { SELF_SERVE_MS } from "./wake-targets.js";
import { STORE_CALL_BACKOFF, backoffMs } from "../domain/backoff.js";
import type { RunArgValue } from "../domain/action-argv.js";
import { parseInstanceId } from "../domain/matrix.js";
import type { ProducerOutputs } from "../domain/outputs.js";
import { outputReferences, oversizeProblem, parseOutputFile, substituteOutputs } from "../domain/outputs.js";

export interface WorkerSettings {
  session: Session;
  roomIds: string[];
  labels: string[];
  /** How many tasks this node runs at once. */
  capacity: number;
  /** The actions of this node's config; only these are claimed. */
  actions: ReadonlyMap<string, ActionDefinition>;
  /** The task lease (lease.ttl). */
  taskLeaseMs: number;
  /** How often a running task's lease is renewed (lease.renew_every); default a third of the lease. */
  renewEveryMs?: number;
  /** Kept between an action's end and the earliest its lease could expire (lease.margin); default a tenth. */
  marginMs?: number;
  /**
   * The slow safety tick: a claim attempt even with no wake-up, for a wake lost with a dropped
   * connection. Work arrives by targeted wake-ups from the leader, a freed slot while fitting tasks
   * were left, and the claim's own word on when the next waiting task becomes ready.
   */
  pollMs: number;
  debounceMs: number;
  /** How often a running action's output so far is written to the store, when it changed; default 1 s. */
  outputEveryMs?: number;
}

export interface WorkerDeps {
  store: TaskClaimer & ChangeFeed & WorkerTaskReader;
  executor: Executor;
  clock: Clock;
  logger: Logger;
  /** Observes each failed claim, task lease renewal or finish that was not a conflict (metrics). */
  onStoreError?: () => void;
}

/** Why a running action was aborted; null while nobody asked. */
type AbortReason = "canceled" | "lost" | "shutdown";

interface Running {
  claimed: ClaimedTask;
  /** When the claim was sent, on the monotonic clock: the lease runs from no earlier than this. */
  claimSentAt: number;
  controller: AbortController;
  reason: AbortReason | null;
  done: Promise<void>;
  /**
   * Its action has ended (or never started) and its finish does not claim for its slot itself
   * (finishAndClaim): only its outcome is still being recorded, and a claim joined to a commit may
   * count its slot as free.
   */
  ended: boolean;
}

/** After a waiting task's not_before, so the claim does not arrive a hair early. */
const NOT_BEFORE_SLACK_MS = 20;

/**
 * Why a claim was sent: the first one at start, a slot freed while the last claim left more
 * (self), a finishing task handing its slot on in the same commit as its finish (finish), a wake
 * naming this node (wake) or everyone (wakeAll), a waiting task's not_before (notBefore), the
 * safety tick (tick), a wake already answered by the claim in flight (spurious).
 */
export type ClaimCause =
  "start" | "self" | "finish" | "commit" | "wake" | "wakeAll" | "notBefore" | "tick" | "spurious";

/** A wake answered later than this is counted as late (the leader's WAKE_HOLD_MS). */
const LATE_WAKE_MS = 300;

export class Worker {
  private readonly stopClaiming = new AbortController();
  private readonly waker: Waker;
  private readonly running = new Map<string, Running>();
  private loop: Promise<void> | null = null;
  private unsubscribe: (() => void) | null = null;
  private readonly log: Logger;
  /** The last claim left fitting tasks behind: a freed slot should claim again at once. */
  private more = false;
  /** When the claim that left more was answered (monotonic). */
  private moreAt = 0;
  /**
   * When the soonest waiting task that fits this node becomes ready (monotonic, with slack), as the
   * last claim said; null when none waits. The claim loop sleeps no longer than this.
   */
  private readyAt: number | null = null;
  /** Cuts the claim loop's sleep so it plans it again: a finish learned of an earlier readyAt. */
  private replan: AbortController | null = null;
  /**
   * How many tasks the wakes since the last claim asked this node to take: 0 when none came, null
   * for "any" (an unnamed wake). A claim the leader's wake caused takes no more than that.
   */
  private wokenFor: number | null = 0;
  /** A slot freed while the last claim left more: this claim serves the node itself, up to its free slots. */
  private selfServe = true;
  /** When the first wake since the last claim arrived (monotonic), for the wake-to-claim delay. */
  private wokenAt: number | null = null;
  /** The claim loop waits (idle): no claim of its own is on its way. */
  private waiting = false;
  /** Slots a claim joined to a commit (joinCommit) asked for; taken until it is answered. */
  private joinedFor = 0;
  /** That claim, until its tasks have started (stop() waits for it). */
  private joined: Promise<void> = Promise.resolve();
  /**
   * Claim statements sent, those that took nothing, tasks claimed, and of the statements those
   * the safety tick sent (not a wake-up) and how many of them took nothing; and per cause of the
   * claim, the same three (the scale bench reads them to tell why claims come back empty).
   */
  readonly claims = {
    statements: 0,
    empty: 0,
    tasks: 0,
    tick: 0,
    tickEmpty: 0,
    byCause: {} as Record<ClaimCause, { statements: number; empty: number; tasks: number }>,
    /** Empty claims a wake caused that were sent more than LATE_WAKE_MS after the wake arrived. */
    lateWakeEmpty: 0,
    /** The longest wake-to-claim delay seen, ms. */
    maxWakeDelayMs: 0,
  };

  constructor(
    private readonly settings: WorkerSettings,
    private readonly deps: WorkerDeps,
  ) {
    this.waker = new Waker(deps.clock, settings.debounceMs);
    this.log = deps.logger;
  }

  /** Tasks this worker is running now. */
  /** The tasks running now, and for how long (monotonic): what a graceful stop waits for. */
  runningTasks(): Array<{ runId: string; taskId: string; action: string; runningMs: number }> {
    const now = this.deps.clock.monotonicMs();
    return [...this.running.values()].map((r) => ({
      runId: r.claimed.task.runId,
      taskId: r.claimed.task.taskId,
      action: r.claimed.task.action,
      runningMs: Math.max(0, now - r.claimSentAt),
    }));
  }

  get runningCount(): number {
    return this.running.size;
  }

  start(): void {
    if (this.loop !== null) return;
    const feed = this.deps.store;
    const me = this.settings.session.nodeId;
    const rooms = this.settings.roomIds;
    // Only a wake meant for this node (or for everyone: a reconnect, a feed that cannot name nodes),
    // for as many tasks as it names (any number when it names none).
    const unsubTasks = feed.onChange(
      (topic, roomId, targets) => {
        if (topic !== "wake" || (roomId !== null && !rooms.includes(roomId))) return;
        const asked = targets === undefined ? { take: null } : wakeFor(me, targets);
        if (asked === null) return;
        this.wokenFor = asked.take === null || this.wokenFor === null ? null : this.wokenFor + asked.take;
        this.wokenAt ??= this.deps.clock.monotonicMs();
        // The leader named this node: it already waited for the burst to settle, claim at once.
        this.waker.wake(targets !== undefined);
      },
      ["wake"],
    );
    // A cancel moves the run first; look at our running tasks then rather than at the next renewal.
    const unsubRuns = feed.onChange(
      (topic, roomId) => {
        if (topic !== "runs" || (roomId !== null && !this.settings.roomIds.includes(roomId))) return;
        void this.checkCanceling();
      },
      ["runs"],
    );
    const leaveCommits = feed.joinCommits?.((writes) => this.joinCommit(writes));
    this.unsubscribe = () => {
      unsubTasks();
      unsubRuns();
      leaveCommits?.();
    };
    this.loop = this.claimLoop();
  }

  /**
   * Stops claiming. With `abortRunning`, kills running actions and writes nothing for them (their
   * leases expire and the leader's reaper hands them to another node); otherwise waits for them to
   * finish and records their outcome. Calling it again with abortRunning escalates a drain.
   */
  async stop(options: { abortRunning?: boolean } = {}): Promise<void> {
    this.stopClaiming.abort();
    if (options.abortRunning === true) {
      for (const r of this.running.values()) this.abortTask(r, "shutdown");
    }
    await this.loop;
    // A claim joined to a commit before the stop: its tasks start (and then end) like the others.
    await this.joined;
    while (this.running.size > 0) await Promise.all([...this.running.values()].map((r) => r.done));
    this.unsubscribe?.();
  }

  private offer(): NodeOffer {
    const s = this.settings;
    return {
      session: s.session,
      roomIds: s.roomIds,
      labels: s.labels,
      actions: [...s.actions.keys()],
      leaseMs: s.taskLeaseMs,
    };
  }

  private async claimLoop(): Promise<void> {
    const signal = this.stopClaiming.signal;
    let failures = 0;
    let byTick = false;
    let cause: ClaimCause = "start";
    while (!signal.aborted) {
      const free = this.settings.capacity - this.running.size - this.joinedFor;
      if (free > 0) {
        try {
          const sentAt = this.deps.clock.monotonicMs();
          // One statement for up to every free slot, or as many as the leader's wake asked for.
          const any = this.selfServe || byTick || this.wokenFor === null || this.wokenFor === 0;
          const max = any ? free : Math.min(free, this.wokenFor ?? free);
          if (cause !== "start" && cause !== "tick" && cause !== "notBefore")
            cause = this.selfServe
              ? "self"
              : this.wokenFor === null
                ? "wakeAll"
                : this.wokenFor > 0
                  ? "wake"
                  : "spurious";
          const wakeDelay = this.wokenAt === null ? 0 : sentAt - this.wokenAt;
          this.wokenFor = 0;
          this.wokenAt = null;
          this.selfServe = false;
          const batch = await this.deps.store.claimTasks(this.offer(), max);
          this.count(cause, batch.claimed.length, byTick, wakeDelay);
          // Claimed while stopping: run them anyway rather than strand them until their leases expire.
          for (const claimed of batch.claimed) this.startTask(claimed, sentAt);
          this.heard(batch);
          failures = 0;
        } catch (err) {
          if (!isConflict(err)) {
            failures += 1;
            this.deps.onStoreError?.();
            const delay = backoffMs(STORE_CALL_BACKOFF, failures);
            this.log.warn({ err: String(err), retryInMs: delay }, "claim failed");
            await this.deps.clock.sleep(delay, signal);
          }
          continue;
        }
      }
      this.waiting = true;
      try {
        cause = await this.idle(signal);
      } finally {
        this.waiting = false;
      }
      byTick = cause !== "wake";
    }
    const c = this.claims;
    this.log.info(
      {
        claimStatements: c.statements,
        emptyClaims: c.empty,
        claimedTasks: c.tasks,
        tickClaims: c.tick,
        tickEmptyClaims: c.tickEmpty,
        byCause: c.byCause,
        lateWakeEmpty: c.lateWakeEmpty,
        maxWakeDelayMs: c.maxWakeDelayMs,
      },
      "worker stopped claiming",
    );
  }

  /**
   * Inside a commit of this process (SQLite, Store.joinCommits) that queued tasks of this node's
   * rooms: one claim for the free slots joins it, so the tasks a scheduling step queues are claimed
   * in the step's own commit (docs/architecture.md §8, "One commit a step"). Only while the claim
   * loop waits and no joined claim is on its way, so no slot is asked for twice; its tasks start
   * once the commit is durable, as a claim's always do.
   */
  private joinCommit(writes: readonly CommittedWrite[]): void {
    if (this.stopClaiming.signal.aborted || !this.waiting || this.joinedFor > 0) return;
    const rooms = this.settings.roomIds;
    if (!writes.some((w) => rooms.some((room) => madeClaimable(w, room)))) return;
    // A slot whose action has ended holds no process: its finish is most likely in this very
    // commit (the one whose step queued what this claims), so the chain's next task takes it.
    let acting = 0;
    for (const r of this.running.values()) if (!r.ended) acting += 1;
    const free = this.settings.capacity - acting;
    if (free <= 0) return;
    const sentAt = this.deps.clock.monotonicMs();
    this.joinedFor = free;
    this.joined = this.deps.store.claimTasks(this.offer(), free).then(
      (batch) => {
        this.joinedFor = 0;
        this.count("commit", batch.claimed.length, false, 0);
        // Claimed while stopping (stop() came during the commit): run them, as the claim loop does.
        for (const claimed of batch.claimed) this.startTask(claimed, sentAt);
        this.heardBesideLoop(batch);
      },
      (err: unknown) => {
        this.joinedFor = 0;
        if (isConflict(err)) return;
        this.deps.onStoreError?.();
        this.log.warn({ err: String(err) }, "a claim joined to a commit failed");
        this.waker.wake();
      },
    );
  }

  /**
   * The answer of a claim made beside the claim loop (a finish's, or one joined to a commit), once
   * its tasks started: what it says of the tasks left. A task that becomes ready sooner than the
   * loop planned for makes it plan its wait again; "more" while slots are free makes it fill them at
   * once (the leader then leaves this node to serve itself: planWake counts its free slots as taken).
   */
  private heardBesideLoop(batch: ClaimBatch): void {
    const planned = this.readyAt;
    this.heard(batch);
    if (this.readyAt !== null && (planned === null || this.readyAt < planned)) endWait(this.replan);
    if (batch.more && this.settings.capacity - this.running.size > 0 && !this.stopClaiming.signal.aborted) {
      this.selfServe = true;
      this.waker.wake();
    }
  }

  /** What a claim's answer says of the tasks left for this node. */
  private heard(batch: ClaimBatch): void {
    const now = this.deps.clock.monotonicMs();
    this.more = batch.more;
    this.moreAt = now;
    this.readyAt = batch.nextReadyInMs === null ? null : now + batch.nextReadyInMs + NOT_BEFORE_SLACK_MS;
  }

  /**
   * The claim loop's wait: until a wake, the safety tick, or readyAt, whichever comes first; says
   * which. A finish that learns of an earlier readyAt cuts the sleep, and the wait is planned again
   * (no claim for that alone).
   */
  private async idle(signal: AbortSignal): Promise<"wake" | "notBefore" | "tick"> {
    const { clock } = this.deps;
    const tickAt = clock.monotonicMs() + this.settings.pollMs;
    for (;;) {
      const until = this.readyAt === null ? tickAt : Math.min(tickAt, this.readyAt);
      const replan = new AbortController();
      const onStop = (): void => endWait(replan);
      if (signal.aborted) endWait(replan);
      signal.addEventListener("abort", onStop, { once: true });
      this.replan = replan;
      let woken: boolean;
      try {
        woken = await this.waker.wait(Math.max(0, until - clock.monotonicMs()), replan.signal);
      } finally {
        this.replan = null;
        signal.removeEventListener("abort", onStop);
      }
      if (woken) return "wake";
      if (signal.aborted || clock.monotonicMs() >= until) {
        if (until === tickAt) return "tick";
        this.readyAt = null; // this claim asks for it; its answer says what waits next
        return "notBefore";
      }
    }
  }

  private count(cause: ClaimCause, took: number, byTick: boolean, wakeDelayMs: number): void {
    const c = this.claims;
    c.statements += 1;
    c.tasks += took;
    if (took === 0) c.empty += 1;
    if (byTick) c.tick += 1;
    if (byTick && took === 0) c.tickEmpty += 1;
    const k = (c.byCause[cause] ??= { statements: 0, empty: 0, tasks: 0 });
    k.statements += 1;
    k.tasks += took;
    if (took === 0) k.empty += 1;
    if (cause === "wake" || cause === "wakeAll") {
      c.maxWakeDelayMs = Math.max(c.maxWakeDelayMs, Math.round(wakeDelayMs));
      if (took === 0 && wakeDelayMs > LATE_WAKE_MS) c.lateWakeEmpty += 1;
    }
  }

  private startTask(claimed: ClaimedTask, claimSentAt: number): void {
    const key = runningKey(claimed);
    const entry: Running = {
      claimed,
      claimSentAt,
      controller: new AbortController(),
      reason: null,
      done: Promise.resolve(),
      ended: false,
    };
    this.running.set(key, entry);
    entry.done = this.execute(entry)
      .catch((err: unknown) => {
        this.log.error(
          { err: String(err), run: claimed.task.runId, task: claimed.task.taskId },
          "task crashed",
        );
      })
      .finally(() => {
        // Already gone when its finish handed the slot to the next task (handOver); a later claim
        // of the same task (its retry) has an entry of its own under the same key.
        if (this.running.get(key) !== entry) return;
        this.running.delete(key);
        // A freed slot is a reason to claim again now, if the last claim left fitting tasks behind
        // and said so recently; otherwise the leader wakes the nodes it wants when it queues more.
        if (this.moreIsFresh()) {
          this.selfServe = true;
          this.waker.wake();
        }
      });
  }

  /**
   * Whether the last claim left fitting tasks behind and said so recently. An older "more" is
   * stale: other nodes have claimed since (20 nodes whose flags were all set by a deep queue each
   * sent an empty claim per freed slot: 142 of the 240 empty claims of the scale bench's 500 tasks
   * at 20 nodes), and the leader stops counting on this node serving itself after the same
   * SELF_SERVE_MS, so it wakes nodes for what is left.
   */
  private moreIsFresh(): boolean {
    return this.more && this.deps.clock.monotonicMs() - this.moreAt < SELF_SERVE_MS;
  }

  /**
   * The finished task's slot goes to the task its finish claimed: the old entry leaves `running` in
   * the same step as the new one enters, so the count never exceeds capacity (not even for the
   * gauge) and the claim loop, which counted the old entry when it sized its own claim, cannot
   * have given the slot away too.
   */
  private handOver(from: Running, to: readonly ClaimedTask[], claimSentAt: number): void {
    if (to.length === 0) return; // the slot frees as usual when the attempt's promise settles
    const key = runningKey(from.claimed);
    if (this.running.get(key) === from) this.running.delete(key);
    for (const claimed of to) this.startTask(claimed, claimSentAt);
  }

  private abortTask(r: Running, reason: AbortReason): void {
    if (r.reason === null) r.reason = reason;
    r.controller.abort();
  }

  private async checkCanceling(): Promise<void> {
    for (const r of [...this.running.values()]) {
      if (r.reason !== null) continue;
      try {
        const t = await this.deps.store.getTask(r.claimed.token.runId, r.claimed.token.taskId);
        // The cancel raised the version; the attempt and executor say it is still our claim.
        const ours =
          t?.executor?.bootId === r.claimed.token.session.bootId &&
          t.executor.nodeId === r.claimed.token.session.nodeId &&
          t.attempt === r.claimed.task.attempt;
        if (t?.status === "canceling" && ours) this.abortTask(r, "canceled");
      } catch {
        // The renewal loop will see it.
      }
    }
  }

  private timings(): ClaimTimings {
    const ttlMs = this.settings.taskLeaseMs;
    return {
      ttlMs,
      renewEveryMs: this.settings.renewEveryMs ?? ttlMs / 3,
      marginMs: this.settings.marginMs ?? defaultMarginMs(ttlMs),
    };
  }

  /**
   * A task's `timeout` is also a store deadline, counted from the claim: past it the leader's reaper
   * requeues the task for its next attempt. Stop the action margin + kill_grace before it, counted
   * from the claim's send time, so the old attempt is gone before a new one could start.
   */
  private localTimeoutMs(r: Running, timeoutMs: number, killGraceMs: number): number {
    const stopBy = r.claimSentAt + timeoutMs - this.timings().marginMs;
    return Math.max(0, stopBy - killGraceMs - this.deps.clock.monotonicMs());
  }

  private async execute(r: Running): Promise<void> {
    const { token, task } = r.claimed;
    const { clock, executor, store } = this.deps;
    const log = this.log.child({ run: task.runId, task: task.taskId, attempt: task.attempt });
    log.debug({ action: task.action }, "claimed");

    const action = this.settings.actions.get(task.action);
    const timings = this.timings();
    const leaseMs = timings.ttlMs;
    const killGraceMs = action?.killGraceMs ?? 0;
    // The claim, then the last renewal that succeeded: every deadline counts from its send time.
    let term = leaseTerm(r.claimSentAt, leaseMs);
    const deadlines = (): ClaimDeadlines => claimDeadlines(term.sentAt, timings, killGraceMs);
    const moved = new Set<() => void>();
    const claim: ExecClaim = {
      msLeft: () => deadlines().stopBy - clock.monotonicMs(),
      onMove(listener) {
        moved.add(listener);
        return () => moved.delete(listener);
      },
    };

    // When the first renewal that failed since the last success was sent: the store unreachable since.
    let firstFailedAt: number | null = null;
    // Why this worker stopped the action for want of a renewal, once it did (then it releases the task).
    let stoppedWhy: string | null = null;
    /**
     * One fenced renewal, given up when termAt (or renew_every) passes first (a hung store must not
     * keep a claim we may have lost). "ok" moves the deadlines; "lost" means the store gave the task
     * to someone else.
     */
    const renew = async (stop: AbortSignal): Promise<"ok" | "lost" | "failed"> => {
      const sentAt = clock.monotonicMs();
      const giveUp = new AbortController();
      const onStop = (): void => endWait(giveUp);
      stop.addEventListener("abort", onStop, { once: true });
      try {
        const renewed = await Promise.race([
          store.renewTaskLease(token, leaseMs),
          // Given up at termAt, and after renew_every at most: a renewal hung on a connection
          // the outage broke must not keep the next try from reaching the store once it is back.
          clock
            .sleep(
              Math.min(renewTimeoutMs(term, sentAt, timings.marginMs + killGraceMs), timings.renewEveryMs),
              giveUp.signal,
            )
            .then(() => null),
        ]);
        if (renewed === null) {
          firstFailedAt ??= sentAt;
          return "failed";
        }
        term = renewedTerm(term, sentAt);
        if (firstFailedAt !== null)
          log.info(
            { unreachableMs: sentAt - firstFailedAt },
            "task lease renewed again after the store was back",
          );
        firstFailedAt = null;
        for (const listener of moved) listener();
        if (renewed.status === "canceling") this.abortTask(r, "canceled");
        return "ok";
      } catch (err) {
        if (isConflict(err)) return "lost";
        firstFailedAt ??= sentAt;
        this.deps.onStoreError?.();
        log.warn({ err: String(err) }, "task lease renewal failed");
        return "failed";
      } finally {
        endWait(giveUp);
        stop.removeEventListener("abort", onStop);
      }
    };

    const renewing = new AbortController();
    let exec: ExecResult | null = null;
    if (action === undefined) {
      // claimTask only offers our actions; a config reloaded under a running node could still differ.
      exec = failedToStart(`action "${task.action}" is not defined on node ${token.session.nodeId}`);
    } else {
      // A claim answered within `margin` of its send starts at once: a renewal now would fence no
      // better, and would cost every task a commit. An older claim (this process paused,
      // a slow store) is checked again just before starting. A cancel that comes after the claim is
      // heard through the change feed (checkCanceling) or at the first renewal.
      const fresh =
        claimIsFresh(clock.monotonicMs(), r.claimSentAt, timings) &&
        mayStart(clock.monotonicMs(), deadlines());
      for (let failures = 0; !fresh && exec === null && r.reason === null; failures += 1) {
        if (!mayStart(clock.monotonicMs(), deadlines())) {
          log.warn("the claim's deadline passed before the action could start; not starting it");
          this.abortTask(r, "lost");
          break;
        }
        const checked = await renew(renewing.signal);
        if (checked === "lost") {
          log.info("task lease lost before the action started; writing nothing");
          this.abortTask(r, "lost");
        } else if (checked === "ok" && mayStart(clock.monotonicMs(), deadlines())) {
          break;
        } else if (checked === "failed") {
          await clock.sleep(
            backoffMs({ ...STORE_CALL_BACKOFF, capMs: timings.renewEveryMs }, failures),
            r.controller.signal,
          );
        }
      }
      if (r.reason === "canceled") exec = canceledBeforeStart();
    }

    const renewer =
      exec === null && r.reason === null
        ? (async () => {
            let failures = 0;
            let lastTryAt = term.sentAt;
            while (!renewing.signal.aborted) {
              const now = clock.monotonicMs();
              const { termAt } = deadlines();
              if (now >= termAt) {
                // No renewal in time: stop the action so it is gone before the lease could expire.
                const why = unrenewedWords(now, term.sentAt, firstFailedAt);
                stoppedWhy = why;
                log.warn(
                  { why, lastRenewedMsAgo: now - term.sentAt },
                  `${why}: stopping the action before its task lease could expire, writing nothing`,
                );
                this.abortTask(r, "lost");
                return;
              }
              const next = nextRenewalAt(term.sentAt, lastTryAt, failures, timings);
              await clock.sleep(Math.max(0, Math.min(next, termAt) - now), renewing.signal);
              if (renewing.signal.aborted) return;
              if (clock.monotonicMs() < next) continue; // termAt came first: the loop's top decides
              lastTryAt = clock.monotonicMs();
              const outcome = await renew(renewing.signal);
              if (outcome === "lost") {
                log.info("task lease lost; killing the action and writing nothing");
                this.abortTask(r, "lost");
                return;
              }
              failures = outcome === "ok" ? 0 : failures + 1;
            }
          })()
        : Promise.resolve();

    let args: Readonly<Record<string, RunArgValue>> = task.args;
    if (exec === null && r.reason === null && action !== undefined) {
      const put = await this.withOutputs(r, log);
      if (put.ok) args = put.args;
      else exec = failedToStart(put.message);
    }

    if (exec === null && r.reason === null && action !== undefined) {
      const output = new OutputWriter(
        (soFar) => store.writeTaskOutput(token, soFar.output, soFar.totalBytes),
        log,
      );
      exec = await executor.run({
        action,
        args,
        env: { DAGBOT_RUN_ID: task.runId, DAGBOT_TASK_ID: task.taskId, DAGBOT_ATTEMPT: task.attempt },
        ...(task.timeoutMs !== null
          ? { timeoutMs: this.localTimeoutMs(r, task.timeoutMs, killGraceMs) }
          : {}),
        signal: r.controller.signal,
        claim,
        onOutput: (soFar) => output.offer(soFar),
        outputEveryMs: this.settings.outputEveryMs ?? 1_000,
        publishes: task.outputPatterns !== null && Object.keys(task.outputPatterns).length > 0,
      });
      await output.close();
      // The supervisor stopped it (or never started it) for the claim's deadline: no longer ours.
      if (exec.outcome === "expired" && r.reason === null) {
        r.reason = "lost";
        stoppedWhy = unrenewedWords(clock.monotonicMs(), term.sentAt, firstFailedAt);
      }
    }
    endWait(renewing);
    await renewer;

    if (r.reason === "lost" && stoppedWhy !== null) {
      // The action has ended: say why in the task's record, and let it run again now rather than
      // when the lease expires (the reaper's words would be "lost").
      await this.release(r, stoppedWhy, log);
      return;
    }
    if (r.reason === "lost" || r.reason === "shutdown" || exec === null) {
      log.info({ why: r.reason }, "attempt abandoned; the lease will expire and the leader requeues it");
      return;
    }
    const result = withPublished(toTaskResult(exec, r.reason), exec, r.claimed);
    if (result.outcome === "failed" && exec.outcome === "succeeded")
      log.info({ error: result.error }, "the action succeeded but its outputs were refused");
    r.ended = true;
    await this.finish(r, result, log, () => term, renew, timings);
  }

  /**
   * Gives up an attempt whose action was stopped for want of a renewal (its process group gone),
   * with the words why, once the store answers: store.releaseTask, tried again with backoff until it
   * is answered or the node stops. A conflict means the reaper (the lease expired while the store
   * was away: its words are "lost") or a cancel came first.
   */
  private async release(r: Running, why: string, log: Logger): Promise<void> {
    const { clock, store } = this.deps;
    for (let failures = 0; !this.stopClaiming.signal.aborted; failures += 1) {
      try {
        // Given up after renew_every, as a renewal is: a call hung on a broken connection must not
        // keep the next try from reaching the store once it is back.
        const giveUp = new AbortController();
        const released = await Promise.race([
          store.releaseTask(r.claimed.token, why),
          clock
            .sleep(this.timings().renewEveryMs, AbortSignal.any([giveUp.signal, this.stopClaiming.signal]))
            .then(() => null),
        ]).finally(() => endWait(giveUp));
        if (released !== null) {
          log.info({ why, status: released.status }, "released the stopped attempt");
          return;
        }
        continue;
      } catch (err) {
        if (isConflict(err)) {
          log.info({ why }, "the stopped attempt was taken over already");
          return;
        }
        this.deps.onStoreError?.();
        await clock.sleep(
          backoffMs({ ...STORE_CALL_BACKOFF, capMs: Math.min(1_000, this.timings().renewEveryMs) }, failures),
          this.stopClaiming.signal,
        );
      }
    }
    log.info({ why }, "attempt abandoned; the lease will expire and the leader requeues it");
  }

  /**
   * The task's arguments with the outputs they refer to put in: each producer (an ancestor, so it
   * has succeeded) read once from the store, a read that fails tried again a few times.
   */
  private async withOutputs(
    r: Running,
    log: Logger,
  ): Promise<{ ok: true; args: Readonly<Record<string, RunArgValue>> } | { ok: false; message: string }> {
    const { task } = r.claimed;
    const producers = new Set<string>();
    for (const value of Object.values(task.args))
      if (typeof value === "string") for (const ref of outputReferences(value)) producers.add(ref.taskId);
    if (producers.size === 0) return { ok: true, args: task.args };
    const found = new Map<string, ProducerOutputs>();
    for (const id of producers) {
      for (let failures = 0; ; failures += 1) {
        try {
          const t = await this.deps.store.getTask(task.runId, id);
          if (t !== null) found.set(id, { declared: t.outputPatterns ?? {}, values: t.outputValues });
          // No row: a fan-out, replaced by its instances (docs/architecture.md §6, "Fan-out"); the
          // argument gets their values in item order (none when the list was empty).
          else found.set(id, fanOutOutputs(id, await this.deps.store.listTasks(task.runId)));
          break;
        } catch (err) {
          this.deps.onStoreError?.();
          if (failures >= 2 || r.controller.signal.aborted)
            return { ok: false, message: `could not read the outputs of task ${id}: ${String(err)}` };
          log.warn({ err: String(err), producer: id }, "reading a producer's outputs failed");
          await this.deps.clock.sleep(backoffMs(STORE_CALL_BACKOFF, failures), r.controller.signal);
        }
      }
    }
    return substituteOutputs(task.taskId, task.args, found);
  }

  /**
   * Records the attempt's end: finishAndClaim or finishTask, tried again with backoff while the
   * store fails. The task's lease is kept renewed (`renew`, on the running action's schedule,
   * nextRenewalAt) for as long as the
   * finish is being sent, so a finish that a slow or failing store answers late is not overtaken by
   * the reaper running the ended action again (docs/architecture.md §3, "Task lease"). The renewals
   * stop once the store has failed the finish for FINISH_KEEP_LEASES leases in a row: then the lease
   * runs out, as before, and the worker gives up.
   */
  private async finish(
    r: Running,
    result: TaskResult,
    log: Logger,
    term: () => LeaseTerm,
    renew: (stop: AbortSignal) => Promise<"ok" | "lost" | "failed">,
    timings: ClaimTimings,
  ): Promise<void> {
    const { clock } = this.deps;
    const keeping = new AbortController();
    const endedAt = clock.monotonicMs();
    const keeper = (async () => {
      for (let failures = 0, lastTryAt = endedAt; !keeping.signal.aborted;) {
        const next = nextRenewalAt(term().sentAt, lastTryAt, failures, timings);
        await clock.sleep(Math.max(0, next - clock.monotonicMs()), keeping.signal);
        if (keeping.signal.aborted) return;
        if (clock.monotonicMs() - endedAt > FINISH_KEEP_LEASES * term().ttlMs) return;
        lastTryAt = clock.monotonicMs();
        const kept = await renew(keeping.signal);
        if (kept === "lost") return;
        failures = kept === "ok" ? 0 : failures + 1;
      }
    })();
    try {
      await this.sendFinish(r, result, log, term);
    } finally {
      endWait(keeping);
      await keeper;
    }
  }

  /**
   * Records the outcome, retrying store failures while our lease can still be valid. While the
   * worker claims and its last claim left fitting tasks behind (recently), the first try also
   * claims ONE task in the same commit, for this slot: never more, since the claim loop may be
   * claiming for the other free slots at the same time (it counts this one as taken). A retry
   * after a store error only finishes; the freed slot then claims as usual.
   */
  private async sendFinish(
    r: Running,
    result: TaskResult,
    log: Logger,
    term: () => LeaseTerm,
  ): Promise<void> {
    const { clock, store } = this.deps;
    for (let failures = 0; ; failures += 1) {
      try {
        if (failures === 0 && !this.stopClaiming.signal.aborted && this.moreIsFresh()) {
          const sentAt = clock.monotonicMs();
          // Its slot goes to what this finish claims, not to a claim joined to the commit.
          r.ended = false;
          const { status, batch } = await store.finishAndClaim(r.claimed.token, result, this.offer(), 1);
          log.info({ outcome: result.outcome, status, exitCode: result.exitCode }, "finished");
          this.count("finish", batch.claimed.length, false, 0);
          // Claimed while stopping (stop() came during the call): run it, as the claim loop does.
          this.handOver(r, batch.claimed, sentAt);
          this.heardBesideLoop(batch);
          return;
        }
        const { status } = await store.finishTask(r.claimed.token, result);
        log.info({ outcome: result.outcome, status, exitCode: result.exitCode }, "finished");
        return;
      } catch (err) {
        if (isConflict(err)) {
          log.info({ reason: err.message }, "finish rejected: the task moved on without us");
          return;
        }
        this.deps.onStoreError?.();
        if (isExpired(term(), clock.monotonicMs())) {
          log.warn({ err: String(err) }, "could not record the outcome before the lease passed; giving up");
          return;
        }
        const delay = backoffMs(STORE_CALL_BACKOFF, failures);
        log.warn({ err: String(err), retryInMs: delay }, "finish failed");
        await clock.sleep(delay);
      }
    }
  }
}

/** A fan-out's instances' published values, in item order, as a fan-in's argument reads them. */
export function fanOutOutputs(fanOut: string, tasks: readonly WorkerTaskView[]): ProducerOutputs {
  const instances = tasks
    .filter((t) => t.fanOut === fanOut)
    .map((t) => ({ t, index: Number(parseInstanceId(t.taskId)?.values[0]?.[1] ?? NaN) }))
    .sort((a, b) => a.index - b.index);
  return {
    declared: instances[0]?.t.outputPatterns ?? {},
    values: null,
    instances: instances.map(({ t }) => (t.status === "succeeded" ? t.outputValues : null)),
  };
}

/** How many task leases a worker keeps renewing while the store fails its finish, before it gives up. */
export const FINISH_KEEP_LEASES = 3;

function runningKey(claimed: ClaimedTask): string {
  return `${claimed.token.runId}/${claimed.token.taskId}`;
}

function canceledBeforeStart(): ExecResult {
  return { ...failedToStart("canceled before it started"), outcome: "killed" };
}

function failedToStart(error: string): ExecResult {
  return {
    outcome: "failed",
    exitCode: null,
    signal: null,
    output: "",
    outputTruncated: false,
    totalOutputBytes: 0,
    durationMs: 0,
    error,
  };
}

/**
 * A success's result with the values its action published, checked against what the task declares;
 * a refusal makes it a failure whose error names the output and the rule. A task that declares no
 * outputs and whose action wrote nothing publishes nothing.
 */
export function withPublished(result: TaskResult, exec: ExecResult, claimed: ClaimedTask): TaskResult {
  if (result.outcome !== "succeeded" || exec.published === undefined) return result;
  const declared = claimed.task.outputPatterns ?? {};
  const published = exec.published;
  const parsed =
    "problem" in published
      ? { ok: false as const, message: published.problem }
      : "oversize" in published
        ? { ok: false as const, message: oversizeProblem(claimed.task.taskId, declared, published.oversize) }
        : published.text.trim() === "" && Object.keys(declared).length === 0
          ? null
          : parseOutputFile(claimed.task.taskId, declared, published.text);
  if (parsed === null) return result;
  if (!parsed.ok) return { ...result, outcome: "failed", error: `outputs refused: ${parsed.message}` };
  return { ...result, outputs: parsed.values };
}

/** Maps the executor's outcome to the attempt's recorded outcome. */
export function toTaskResult(exec: ExecResult, reason: "canceled" | null | AbortReason): TaskResult {
  let outcome: TaskResult["outcome"];
  let error = exec.error ?? null;
  if (exec.outcome === "killed") {
    outcome = reason === "canceled" ? "canceled" : "failed";
    if (reason === "canceled") error = "canceled";
  } else if (exec.outcome === "expired") {
    // Only reached when the claim was already given up; recorded as a failure if it ever is.
    outcome = "failed";
  } else {
    outcome = exec.outcome;
  }
  return { outcome, exitCode: exec.exitCode, output: exec.output, outputBytes: exec.totalOutputBytes, error };
}
