/** The worker's release of an attempt on SQLite (claims and finishes: store-common/ops/claims.ts, finish.ts). */
import type { TaskStatus } from "../../domain/model.js";
import { ConflictError, NotFoundError } from "../../ports/errors.js";
import type { TaskToken } from "../../ports/store.js";
import type { SqliteConnection } from "./connection.js";
import { sessionKey } from "./connection.js";
import { decideLost } from "../../domain/task-states.js";
import type { ReapRow as CommonReapRow } from "../store-common/reap.js";
import { REAP_COLUMNS, lostStateOf } from "../store-common/reap.js";
import { moveOverdue } from "./scheduler.js";
import { holderKey } from "../store-common/records.js";

interface FenceRow {
  seq: number;
  room_id: string;
  status: TaskStatus;
  version: number;
  claim_version: number | null;
  executor_node: string | null;
  executor_boot: string | null;
  attempt: number;
  max_attempts: number;
  retry_backoff_ms: number;
}

/** The row if the token still holds it (running or canceling, same claim, same session); else a typed error. */
function fenced(c: SqliteConnection, operation: string, token: TaskToken): FenceRow {
  const row = c.get<FenceRow>(
    `SELECT seq, room_id, status, version, claim_version, executor_node, executor_boot, attempt, max_attempts, retry_backoff_ms
       FROM tasks WHERE run_id = ? AND task_id = ?`,
    token.runId,
    token.taskId,
  );
  if (row === undefined) throw new NotFoundError(operation, { runId: token.runId, taskId: token.taskId });
  if (
    (row.status === "running" || row.status === "canceling") &&
    row.claim_version === token.version &&
    row.executor_node === token.session.nodeId &&
    row.executor_boot === token.session.bootId
  )
    return row;
  throw new ConflictError(
    operation,
    { status: ["running", "canceling"], version: token.version, executor: sessionKey(token.session) },
    {
      status: row.status,
      version: row.claim_version,
      executor: holderKey(row.executor_node, row.executor_boot),
    },
  );
}

/**
 * The worker gives up an attempt whose action it stopped for a store it could not reach (docs/
 * architecture.md §3, "Task lease"): decided as a lost attempt with its words (decideLost), moved as
 * the reaper moves one (moveOverdue), fenced by the token; only a running task (a canceling one is
 * the reaper's to cancel).
 */
export function releaseTask(
  c: SqliteConnection,
  token: TaskToken,
  why: string,
): Promise<{ status: TaskStatus }> {
  return c.write("release task", (tx) => {
    const held = fenced(c, "release task", token);
    if (held.status !== "running")
      throw new ConflictError("release task", { status: "running" }, { status: held.status });
    const r = c.get<CommonReapRow & { seq: number }>(
      `SELECT seq, ${REAP_COLUMNS} FROM tasks WHERE seq = ?`,
      held.seq,
    )!;
    const decision = decideLost(lostStateOf(r), why);
    const { data } = moveOverdue(c, tx.now, r, decision);
    tx.log({
      roomId: held.room_id,
      kind: `task.${decision.to}`,
      runId: token.runId,
      taskId: token.taskId,
      actor: sessionKey(token.session),
      data,
    });
    tx.touch("tasks", held.room_id);
    tx.touch(decision.to === "queued" ? "ready" : "done", held.room_id);
    return { status: decision.to };
  });
}
