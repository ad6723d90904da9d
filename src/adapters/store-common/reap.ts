/**
 * What both stores' reapers read of an overdue task, and the domain's decision for it: the stores
 * only apply what decideReap says.
 */
import type { TaskStatus } from "../../domain/model.js";
import type { ReapDecision } from "../../domain/task-states.js";
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
}

/** decideReap for a selected row. */
export const reapDecision = (r: ReapRow, now: number): ReapDecision | null =>
  decideReap(
    {
      status: r.status,
      attempt: r.attempt,
      maxAttempts: r.max_attempts,
      retryBackoffMs: r.retry_backoff_ms,
      leaseExpiresAt: r.lease_expires_at,
      deadline: r.deadline,
    },
    now,
  );
