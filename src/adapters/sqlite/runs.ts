/**
 * What SQLite's own writes still take from the runs: the task columns the claim returns, and the
 * cancel of a run's unstarted tasks its reaper applies to an expired run. The run operations are
 * written once, in store-common/ops/runs.ts and run-reads.ts.
 */
import { cancelUnstarted } from "../store-common/ops/runs.js";
import type { SqliteConnection, Tx } from "./connection.js";
import { runScript } from "./script-driver.js";

export const TASK_COLUMNS = `seq, run_id, task_id, status, version, attempt, max_attempts, action, args, needs, labels,
  node_pin, priority, concurrency_key, timeout_ms, queue_timeout_ms, retry_backoff_ms, executor_node, executor_boot,
  lease_expires_at, not_before, deadline, queued_at, started_at, finished_at, exit_code, output, output_bytes, error,
  output_patterns, output_values, gate, gate_state, for_each, fan_out, fan_out_limit, item`;

/** blocked/queued → canceled for a run that will never start them (store-common/ops/runs.ts). Returns how many. */
export function cancelUnstartedTasks(
  c: SqliteConnection,
  tx: Tx,
  runId: string,
  roomId: string,
  term: number,
  actor: string,
): number {
  return runScript(c, tx, cancelUnstarted(runId, roomId, term, actor));
}
