/**
 * The leader's loop for one room, run only while the lease keeper holds the lease: handle commands
 * from the inbox, reap expired leases and timeouts, schedule ready tasks, derive run outcomes. Every
 * write is fenced by the term; a rejected fenced write (ConflictError) means this node was deposed,
 * which ends leading at once and is not an error. The loop wakes on store changes (debounced) and
 * on a slow safety tick for what no change announces: leases and deadlines passing.
 */
import type { Clock } from "../ports/clock.js";
import type { Logger } from "../ports/logger.js";
import type { ChangeFeed, LeaderFence, PruneResult, RetentionStore, Scheduler } from "../ports/store.js";
import { isConflict } from "../ports/errors.js";
import { CLAIM_LEFT_MORE, endedTask, noneDeleted, wakeTarget } from "../ports/store.js";
import { Waker } from "./wake.js";
import type { ScheduleAuthority, ScheduleStore } from "./schedules.js";
import { runScheduleLoop } from "./schedules.js";
import type { TriggerStore } from "./after.js";
import { runAfterLoop } from "./after.js";
import { STORE_CALL_BACKOFF, backoffMs } from "../domain/backoff.js";
import type { RecentWake } from "./wake-targets.js";
import { planWake, SELF_SERVE_MS, WAKE_DEPRIORITIZE_MS, WAKE_HOLD_MS } from "./wake-targets.js";

/**
 * Handles inbox commands of the fence's room (the command table's inbox processing step). Returns
 * how many inbox rows it moved, 0 when the inbox is empty. Throws ConflictError when deposed.
 */
export type InboxStep = (fence: LeaderFence, signal: AbortSignal) => Promise<number>;

export interface LeaderTimings {
  /** Lets a burst of changes settle so one pass covers it. */
  debounceMs: number;
  /** A pass even with no change, for expiries and deadlines; it bounds how late the reaper notices. */
  safetyTickMs: number;
  /**
   * The tick instead while the room holds nothing that could expire (ReapResult.open false): only
   * a change can give the leader work then, and changes wake it, so this only covers a notification
   * lost without a reconnect (a node killed between its commit and its NOTIFY). Default 10 s.
   */
  idleTickMs?: number;
  /** Nodes whose heartbeat is older than this are not woken for ready tasks (default 30 s). */
  wakeLiveWithinMs?: number;
}

export const DEFAULT_LEADER_TIMINGS: LeaderTimings = {
  debounceMs: 15,
  safetyTickMs: 1_000,
  idleTickMs: 10_000,
};
const DEFAULT_WAKE_LIVE_WITHIN_MS = 30_000;

/** What the leader forgets (docs/configuration.md, "Retention"); see PruneLimits for exactly what goes. */
export interface RetentionSettings {
  /** Finished runs, answered commands and sent messages older than this are deleted. */
  finishedMs: number;
  /** Nodes silent for longer than this are dropped. */
  forgetNodesAfterMs: number;
  /** HTTP idempotency keys stored longer ago than this are forgotten. */
  forgetKeysAfterMs: number;
  /** How often a round of pruning starts; the first comes one period after leadership begins. */
  everyMs: number;
}

// Small batches keep each delete transaction short (the store's write lock, a PostgreSQL
// transaction's row locks), with a pause between them so the leader's own writes get in.
const PRUNE_RUNS_PER_BATCH = 20;
const PRUNE_ROWS_PER_BATCH = 500;
const PRUNE_PAUSE_MS = 20;

export interface LeaderDeps {
  store: Scheduler & ChangeFeed & Partial<RetentionStore>;
  clock: Clock;
  logger: Logger;
  timings: LeaderTimings;
  /** The command handling step; null leaves commands waiting in the inbox. */
  processInbox: InboxStep | null;
  /** Where scheduled DAGs' slots become runs (schedules.ts); null or absent fires no schedule. */
  schedules?: ScheduleStore | null;
  /** Where definitions declaring `after` are fired (after.ts); null or absent fires none. */
  afters?: TriggerStore | null;
  /** Whose authority schedules (and `after` firings) run on, checked before each slot (schedule-authority.ts); absent: not checked. */
  scheduleAuthority?: ScheduleAuthority | null;
  /** Null (or absent) keeps everything forever. */
  retention?: RetentionSettings | null;
  /** Observes each failed pass, prune or schedule round that was not a conflict (metrics). */
  onStoreError?: () => void;
}

/** What one pass changed, for the log and to decide whether to run again at once. */
export interface LeaderPass {
  commands: number;
  requeued: number;
  failed: number;
  timedOut: number;
  canceled: number;
  expiredRuns: number;
  /** Whether the room held anything that could expire (ReapResult.open). */
  open: boolean;
  queued: number;
  skipped: number;
  /** Fan-outs expanded: their instances are scheduled by the next step. */
  expanded: number;
  outcomes: number;
}

// A pass that keeps changing things runs again at once, but a bounded number of times before it
// yields to the wait, so a hot room cannot starve the event loop.
const MAX_BACK_TO_BACK_PASSES = 20;
export interface PassOptions {
  /**
   * Only what a task's end can change: scheduling and run outcomes, no inbox and no reaping (a
   * pass after nothing but finished tasks; whatever else arrived asks for a whole pass).
   */
  scheduleOnly?: boolean;
  /** Called once scheduling is done, before run outcomes: the wake-ups go out first. */
  afterSchedule?: (pass: LeaderPass) => Promise<void>;
}

// Not reaped, so not known to hold nothing that could expire: the short tick stays.
const NOTHING_REAPED = { requeued: 0, failed: 0, timedOut: 0, canceled: 0, expiredRuns: 0, open: true };

/** One pass of every leader step, in the order that lets each see the previous one's effect. */
export async function leaderPass(
  deps: LeaderDeps,
  fence: LeaderFence,
  signal: AbortSignal,
  options: PassOptions = {},
): Promise<LeaderPass> {
  const { store, logger } = deps;
  let commands = 0;
  if (deps.processInbox !== null && options.scheduleOnly !== true) {
    // Drain the inbox first: a cancel or a cap must take effect before the scheduler admits more.
    for (let n = await deps.processInbox(fence, signal); n > 0 && !signal.aborted;) {
      commands += n;
      n = await deps.processInbox(fence, signal);
    }
  }
  const reaped = options.scheduleOnly === true ? NOTHING_REAPED : await store.reap(fence);
  // After nothing but finished tasks, the store may decide from what it kept of its last step.
  const scheduled = await store.scheduleStep(fence, options.scheduleOnly === true);
  const pass: LeaderPass = {
    commands,
    ...reaped,
    queued: scheduled.queued,
    skipped: scheduled.skipped,
    expanded: scheduled.expanded ?? 0,
    outcomes: 0,
  };
  await options.afterSchedule?.(pass);
  const outcomes = await store.deriveRunOutcomes(fence);
  for (const o of outcomes) logger.info({ run: o.runId, dag: o.dagId, from: o.from, to: o.to }, "run ended");
  pass.outcomes = outcomes.length;
  if (reaped.requeued + reaped.failed + reaped.timedOut + reaped.canceled + reaped.expiredRuns > 0) {
    const { open: _open, ...moved } = reaped;
    logger.info(moved, "reaped");
  }
  return pass;
}

/** A scheduling pass begun inside a commit, for the leader's loop to take as its next pass. */
interface JoinedPass {
  pass: Promise<LeaderPass>;
  /** What the pass's wake-ups said of the next tick, once they are done. */
  tick: () => number | null;
}

const changedAnything = (p: LeaderPass): boolean =>
  p.commands +
    p.requeued +
    p.failed +
    p.timedOut +
    p.canceled +
    p.expiredRuns +
    p.queued +
    p.skipped +
    p.expanded +
    p.outcomes >
  0;

/**
 * Leads the room until `signal` aborts or a fenced write is rejected (then calls `deposed`).
 * Store failures back off and retry: the lease keeper decides when leadership is gone.
 */
export async function runLeaderLoop(
  deps: LeaderDeps,
  fence: LeaderFence,
  signal: AbortSignal,
  deposed: () => void,
): Promise<void> {
  const log = deps.logger.child({ room: fence.roomId, term: fence.term });
  const waker = new Waker(deps.clock, deps.timings.debounceMs);
  const wakes = new WakeKeeper(deps, fence.roomId, log);
  // Whether something other than a task's end arrived since the last pass began: a whole pass then.
  let wholePass = true;
  let whole = true;
  let lastWholeAt = deps.clock.monotonicMs();
  // A scheduling pass begun inside the commit that ended a task (joinCommits), for the loop to take
  // as its next pass; and whether that commit's own `done` is still to be heard (it needs no pass).
  let waiting = false;
  const join: { next: JoinedPass | null; doneOwed: boolean } = { next: null, doneOwed: false };
  const unsubscribe = deps.store.onChange(
    (topic, roomId, nodes) => {
      if (roomId !== null && roomId !== fence.roomId) return;
      if (topic === "done" && join.doneOwed) {
        join.doneOwed = false;
      } else if (topic === "done") {
        // A task ended: its dependents may be ready now. Scheduling them is the critical path of every
        // dependency (bench/README.md, DAG overhead), so it skips the debounce and the inbox and
        // reaping steps; finishes come at most as fast as tasks run, and one pass covers all that
        // piled up meanwhile.
        waker.wake(true);
      } else if (topic === "tasks") {
        // A claim makes nothing schedulable: it matters only while ready tasks were left unclaimed
        // (a look at the claim demand, which a scheduling pass makes). Changes of tasks that name no
        // node are this leader's own writes, or come with a `runs` or `done` change of their own.
        if (nodes === undefined) return;
        wakes.claimed(nodes);
        if (wakes.readyLeft) waker.wake();
      } else if (topic === "inbox" || topic === "runs" || topic === "cap" || topic === "ready") {
        if (topic === "ready") wakes.readyHeard = true;
        wholePass = true;
        waker.wake();
      }
    },
    ["done", "tasks", "inbox", "runs", "cap", "ready"],
  );
  const stepDeps = { ...deps, logger: log };
  // SQLite: a task's end is scheduled in the commit that records it, and the claims that step
  // calls for join it too (docs/architecture.md §8, "One commit a step"). Only while the loop
  // waits and owes no whole pass; otherwise the `done` wakes it as below.
  const leaveCommits = deps.store.joinCommits?.((writes) => {
    if (!waiting || join.next !== null || wholePass || signal.aborted) return;
    if (deps.clock.monotonicMs() - lastWholeAt >= deps.timings.safetyTickMs) return;
    if (!writes.some((w) => endedTask(w, fence.roomId))) return;
    let tick: number | null = null;
    const pass = leaderPass(stepDeps, fence, signal, {
      scheduleOnly: true,
      afterSchedule: async (p) => {
        tick = await wakes.afterPass(p);
      },
    });
    // Awaited by the loop, which handles its failure as its own pass's.
    pass.catch(() => {});
    join.next = { pass, tick: () => tick };
    join.doneOwed = true;
    waker.wake(true);
  });
  const pruning = runPruneLoop(deps, log, fence, signal, deposed);
  // What the schedule and trigger loops share; each adds its own store.
  const roundDeps = {
    clock: deps.clock,
    onStoreError: deps.onStoreError,
    feed: deps.store,
    authority: deps.scheduleAuthority ?? null,
  };
  const scheduling =
    deps.schedules === undefined || deps.schedules === null
      ? Promise.resolve()
      : runScheduleLoop({ ...roundDeps, store: deps.schedules }, log, fence, signal, deposed);
  const triggering =
    deps.afters === undefined || deps.afters === null
      ? Promise.resolve()
      : runAfterLoop({ ...roundDeps, store: deps.afters }, log, fence, signal, deposed);
  let failures = 0;
  let backToBack = 0;
  let tickMs = deps.timings.safetyTickMs;
  try {
    while (!signal.aborted) {
      let again = false;
      const mine = join.next;
      join.next = null;
      try {
        let tick = tickMs;
        let pass: LeaderPass;
        if (mine !== null) {
          // The scheduling pass the task's commit began; a whole pass asked for meanwhile follows it.
          try {
            pass = await mine.pass;
          } finally {
            join.doneOwed = false;
          }
          tick = mine.tick() ?? tick;
        } else {
          // However busy with finishes, reaping and the inbox come at least once per safety tick.
          if (deps.clock.monotonicMs() - lastWholeAt >= deps.timings.safetyTickMs) whole = true;
          if (whole) lastWholeAt = deps.clock.monotonicMs();
          wholePass = false;
          pass = await leaderPass(stepDeps, fence, signal, {
            scheduleOnly: !whole,
            afterSchedule: async (p) => {
              tick = await wakes.afterPass(p);
            },
          });
        }
        tickMs = tick;
        failures = 0;
        // After a scheduling-only pass only a skip (its dependents) or a fan-out's expansion (its
        // instances) can have left more to do.
        const scheduleOnly = mine !== null || !whole;
        const more = scheduleOnly ? pass.skipped + pass.expanded > 0 : changedAnything(pass);
        again = ((mine !== null && whole) || more) && backToBack < MAX_BACK_TO_BACK_PASSES;
        backToBack = again ? backToBack + 1 : 0;
      } catch (err) {
        if (isConflict(err)) {
          log.info({ reason: err.message }, "deposed: a fenced write was rejected");
          deposed();
          return;
        }
        failures += 1;
        deps.onStoreError?.();
        const delay = backoffMs(STORE_CALL_BACKOFF, failures);
        log.warn({ err: String(err), retryInMs: delay }, "leader pass failed");
        await deps.clock.sleep(delay, signal);
        whole = true;
        continue;
      }
      // The safety tick (no wake) is a whole pass: it is what notices leases and deadlines passing.
      if (again) whole ||= wholePass;
      else {
        waiting = true;
        try {
          whole = !(await waker.wait(tickMs, signal)) || wholePass;
        } finally {
          waiting = false;
        }
      }
    }
  } finally {
    leaveCommits?.();
    wakes.logStats(true);
    unsubscribe();
    await pruning;
    await scheduling;
    await triggering;
  }
}

/**
 * The leader's targeted wake-ups: after a pass that queued or requeued tasks, when a
 * retry's backoff passes, or while ready tasks were left unclaimed, it reads the room's claim
 * demand (one statement) and wakes only as many nodes as there are tasks to take. Returns how long
 * the loop may sleep before it must look again (the safety tick, or sooner when a waiting task
 * becomes ready).
 */
class WakeKeeper {
  /** A "ready" change was heard (a retry requeued by its worker). */
  readyHeard = true;
  private lastReady = 0;
  private readyAt: number | null = null;
  private readonly recent = new Map<string, RecentWake>();
  /** Whether the last look at the claim demand found ready tasks. */
  get readyLeft(): boolean {
    return this.lastReady > 0;
  }
  private readonly selfServing = new Map<string, number>();
  private rotation = 0;
  /**
   * What the wakes did (the scale bench reads them from the log): demand reads, wakes sent, nodes
   * named and tasks asked of them, and woken nodes whose hold passed before their claim was heard.
   */
  readonly stats = { demandReads: 0, wakes: 0, nodesWoken: 0, tasksAsked: 0, holdsPassed: 0 };
  private statsLoggedAt = 0;
  private statsLogged = 0;

  constructor(
    private readonly deps: LeaderDeps,
    private readonly roomId: string,
    private readonly log: Logger,
  ) {}

  /** The counts so far, at most every 5 s and only when they moved (the killed leader's are kept too). */
  logStats(force = false): void {
    const now = this.deps.clock.monotonicMs();
    if (this.stats.demandReads === this.statsLogged) return;
    if (!force && now - this.statsLoggedAt < 5_000) return;
    this.statsLoggedAt = now;
    this.statsLogged = this.stats.demandReads;
    this.log.info({ ...this.stats }, "wake-ups so far");
  }

  /**
   * These nodes claimed: whatever they were woken for, they have acted on it; one whose claim left
   * fitting tasks behind (CLAIM_LEFT_MORE) goes on by itself as its slots free.
   */
  claimed(nodeIds: readonly string[]): void {
    const now = this.deps.clock.monotonicMs();
    for (const named of nodeIds) {
      const more = named.startsWith(CLAIM_LEFT_MORE);
      const id = more ? named.slice(CLAIM_LEFT_MORE.length) : named;
      this.recent.delete(id);
      if (more) this.selfServing.set(id, now);
      else this.selfServing.delete(id);
    }
  }

  async afterPass(pass: LeaderPass): Promise<number> {
    const { clock, store, timings } = this.deps;
    const now = clock.monotonicMs();
    const due =
      pass.queued + pass.requeued > 0 ||
      this.readyHeard ||
      this.lastReady > 0 ||
      (this.readyAt !== null && now >= this.readyAt);
    if (due) {
      this.readyHeard = false;
      const demand = await store.claimDemand(
        this.roomId,
        timings.wakeLiveWithinMs ?? DEFAULT_WAKE_LIVE_WITHIN_MS,
      );
      this.stats.demandReads += 1;
      this.lastReady = demand.ready;
      this.readyAt = demand.nextReadyInMs === null ? null : now + demand.nextReadyInMs;
      for (const [id, r] of this.recent) {
        if (now - r.at >= WAKE_HOLD_MS && r.expected > 0) {
          this.stats.holdsPassed += 1;
          r.expected = 0;
        }
        if (now - r.at >= WAKE_DEPRIORITIZE_MS) this.recent.delete(id);
      }
      for (const [id, at] of this.selfServing) if (now - at >= SELF_SERVE_MS) this.selfServing.delete(id);
      if (demand.ready > 0) {
        const plan = planWake(demand, this.recent, now, this.rotation++, this.selfServing);
        if (plan.targets.length > 0) {
          for (const t of plan.targets) this.recent.set(t.nodeId, { at: now, expected: t.take });
          this.stats.wakes += 1;
          this.stats.nodesWoken += plan.targets.length;
          this.stats.tasksAsked += plan.targets.reduce((n, t) => n + t.take, 0);
          await store.wakeNodes(
            this.roomId,
            plan.targets.map((t) => wakeTarget(t.nodeId, t.take)),
          );
        }
      }
      this.logStats();
    }
    let tick = pass.open ? timings.safetyTickMs : (timings.idleTickMs ?? timings.safetyTickMs);
    if (this.readyAt !== null) tick = Math.min(tick, this.readyAt - now + 20);
    // Ready tasks left while woken nodes have not claimed, or left to nodes serving themselves:
    // look again when that ends.
    if (this.lastReady > 0) {
      for (const r of this.recent.values())
        if (now - r.at < WAKE_HOLD_MS) tick = Math.min(tick, r.at + WAKE_HOLD_MS - now + 5);
      for (const at of this.selfServing.values())
        if (now - at < SELF_SERVE_MS) tick = Math.min(tick, at + SELF_SERVE_MS - now + 5);
    }
    return Math.max(0, tick);
  }
}

/**
 * Prunes the room while leading: every `retention.everyMs`, batches until one comes back short.
 * Each batch is fenced like any leader write; a rejected one means deposed.
 */
async function runPruneLoop(
  deps: LeaderDeps,
  log: Logger,
  fence: LeaderFence,
  signal: AbortSignal,
  deposed: () => void,
): Promise<void> {
  const retention = deps.retention ?? null;
  const prune = deps.store.pruneBatch?.bind(deps.store);
  if (retention === null || prune === undefined) return;
  const limits = {
    olderThanMs: retention.finishedMs,
    nodesOlderThanMs: retention.forgetNodesAfterMs,
    keysOlderThanMs: retention.forgetKeysAfterMs,
    runs: PRUNE_RUNS_PER_BATCH,
    rows: PRUNE_ROWS_PER_BATCH,
  };
  while (!signal.aborted) {
    await deps.clock.sleep(retention.everyMs, signal);
    const total: PruneResult = noneDeleted();
    try {
      while (!signal.aborted) {
        const r = await prune(fence, limits);
        for (const k of Object.keys(total) as Array<keyof PruneResult>) total[k] += r[k];
        const full =
          r.runs >= limits.runs || Math.max(r.events, r.inbox, r.outbox, r.nodes, r.keys) >= limits.rows;
        if (!full) break;
        await deps.clock.sleep(PRUNE_PAUSE_MS, signal);
      }
    } catch (err) {
      if (isConflict(err)) {
        log.info({ reason: err.message }, "deposed: a fenced prune was rejected");
        deposed();
        return;
      }
      deps.onStoreError?.();
      log.warn({ err: String(err) }, "pruning failed; trying again next round");
    }
    if (Object.values(total).some((n) => n > 0)) log.info({ ...total }, "pruned");
  }
}
