/** Row → record mapping for the PostgreSQL adapter: jsonb and text[] arrive parsed, bigint as number (db.ts). */
import { rowMappers } from "../store-common/records.js";

export {
  DEFINITION_COLUMNS,
  DEFINITION_FROM,
  INBOX_COLUMNS,
  OUTBOX_COLUMNS,
  RUN_COLUMNS,
} from "../store-common/records.js";

export const TASK_COLUMNS =
  "run_id, task_id, room_id, seq, status, version, claim_version, attempt, max_attempts, action, args, needs, labels, node_pin, priority, concurrency_key, timeout_ms, queue_timeout_ms, retry_backoff_ms, executor_node, executor_boot, lease_expires_at, not_before, deadline, queued_at, started_at, finished_at, exit_code, output, output_bytes, error, output_patterns, output_values, gate, gate_state";

// The driver has decoded jsonb and text[] already.
export const { toRun, toDefinition, toTask, toInbox, toOutbox, toLogEvent, toNode } = rowMappers(
  <T>(v: unknown): T => v as T,
);
