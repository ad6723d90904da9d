/**
 * Honest counts of a run's outcomes: "2/5 succeeded · 1 failed · 2 skipped". Failed, skipped and
 * canceled tasks are ended but never "done", so a failed run can never look complete.
 */
import type { TaskStatus } from "./model.js";
import { TASK_STATUSES } from "./model.js";

/** The word for each task status, in counts lines and every message; "waiting" for blocked. */
export const TASK_STATUS_WORD: Readonly<Record<TaskStatus, string>> = {
  blocked: "waiting",
  queued: "queued",
  running: "running",
  canceling: "canceling",
  succeeded: "succeeded",
  failed: "failed",
  timed_out: "timed out",
  canceled: "canceled",
  skipped: "skipped",
};

/** The order of the parts after "succeeded": what needs eyes first, then what is left to happen. */
export const COUNT_ORDER: readonly TaskStatus[] = [
  "failed",
  "timed_out",
  "canceled",
  "skipped",
  "running",
  "canceling",
  "queued",
  "blocked",
];

export function countStatuses(statuses: readonly TaskStatus[]): Record<TaskStatus, number> {
  const counts = Object.fromEntries(TASK_STATUSES.map((s) => [s, 0])) as Record<TaskStatus, number>;
  for (const s of statuses) counts[s] += 1;
  return counts;
}

/**
 * `2/5 succeeded · 1 failed · 2 skipped`: succeeded over the total first, then every other status
 * that has at least one task, in COUNT_ORDER. An empty run reads `0/0 succeeded`.
 */
export function outcomeCounts(statuses: readonly TaskStatus[]): string {
  return outcomeLine(countStatuses(statuses), statuses.length);
}

/** outcomeCounts from counts per status (a TaskSummary's byStatus) and the total. */
export function outcomeLine(counts: Readonly<Record<TaskStatus, number>>, total: number): string {
  const parts = [`${counts.succeeded}/${total} succeeded`];
  for (const s of COUNT_ORDER) if (counts[s] > 0) parts.push(`${counts[s]} ${TASK_STATUS_WORD[s]}`);
  return parts.join(" · ");
}

/**
 * Share of the run that succeeded, in whole percent, rounded down: a progress bar built on it is
 * full only when every task succeeded.
 */
export function succeededPercent(statuses: readonly TaskStatus[]): number {
  return percentOf(statuses.filter((s) => s === "succeeded").length, statuses.length);
}

/** floor(succeeded * 100 / total); 100 for an empty run. */
export function percentOf(succeeded: number, total: number): number {
  return total === 0 ? 100 : Math.floor((succeeded * 100) / total);
}
