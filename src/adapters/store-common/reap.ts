/**
 * What both stores' reapers read of an overdue task, and the domain's decision for it: the stores
 * only apply what decideReap says.
 */
import type { TaskStatus } from "../../domain/model.js";
import type { AttemptState, LostState, ReapDecision } from "../../domain/task-states.js";
import { decideReap } from "../../domain/task-states.js";

/** An overdue task's row as the reapers select it (snake_case, as both stores name the columns). */
export interface ReapRow {
  run_id: string;
  task_id: string;
  status: TaskStatus;
  version: number;
  attempt: number;
  max_attempts: number;
  retry_backoff_ms: number;
  lease_expires_at: number | null;
  deadline: number | null;
  executor_node: string | null;
  lost_reruns: number;
  /** A boolean on PostgreSQL, 0 or 1 on SQLite. */
  rerun_if_lost: boolean | number;
}

/** The columns a reaper reads of an overdue task, in both stores' dialects. */
export const REAP_COLUMNS = `run_id, task_id, status, version, attempt, max_attempts, retry_backoff_ms, lease_expires_at,
       deadline, executor_node, lost_reruns, rerun_if_lost`;

/** A selected row's attempts and lost-node state, as decideLost reads them. */
export const lostStateOf = (r: ReapRow): AttemptState & LostState => ({
  status: r.status,
  attempt: r.attempt,
  maxAttempts: r.max_attempts,
  retryBackoffMs: r.retry_backoff_ms,
  executorNode: r.executor_node,
  lostReruns: Number(r.lost_reruns),
  rerunIfLost: r.rerun_if_lost === true || r.rerun_if_lost === 1,
});

/** decideReap for a selected row. */
export const reapDecision = (r: ReapRow, now: number): ReapDecision | null =>
  decideReap({ ...lostStateOf(r), leaseExpiresAt: r.lease_expires_at, deadline: r.deadline }, now);

/** What a requeue's log line adds for a lost node: that it was one, and whether a retry was spent. */
export function lostData(decision: { lostNode: boolean; lostRerun: boolean }): Record<string, unknown> {
  return decision.lostNode ? { lostNode: true, retrySpent: !decision.lostRerun } : {};
}
