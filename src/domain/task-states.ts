/**
 * The task state machine of DESIGN.md §3, as data: every legal move with who may make it.
 *
 *   blocked → queued → running → succeeded | failed | timed_out      (the happy and unhappy paths)
 *   blocked → skipped, blocked | queued → canceled, queued → timed_out (never ran)
 *   running → queued (retry), running → canceling → canceled          (retries and cancels)
 *
 * Actors name the loop that writes the row, as the "who" column does: `scheduler`, `leader` (the
 * command handlers, e.g. cancel) and `reaper` all run on the room's leader and are fenced by its term;
 * `worker` is the node executing the task, fenced by (task_id, version) and executor = itself.
 * The condition of each row is documentation: the store's compare-and-set enforces it (expected
 * status and version in the WHERE clause). Terminal states never change.
 */
import type { TaskStatus } from "./model.js";
import { TASK_STATUSES } from "./model.js";
import { canMove, targetsOf } from "./transition-table.js";

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
  { from: "blocked", to: "queued", who: ["scheduler"], condition: "every needs task succeeded, caps allow" },
  {
    from: "blocked",
    to: "skipped",
    who: ["scheduler"],
    condition: "some needs task ended failed, timed_out, canceled or skipped",
  },
  { from: "blocked", to: "canceled", who: ["leader"], condition: "cancel; status unchanged since read" },
  { from: "queued", to: "canceled", who: ["leader"], condition: "cancel; status unchanged since read" },
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
  {
    from: "running",
    to: "queued",
    who: ["worker", "reaper"],
    condition:
      "attempts left (worker: the attempt failed; reaper: lease expired); attempt+1, not_before = now + backoff",
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

/** The statuses `actor` may move a task to from `from` (every actor when none is given), in table order. */
export function taskTargets(from: TaskStatus, actor?: TaskActor): TaskStatus[] {
  return targetsOf(TASK_TRANSITIONS, from, actor);
}

/** The table rows that allow the move, for messages and logs; empty when it is illegal. */
export function taskTransitionRows(from: TaskStatus, to: TaskStatus): TaskTransition[] {
  return TASK_TRANSITIONS.filter((t) => t.from === from && t.to === to);
}
