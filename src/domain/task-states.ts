/**
 * The task state machine of docs/architecture.md §3, as data: every legal move with who may make it.
 *
 *   blocked → queued → running → succeeded | failed | timed_out      (the happy and unhappy paths)
 *   blocked → skipped, blocked | queued → canceled, queued → timed_out (never ran)
 *   running → queued (retry), running → canceling → canceled          (retries and cancels)
 *   blocked → succeeded | failed | timed_out | skipped               (an approval gate, gates.ts)
 *   blocked | queued | failed | timed_out → succeeded | skipped       (an operator's mark, task-mark.ts)
 *   skipped → blocked                                                 (a dependent the mark lets go on)
 *
 * An approval gate runs nothing: once its needs succeeded the scheduler opens it (its gate state is
 * set; it stays blocked, never queued), and a decision or its timeout ends it from blocked.
 *
 * Actors name the loop that writes the row, as the "who" column does: `scheduler`, `leader` (the
 * command handlers, e.g. cancel) and `reaper` all run on the room's leader and are fenced by its term;
 * `worker` is the node executing the task, fenced by (task_id, version) and executor = itself.
 * The condition of each row is documentation: the store's compare-and-set enforces it (expected
 * status and version in the WHERE clause). Terminal states never change, but for an operator's
 * mark (task-mark.ts, docs/architecture.md §3 "Mark"): a failed or timed-out task of a run still
 * running may be marked succeeded or skipped, and what the mark lets go on is skipped no longer.
 */
import type { TaskStatus } from "./model.js";
import { TASK_STATUSES } from "./model.js";
import { canMove, targetsOf } from "./transition-table.js";
import { taskRetryWaitMs } from "./backoff.js";

export const TASK_ACTORS = ["scheduler", "leader", "reaper", "worker"] as const;
export type TaskActor = (typeof TASK_ACTORS)[number];

export interface TaskTransition {
  readonly from: TaskStatus;
  readonly to: TaskStatus;
  readonly who: readonly TaskActor[];
  readonly condition: string;
}

/** One row per (from, to, condition); a move is legal when some row lists the actor. */
export const TASK_TRANSITIONS: readonly TaskTransition[] = [
  {
    from: "blocked",
    to: "queued",
    who: ["scheduler"],
    condition: "its run condition holds (run-when.ts; by default every needs task succeeded), caps allow",
  },
  {
    from: "blocked",
    to: "skipped",
    who: ["scheduler"],
    condition:
      "its run condition cannot hold (run-when.ts; by default some needs task ended failed, timed_out, canceled or skipped; otherwise every needs task ended and the condition is not met), or (fail_fast) another instance of its fan-out ended failed or timed_out",
  },
  { from: "blocked", to: "canceled", who: ["leader"], condition: "cancel; status unchanged since read" },
  {
    from: "blocked",
    to: "succeeded",
    who: ["leader"],
    condition: "an open approval gate: the last approval it asks for (approve); version=v",
  },
  { from: "blocked", to: "failed", who: ["leader"], condition: "an open approval gate: denied; version=v" },
  {
    from: "blocked",
    to: "timed_out",
    who: ["reaper"],
    condition: 'an open approval gate past its timeout, on_timeout = "fail"; version=v',
  },
  {
    from: "blocked",
    to: "skipped",
    who: ["reaper"],
    condition: 'an open approval gate past its timeout, on_timeout = "skip"; version=v',
  },
  { from: "queued", to: "canceled", who: ["leader"], condition: "cancel; status unchanged since read" },
  {
    from: "queued",
    to: "skipped",
    who: ["scheduler"],
    condition: "fail_fast: another instance of its fan-out ended failed or timed_out; status='queued'",
  },
  ...(["blocked", "queued", "failed", "timed_out"] as const).flatMap((from) =>
    (["succeeded", "skipped"] as const).map((to) => ({
      from,
      to,
      who: ["leader"] as TaskActor[],
      condition: "mark: an operator's override, its run running (task-mark.ts); version=v",
    })),
  ),
  {
    from: "skipped",
    to: "blocked",
    who: ["leader"],
    condition:
      "mark succeeded: a dependent the scheduler skipped behind the marked task, with no other bad need (task-mark.ts); version=v",
  },
  {
    from: "queued",
    to: "running",
    who: ["worker"],
    condition: "claim: status='queued', version=v, not_before <= now, node fits `on`, node has capacity",
  },
  { from: "queued", to: "timed_out", who: ["reaper"], condition: "queued longer than its queue timeout" },
  { from: "running", to: "succeeded", who: ["worker"], condition: "version=v AND executor=me" },
  {
    from: "running",
    to: "failed",
    who: ["worker"],
    condition: "version=v AND executor=me, no attempts left",
  },
  { from: "canceling", to: "succeeded", who: ["worker"], condition: "finished before the kill; version=v" },
  { from: "canceling", to: "failed", who: ["worker"], condition: "finished before the kill; version=v" },
  // Both stores always accepted it; decideFinish's property test found the table did not say so.
  {
    from: "canceling",
    to: "timed_out",
    who: ["worker"],
    condition: "its own deadline fired before the kill; version=v",
  },
  {
    from: "running",
    to: "queued",
    who: ["worker", "reaper"],
    condition:
      "attempts left (worker: the attempt failed, or it released an attempt it stopped for an unreachable store; reaper: lease expired); attempt+1, not_before = now + backoff (none after a lost node)",
  },
  {
    from: "running",
    to: "failed",
    who: ["reaper"],
    condition: "lease expired, no attempts left",
  },
  {
    from: "running",
    to: "timed_out",
    who: ["reaper"],
    condition: "deadline passed (or lease expired past it), no attempts left",
  },
  {
    from: "running",
    to: "timed_out",
    who: ["worker"],
    condition: "its own deadline fired; process killed first",
  },
  { from: "running", to: "canceling", who: ["leader"], condition: "cancel; status='running'" },
  {
    from: "canceling",
    to: "canceled",
    who: ["worker", "reaper"],
    condition: "version=v (worker: process killed; reaper: the executor's lease expired)",
  },
];

export const TERMINAL_TASK_STATUSES: ReadonlySet<TaskStatus> = new Set<TaskStatus>([
  "succeeded",
  "failed",
  "timed_out",
  "canceled",
  "skipped",
]);

/** A task that holds a slot against the caps: it may be claimed, or a process may be running for it. */
export const ACTIVE_TASK_STATUSES: ReadonlySet<TaskStatus> = new Set<TaskStatus>([
  "queued",
  "running",
  "canceling",
]);

/** Ends of a `needs` task that make its dependents skipped rather than queued. */
export const SKIPPING_TASK_STATUSES: ReadonlySet<TaskStatus> = new Set<TaskStatus>([
  "failed",
  "timed_out",
  "canceled",
  "skipped",
]);

export function isTerminalTask(status: TaskStatus): boolean {
  return TERMINAL_TASK_STATUSES.has(status);
}

export function isTaskStatus(value: unknown): value is TaskStatus {
  return typeof value === "string" && (TASK_STATUSES as readonly string[]).includes(value);
}

export function canTransitionTask(from: TaskStatus, to: TaskStatus, actor: TaskActor): boolean {
  return canMove(TASK_TRANSITIONS, from, to, actor);
}

/**
 * The statuses from which a cancel of its run (the leader) moves a task to `to`: canceled for those
 * that never started, canceling for those whose process must stop first. Read from the table.
 */
export function canceledFrom(to: "canceled" | "canceling"): TaskStatus[] {
  return TASK_STATUSES.filter((from) => canTransitionTask(from, to, "leader"));
}

/** The statuses `actor` may move a task to from `from` (every actor when none is given), in table order. */
export function taskTargets(from: TaskStatus, actor?: TaskActor): TaskStatus[] {
  return targetsOf(TASK_TRANSITIONS, from, actor);
}

/** The table rows that allow the move, for messages and logs; empty when it is illegal. */
export function taskTransitionRows(from: TaskStatus, to: TaskStatus): TaskTransition[] {
  return TASK_TRANSITIONS.filter((t) => t.from === from && t.to === to);
}

// ---------------------------------------------------------------------------------------------
// Decisions: what a store applies. Each returns a move of the table above (task-decisions.test.ts
// checks every answer is legal); SQLite applies them row by row, PostgreSQL's single statements
// (claim, finish, reap: one round trip each, bench/README.md) compute the same, and the store
// contract's event-log oracle checks both against the table.

/** How a worker may end an attempt; `canceled` only answers a cancel (the task is canceling). */
export const TASK_OUTCOMES = ["succeeded", "failed", "timed_out", "canceled"] as const;
export type TaskOutcome = (typeof TASK_OUTCOMES)[number];

export function isTaskOutcome(value: unknown): value is TaskOutcome {
  return typeof value === "string" && (TASK_OUTCOMES as readonly string[]).includes(value);
}

/** A RangeError (bad input: nothing is written) unless `value` is an outcome a worker may report. */
export function checkTaskOutcome(operation: string, value: unknown): TaskOutcome {
  if (isTaskOutcome(value)) return value;
  throw new RangeError(
    `${operation}: outcome must be one of ${TASK_OUTCOMES.join(", ")}, got ${String(value)}`,
  );
}

/** What a decision needs of a task's attempts. */
export interface AttemptState {
  status: TaskStatus;
  attempt: number;
  maxAttempts: number;
  retryBackoffMs: number;
}

export type FinishDecision =
  /** Attempts left after a failure or timeout: back to the queue, claimable after `waitMs`. */
  | { kind: "retry"; to: "queued"; waitMs: number }
  | { kind: "end"; to: TaskOutcome }
  /** `canceled` for a task nobody canceled: a conflict, nothing changes. */
  | { kind: "refused"; expected: "canceling" };

/** The end of an attempt the worker still holds (running or canceling) with this outcome. */
export function decideFinish(task: AttemptState, outcome: TaskOutcome): FinishDecision {
  if (outcome === "canceled" && task.status !== "canceling")
    return { kind: "refused", expected: "canceling" };
  const failed = outcome === "failed" || outcome === "timed_out";
  if (failed && task.status === "running" && task.attempt < task.maxAttempts)
    return { kind: "retry", to: "queued", waitMs: taskRetryWaitMs(task.retryBackoffMs, task.attempt) };
  return { kind: "end", to: outcome };
}

/**
 * decideFinish for each state the row may be in when the finish lands, for a store that applies a
 * finish in one statement without reading the row first (PostgreSQL's hot path). The attempt and
 * its retry settings are the claim's, fixed while the claim holds; whether attempts are left, and
 * whether the task is canceling, are the row's (the leader may have raised `max_attempts` or asked
 * for a cancel since the claim), so the statement picks among these answers and decides nothing.
 */
export interface FinishAnswers {
  /** Running, with attempts left (attempt < max_attempts). */
  left: FinishDecision;
  /** Running, none left. */
  spent: FinishDecision;
  /** Canceling. */
  canceling: FinishDecision;
}

export function finishAnswers(
  outcome: TaskOutcome,
  claim: { attempt: number; retryBackoffMs: number },
): FinishAnswers {
  const at = (status: TaskStatus, maxAttempts: number): FinishDecision =>
    decideFinish(
      { status, attempt: claim.attempt, maxAttempts, retryBackoffMs: claim.retryBackoffMs },
      outcome,
    );
  return {
    left: at("running", claim.attempt + 1),
    spent: at("running", claim.attempt),
    canceling: at("canceling", claim.attempt),
  };
}

/**
 * Why the reaper moved a task (its `error` and the log line's reason): a deadline that passed, a
 * canceling task's expired lease, or the words of a lost node (lostNodeWords).
 */
export type ReapReason = string;

export type ReapDecision =
  | { to: "canceled"; reason: "lease expired" }
  /**
   * `lostNode`: its lease expired (lost_reruns + 1); `lostRerun`: it runs again without spending one
   * of its retries (max_attempts + 1 too).
   */
  | { to: "queued"; reason: ReapReason; waitMs: number; lostNode: boolean; lostRerun: boolean }
  | { to: "failed" | "timed_out"; reason: ReapReason; lostNode: boolean };

/**
 * How many attempts of one task whose node was lost are run again without spending its retries;
 * past it, a lost attempt counts as one of its retries as any failure does, so a task that takes
 * its node down every time does not run forever.
 */
export const MAX_LOST_RERUNS = 2;

/** What decideReap needs to say a lost node's story. */
export interface LostState {
  /** The node whose lease expired, null when unknown. */
  executorNode: string | null;
  /** Attempts already run again after a lost node without spending a retry. */
  lostReruns: number;
  /** False for a task declared `rerun_if_lost = false`. */
  rerunIfLost: boolean;
}

/**
 * The words recorded when an attempt was lost: what happened, and what next. `why` is the node's own
 * account when it released the attempt itself (its action stopped because the store was unreachable
 * past the bound, releaseTask); without it, the reaper found the lease expired: the node was lost.
 */
export function lostNodeWords(
  node: string | null,
  next: "again" | "retry" | "never" | "spent",
  times: number,
  why: string | null = null,
): string {
  const who = node === null ? "its node" : `node ${node}`;
  const what = why === null ? `${who} was lost` : `${who} stopped its action: ${why}`;
  const lost = times > 1 ? `${what} (the ${ordinal(times)} lost attempt of this task)` : what;
  if (next === "again") return `${lost}; running again`;
  if (next === "retry") return `${lost}; running again as one of its retries`;
  if (next === "never") return `${lost}; not run again: rerun_if_lost = false`;
  return `${lost}; not run again`;
}

function ordinal(n: number): string {
  const tail = n % 100 >= 11 && n % 100 <= 13 ? "th" : (["th", "st", "nd", "rd"][n % 10] ?? "th");
  return `${n}${tail}`;
}

/**
 * What the reaper does with a running or canceling task at `now`, or null when it is not overdue:
 * a canceling task whose executor stopped renewing is canceled; a running one past its deadline is
 * retried while it has attempts left, else timed out. A running one whose lease expired (its node
 * lost: killed, cut off from the store past the task lease's bound) is run again without spending
 * a retry, MAX_LOST_RERUNS times; never when it says `rerun_if_lost = false`; past the bound, as a
 * retry while it has attempts left, else failed.
 */
export function decideReap(
  task: AttemptState & { leaseExpiresAt: number | null; deadline: number | null } & LostState,
  now: number,
): ReapDecision | null {
  const leaseGone = task.leaseExpiresAt !== null && task.leaseExpiresAt <= now;
  const pastDeadline = task.deadline !== null && task.deadline <= now;
  if (task.status === "canceling") return leaseGone ? { to: "canceled", reason: "lease expired" } : null;
  if (task.status !== "running" || !(leaseGone || pastDeadline)) return null;
  const hasAttempts = task.attempt < task.maxAttempts;
  const waitMs = taskRetryWaitMs(task.retryBackoffMs, task.attempt);
  if (pastDeadline) {
    const reason = "deadline passed";
    return hasAttempts
      ? { to: "queued", reason, waitMs, lostNode: false, lostRerun: false }
      : { to: "timed_out", reason, lostNode: false };
  }
  return decideLost(task, null);
}

/**
 * A running attempt that was lost — its lease expired (the reaper, `why` null), or its node stopped
 * it for a store it could not reach and says so (`why`, releaseTask) — is run again without spending
 * a retry, MAX_LOST_RERUNS times; never when it says `rerun_if_lost = false`; past the bound, as a
 * retry while it has attempts left, else failed.
 */
export function decideLost(task: AttemptState & LostState, why: string | null): LostDecision {
  const hasAttempts = task.attempt < task.maxAttempts;
  const waitMs = taskRetryWaitMs(task.retryBackoffMs, task.attempt);
  const times = task.lostReruns + 1;
  const words = (next: "again" | "retry" | "never" | "spent"): string =>
    lostNodeWords(task.executorNode, next, times, why);
  if (!task.rerunIfLost) return { to: "failed", reason: words("never"), lostNode: true };
  if (task.lostReruns < MAX_LOST_RERUNS)
    return { to: "queued", reason: words("again"), waitMs: 0, lostNode: true, lostRerun: true };
  if (hasAttempts) return { to: "queued", reason: words("retry"), waitMs, lostNode: true, lostRerun: false };
  return { to: "failed", reason: words("spent"), lostNode: true };
}

/** What a lost attempt becomes: queued again, or failed. */
export type LostDecision =
  | { to: "queued"; reason: ReapReason; waitMs: number; lostNode: true; lostRerun: boolean }
  | { to: "failed"; reason: ReapReason; lostNode: true };

/** A queued task that waited longer than its queue timeout: the reaper moves it to timed_out. */
export function queueTimedOut(
  task: { status: TaskStatus; queuedAt: number | null; queueTimeoutMs: number | null },
  now: number,
): boolean {
  return (
    task.status === "queued" &&
    task.queuedAt !== null &&
    task.queueTimeoutMs !== null &&
    task.queuedAt + task.queueTimeoutMs <= now
  );
}
