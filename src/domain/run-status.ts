/**
 * A run's status derived from its task set (docs/architecture.md §3: "a run's outcome is always derived from
 * its task set, never written at the end of a loop"), and the progress counts of its status card.
 */
import type { RunStatus, TaskStatus } from "./model.js";
import { TASK_STATUSES } from "./model.js";
import { ACTIVE_TASK_STATUSES, isTerminalTask } from "./task-states.js";

/**
 * The status the run should move to given its tasks' statuses, or `current` when no derived move
 * applies. Only `running` and `canceling` runs have derived moves:
 * - running → succeeded when every task is terminal and every one succeeded or was skipped (a task
 *   is skipped only behind a failed, timed-out or canceled one, which fails the run anyway, behind
 *   an approval gate that timed out with on_timeout = "skip": what its DAG asked for, not a failure,
 *   or by an operator's mark, kept on the task: docs/architecture.md §3 "Mark");
 * - running → failed when every task is terminal and some task did not succeed;
 * - canceling → canceled when every task is terminal. the first design said "once no task is running
 *   or canceling"; cancel has already canceled the blocked and queued ones, but a task claimed between
 *   cancel's read and its write is running again, so we wait for every task rather than orphan it.
 * An empty task set counts as all succeeded (parseDag never produces one).
 */
export function deriveRunOutcome(current: RunStatus, taskStatuses: readonly TaskStatus[]): RunStatus {
  if (current !== "running" && current !== "canceling") return current;
  if (!taskStatuses.every(isTerminalTask)) return current;
  if (current === "canceling") return "canceled";
  return taskStatuses.every((s) => s === "succeeded" || s === "skipped") ? "succeeded" : "failed";
}

export interface TaskSummary {
  total: number;
  /** Every status is present, zero when no task has it. */
  byStatus: Record<TaskStatus, number>;
  /** Tasks in a terminal status. */
  done: number;
  /** Tasks queued, running or canceling. */
  active: number;
  /** floor(done * 100 / total); 100 for an empty set, so a finished card never shows 99 %. */
  percent: number;
}

/** The same summary from counts per status (a store's count query), without the task rows. */
export function summarizeCounts(counts: Partial<Record<TaskStatus, number>>): TaskSummary {
  const byStatus = Object.fromEntries(TASK_STATUSES.map((s) => [s, counts[s] ?? 0])) as Record<
    TaskStatus,
    number
  >;
  let done = 0;
  let active = 0;
  let total = 0;
  for (const s of TASK_STATUSES) {
    total += byStatus[s];
    if (isTerminalTask(s)) done += byStatus[s];
    if (ACTIVE_TASK_STATUSES.has(s)) active += byStatus[s];
  }
  const percent = total === 0 ? 100 : Math.floor((done * 100) / total);
  return { total, byStatus, done, active, percent };
}

export function summarizeTasks(taskStatuses: readonly TaskStatus[]): TaskSummary {
  const byStatus = Object.fromEntries(TASK_STATUSES.map((s) => [s, 0])) as Record<TaskStatus, number>;
  let done = 0;
  let active = 0;
  for (const s of taskStatuses) {
    byStatus[s] += 1;
    if (isTerminalTask(s)) done += 1;
    if (ACTIVE_TASK_STATUSES.has(s)) active += 1;
  }
  const total = taskStatuses.length;
  const percent = total === 0 ? 100 : Math.floor((done * 100) / total);
  return { total, byStatus, done, active, percent };
}
