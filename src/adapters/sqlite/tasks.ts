/** The worker's side on SQLite: claim one fitting queued task, renew its lease, record its end, all fenced. */
import type { TaskStatus } from "../../domain/model.js";
import { ConflictError, NotFoundError } from "../../ports/errors.js";
import type { ClaimBatch, ClaimedTask, NodeOffer, TaskResult, TaskToken } from "../../ports/store.js";
import { CLAIM_LEFT_MORE } from "../../ports/store.js";
import type { LogEntry, SqliteConnection, Tx } from "./connection.js";
import { LIMIT } from "./connection.js";
import { sessionKey } from "./connection.js";
import { toTask } from "./rows.js";
import { TASK_COLUMNS } from "./runs.js";
import { checkClaim, outputBytes, outputTail, outputValuesJson } from "../store-common/checks.js";
import { checkTaskOutcome, decideFinish } from "../../domain/task-states.js";
import { holderKey } from "../store-common/records.js";

/**
 * The claim query (docs/query-plans.md). INDEXED BY pins the partial index of queued tasks in claim
 * order: the walk stops at the first fitting row and never visits a claimed or finished one.
 */
export const CLAIM_SQL = `SELECT seq, version FROM tasks INDEXED BY tasks_claim
  WHERE status = 'queued'
    AND room_id IN (SELECT value FROM json_each(?))
    AND (not_before IS NULL OR not_before <= ?)
    AND (node_pin IS NULL OR node_pin = ?)
    AND action IN (SELECT value FROM json_each(?))
    AND NOT EXISTS (SELECT 1 FROM json_each(tasks.labels) AS need
                     WHERE need.value NOT IN (SELECT value FROM json_each(?)))
  ORDER BY priority DESC, seq
  ${LIMIT}`;

/** The queued tasks that fit this node: the claim's filter, on the same partial index. */
const FITS = `FROM tasks INDEXED BY tasks_claim
  WHERE status = 'queued'
    AND room_id IN (SELECT value FROM json_each(?))
    AND (node_pin IS NULL OR node_pin = ?)
    AND action IN (SELECT value FROM json_each(?))
    AND NOT EXISTS (SELECT 1 FROM json_each(tasks.labels) AS need
                     WHERE need.value NOT IN (SELECT value FROM json_each(?)))`;

/** Only when no fitting task is left ready: the soonest not_before of those still waiting. */
const NEXT_SQL = `SELECT min(not_before) AS next ${FITS} AND not_before > ?`;

export function claimTask(c: SqliteConnection, offer: NodeOffer): Promise<ClaimedTask | null> {
  return claimTasks(c, offer, 1).then((b) => b.claimed[0] ?? null);
}

/** Up to `max` claims in one write transaction, each picked and moved as claimTask would. */
export function claimTasks(c: SqliteConnection, offer: NodeOffer, max: number): Promise<ClaimBatch> {
  checkClaim(offer, max);
  return c.write("claim task", (tx) => {
    const claim = claimInTx(c, tx, offer, max);
    claim.record();
    return claim.batch;
  });
}

/**
 * The claim inside a write transaction: rows moved, the batch answered; its log lines and change
 * notes are written by `record`, so a caller can put another change's line before them.
 */
function claimInTx(
  c: SqliteConnection,
  tx: Tx,
  offer: NodeOffer,
  max: number,
): { batch: ClaimBatch; record: (finishedIn?: string) => void } {
  const rooms = JSON.stringify(offer.roomIds);
  const actions = JSON.stringify(offer.actions);
  const labels = JSON.stringify(offer.labels);
  const claimed: ClaimedTask[] = [];
  const lines: LogEntry[] = [];
  const claimedRooms = new Set<string>();
  // One more than asked for: a row past `max` is a fitting task left ready, so the batch says
  // "more" without another statement.
  const picks = c.all<{ seq: number; version: number }>(
    CLAIM_SQL,
    rooms,
    tx.now,
    offer.session.nodeId,
    actions,
    labels,
    max + 1,
  );
  for (const pick of picks.slice(0, max)) {
    const row = c.get(
      `UPDATE tasks SET status = 'running', version = version + 1, claim_version = version + 1,
              executor_node = ?, executor_boot = ?, lease_expires_at = ?,
              deadline = CASE WHEN timeout_ms IS NULL THEN NULL ELSE ? + timeout_ms END, started_at = ?,
              output = NULL, output_bytes = NULL
        WHERE seq = ? AND status = 'queued' AND version = ?
        RETURNING room_id, ${TASK_COLUMNS}`,
      offer.session.nodeId,
      offer.session.bootId,
      tx.now + offer.leaseMs,
      tx.now,
      tx.now,
      pick.seq,
      pick.version,
    );
    // Inside BEGIN IMMEDIATE nobody can move the row between the pick and the update.
    if (row === undefined) throw new Error(`claim task: picked task ${pick.seq} moved inside the write lock`);
    const task = toTask(row);
    const roomId = row.room_id as string;
    lines.push({
      roomId,
      kind: "task.running",
      runId: task.runId,
      taskId: task.taskId,
      actor: sessionKey(offer.session),
      data: { attempt: task.attempt, version: task.version },
    });
    claimedRooms.add(roomId);
    claimed.push({
      token: {
        runId: task.runId,
        taskId: task.taskId,
        version: task.version,
        session: offer.session,
        claim: { attempt: task.attempt, retryBackoffMs: task.retryBackoffMs },
      },
      task,
    });
  }
  const more = picks.length > max;
  // A node with ready tasks left claims again at once; when it would wait is asked only otherwise.
  const fits = [rooms, offer.session.nodeId, actions, labels];
  const next = more ? null : (c.get<{ next: number | null }>(NEXT_SQL, ...fits, tx.now)?.next ?? null);
  return {
    batch: { claimed, more, nextReadyInMs: next === null ? null : Math.max(0, next - tx.now) },
    record: (finishedIn) => {
      for (const line of lines) tx.log(line);
      // The claimer is named, so this process's leader knows the node it woke has acted (and
      // whether it goes on by itself). A finish names it in its task's room even when the claim
      // took nothing there: a node that stops serving itself must say so, or the leader would
      // count its free slots as taken and wake nobody for them.
      const claimer = `${more ? CLAIM_LEFT_MORE : ""}${offer.session.nodeId}`;
      if (finishedIn !== undefined) claimedRooms.add(finishedIn);
      for (const room of claimedRooms) tx.touch("tasks", room, [claimer]);
    },
  };
}

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

export function finishTask(
  c: SqliteConnection,
  token: TaskToken,
  result: TaskResult,
): Promise<{ status: TaskStatus }> {
  // Checked before the transaction, as PostgreSQL does: an outcome like "running" is bad input.
  const outcome = checkTaskOutcome("finish task", result.outcome);
  const values = outputValuesJson(result);
  return c.write("finish task", (tx) => ({
    status: finishInTx(c, tx, token, result, outcome, values, fenced(c, "finish task", token)),
  }));
}

/**
 * finishTask then claimTasks in one write transaction. The claim is picked first, so it sees the
 * tasks as they were before the finish (as PostgreSQL's single statement does), and its log lines
 * are written after the finish's; a refused finish throws and rolls the claim back.
 */
export function finishAndClaim(
  c: SqliteConnection,
  token: TaskToken,
  result: TaskResult,
  offer: NodeOffer,
  max: number,
): Promise<{ status: TaskStatus; batch: ClaimBatch }> {
  const outcome = checkTaskOutcome("finish task", result.outcome);
  const values = outputValuesJson(result);
  checkClaim(offer, max);
  return c.write("finish task", (tx) => {
    // Fenced first, so a refused finish claims nothing; the claim cannot move this running row.
    const row = fenced(c, "finish task", token);
    const claim = claimInTx(c, tx, offer, max);
    const status = finishInTx(c, tx, token, result, outcome, values, row);
    claim.record(row.room_id);
    return { status, batch: claim.batch };
  });
}

function finishInTx(
  c: SqliteConnection,
  tx: Tx,
  token: TaskToken,
  result: TaskResult,
  outcome: TaskResult["outcome"],
  values: string | null,
  row: FenceRow,
): TaskStatus {
  const decision = decideFinish(
    {
      status: row.status,
      attempt: row.attempt,
      maxAttempts: row.max_attempts,
      retryBackoffMs: row.retry_backoff_ms,
    },
    outcome,
  );
  if (decision.kind === "refused")
    throw new ConflictError(
      "finish task",
      { status: decision.expected, outcome: "canceled" },
      { status: row.status },
    );
  const output = outputTail(result.output);
  const bytes = outputBytes(result.output, result.outputBytes);
  const to: TaskStatus = decision.to;
  let notBefore: number | null = null;
  if (decision.kind === "retry") {
    notBefore = tx.now + decision.waitMs;
    c.run(
      `UPDATE tasks SET status = 'queued', version = version + 1, attempt = attempt + 1, claim_version = NULL,
              executor_node = NULL, executor_boot = NULL, lease_expires_at = NULL, deadline = NULL,
              not_before = ?, queued_at = ?, exit_code = ?, output = ?, output_bytes = ?, error = ?
        WHERE seq = ? AND version = ?`,
      notBefore,
      tx.now,
      result.exitCode,
      output,
      bytes,
      result.error,
      row.seq,
      row.version,
    );
  } else {
    // Outputs land with the success only, in this fenced write: a stale attempt's never do.
    c.run(
      `UPDATE tasks SET status = ?, version = version + 1, lease_expires_at = NULL, finished_at = ?,
              exit_code = ?, output = ?, output_bytes = ?, error = ?,
              output_values = CASE WHEN ? = 'succeeded' THEN ? ELSE output_values END
        WHERE seq = ? AND version = ?`,
      to,
      tx.now,
      result.exitCode,
      output,
      bytes,
      result.error,
      to,
      values,
      row.seq,
      row.version,
    );
  }
  tx.log({
    roomId: row.room_id,
    kind: `task.${to}`,
    runId: token.runId,
    taskId: token.taskId,
    actor: sessionKey(token.session),
    data: {
      outcome: result.outcome,
      attempt: row.attempt,
      exitCode: result.exitCode,
      notBefore,
      error: result.error,
    },
  });
  tx.touch("tasks", row.room_id);
  // A retry is claimable once its backoff passes, with no scheduling step: the leader must look.
  if (decision.kind === "retry") tx.touch("ready", row.room_id);
  else tx.touch("done", row.room_id);
  return to;
}
