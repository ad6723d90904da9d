/**
 * The reaper (docs/architecture.md §3, "Task lease"), written once for both stores: the domain
 * decides (decideReap for each overdue running or canceling task, queueTimedOut for a queued one,
 * timeOutGate for an open gate), this applies each decision with an UPDATE guarded by the row's
 * version, in one fenced transaction whose rows are locked as read on PostgreSQL, so a worker's
 * finish or renewal either comes first (and the task is no longer overdue when read) or waits and
 * then finds the version moved. Log lines: expired runs first, then the moved tasks by run and task id.
 */
import type { GateSpec, GateState } from "../../../domain/gates.js";
import { gateTimeoutError, timeOutGate } from "../../../domain/gates.js";
import type { TaskStatus } from "../../../domain/model.js";
import type { ReapDecision } from "../../../domain/task-states.js";
import { queueTimedOut } from "../../../domain/task-states.js";
import type { LeaderFence, ReapResult } from "../../../ports/store.js";
import type { LogLine } from "../records.js";
import { sessionKey } from "../records.js";
import type { ReapRow } from "../reap.js";
import { lostData, REAP_COLUMNS, reapDecision } from "../reap.js";
import type { Script } from "../script.js";
import { log, mappers, now, p, rows, run, sql, touch } from "../script.js";
import { fenceConflict, FENCE_HOLDS, fenceValues, holdFence } from "./fence.js";

// Running past its deadline, or running/canceling with a lease nobody renewed.
const OVERDUE = sql(
  "overdue running tasks",
)`status IN ('running','canceling') AND room_id = ${p.text("roomId")}
  AND (lease_expires_at <= ${p.now} OR (status = 'running' AND deadline IS NOT NULL AND deadline <= ${p.now}))`;
const STALE = sql("queued tasks past their queue timeout")`status = 'queued' AND room_id = ${p.text("roomId")}
  AND queue_timeout_ms IS NOT NULL AND queued_at + queue_timeout_ms <= ${p.now}`;
const GATE_DUE = sql("open gates past their timeout")`status = 'blocked' AND gate_state IS NOT NULL
  AND room_id = ${p.text("roomId")} AND deadline IS NOT NULL AND deadline <= ${p.now}`;
const EXPIRED = sql("pending runs past their confirmation window")`room_id = ${p.text("roomId")}
  AND status = 'pending' AND confirm_deadline IS NOT NULL AND confirm_deadline <= ${p.now}`;

/**
 * Whether the room holds anything that could expire. Each half names a partial index's own
 * predicate (SQLite: tasks_claim, tasks_executor, tasks_gates_open), so SQLite reads the open tasks
 * only; one IN list over all three statuses matched no index and scanned every task of every room.
 */
export const REAP_OPEN = sql("anything of the room that could expire")`(EXISTS (SELECT 1 FROM tasks
      WHERE status = 'queued' AND room_id = ${p.text("roomId")})
    OR EXISTS (SELECT 1 FROM tasks WHERE status IN ('running','canceling') AND room_id = ${p.text("roomId")})
    OR EXISTS (SELECT 1 FROM runs WHERE room_id = ${p.text("roomId")} AND status = 'pending'
                                     AND confirm_deadline IS NOT NULL)
    OR EXISTS (SELECT 1 FROM tasks WHERE status = 'blocked' AND gate_state IS NOT NULL
                                     AND room_id = ${p.text("roomId")} AND deadline IS NOT NULL))`;

/**
 * The reaper's look, without a lock or a write: is the fence still held, is anything due, and could
 * anything expire later? A leader reaps on every tick and almost always finds nothing due.
 */
const LOOK = sql("the reaper's look")`
  SELECT (SELECT count(*) FROM room_leases WHERE ${FENCE_HOLDS}) AS held,
         (EXISTS (SELECT 1 FROM tasks WHERE ${OVERDUE}) OR EXISTS (SELECT 1 FROM tasks WHERE ${STALE})
          OR EXISTS (SELECT 1 FROM runs WHERE ${EXPIRED}) OR EXISTS (SELECT 1 FROM tasks WHERE ${GATE_DUE})) AS due,
         ${REAP_OPEN} AS open`;

const LOCK = p.only({ postgres: " FOR UPDATE" });
const OVERDUE_ROWS = sql("overdue running tasks, locked")`
  SELECT ${REAP_COLUMNS} FROM tasks WHERE ${OVERDUE}${LOCK}`;
const STALE_ROWS = sql("queued tasks past their queue timeout, locked")`
  SELECT run_id, task_id, status, version, queued_at, queue_timeout_ms FROM tasks WHERE ${STALE}${LOCK}`;
const GATE_ROWS = sql("open gates past their timeout, locked")`
  SELECT run_id, task_id, status, version, gate, gate_state FROM tasks WHERE ${GATE_DUE}${LOCK}`;

const KEY = sql("a task at the version read")`run_id = ${p.text("runId")} AND task_id = ${p.text("taskId")}
  AND version = ${p.int("version")}`;

const CANCEL = sql("an overdue canceling task, canceled")`
  UPDATE tasks SET status = 'canceled', version = version + 1, lease_expires_at = NULL, finished_at = ${p.int("at")},
         error = coalesce(error, 'canceled; the executor stopped renewing')
   WHERE ${KEY}`;

const QUEUE_TIMEOUT = sql("a queued task, timed out")`
  UPDATE tasks SET status = 'timed_out', version = version + 1, finished_at = ${p.int("at")}, error = 'queue timeout'
   WHERE ${KEY}`;

const GATE_TIMEOUT = sql("an open gate, timed out")`
  UPDATE tasks SET status = ${p.text("to")}, version = version + 1, gate_state = ${p.json("state")}, deadline = NULL,
         finished_at = ${p.int("at")}, error = ${p.text("error")}
   WHERE ${KEY} AND status = 'blocked'`;

const REQUEUE = sql("an overdue task, back to the queue")`
  UPDATE tasks SET status = 'queued', version = version + 1, attempt = attempt + 1, claim_version = NULL,
         executor_node = NULL, executor_boot = NULL, lease_expires_at = NULL, deadline = NULL,
         not_before = ${p.int("notBefore")}, queued_at = ${p.int("at")}, error = ${p.text("reason")},
         lost_reruns = lost_reruns + ${p.int("lostNode")}, max_attempts = max_attempts + ${p.int("lostRerun")}
   WHERE ${KEY}`;

const END = sql("an overdue task, to its end")`
  UPDATE tasks SET status = ${p.text("to")}, version = version + 1, lease_expires_at = NULL, finished_at = ${p.int("at")},
         error = ${p.text("reason")}, lost_reruns = lost_reruns + ${p.int("lostNode")}
   WHERE ${KEY}`;

const EXPIRE = sql("pending runs past their confirmation window, expired")`
  UPDATE runs SET status = 'expired', updated_at = ${p.now} WHERE ${EXPIRED} RETURNING run_id`;

const CANCEL_UNSTARTED = sql("the unstarted tasks of expired runs, canceled")`
  UPDATE tasks SET status = 'canceled', version = version + 1, finished_at = ${p.now},
         error = coalesce(error, 'canceled before it started')
   WHERE run_id${p.inList("runIds")} AND status IN ('blocked','queued')
  RETURNING run_id, task_id`;

/**
 * Moves a running task the reaper found overdue, or its worker released (releaseTask), as the
 * domain decided (decideReap, decideLost): back to the queue (attempt + 1; a lost node's rerun also
 * raises max_attempts, so no retry is spent) or to its end. Guarded by the row's version: how many
 * rows moved (0 or 1), and the log line's data.
 */
export function* moveOverdue(
  r: { run_id: string; task_id: string; version: number; attempt: number },
  decision: Exclude<ReapDecision, { to: "canceled" }>,
  at: number,
): Script<{ moved: number; data: Record<string, unknown> }> {
  const reason = decision.reason;
  const key = { runId: r.run_id, taskId: r.task_id, version: r.version, at, reason };
  const lostNode = decision.lostNode ? 1 : 0;
  if (decision.to === "queued") {
    const notBefore = at + decision.waitMs;
    const moved = yield* run(REQUEUE, { ...key, notBefore, lostNode, lostRerun: decision.lostRerun ? 1 : 0 });
    return { moved, data: { reason, attempt: r.attempt, notBefore, ...lostData(decision) } };
  }
  const moved = yield* run(END, { ...key, to: decision.to, lostNode });
  return { moved, data: { reason, attempt: r.attempt } };
}

interface Look {
  held: number | string;
  due: boolean | number;
  open: boolean | number;
}

const truth = (v: boolean | number): boolean => v === true || v === 1;

/**
 * The look alone (for PostgreSQL's pool, outside a transaction): ConflictError when the fence no
 * longer holds; otherwise whether anything is due, and the result of a reap that finds nothing.
 */
export function* reapLook(fence: LeaderFence): Script<{ due: boolean; result: ReapResult }> {
  const look = (yield* rows<Look>(LOOK, fenceValues(fence)))[0];
  if (look === undefined || Number(look.held) === 0) throw yield* fenceConflict("reap", fence);
  const result = { requeued: 0, failed: 0, timedOut: 0, canceled: 0, expiredRuns: 0, open: truth(look.open) };
  return { due: truth(look.due), result };
}

export function* reap(fence: LeaderFence): Script<ReapResult> {
  yield* holdFence("reap", fence);
  const { due, result } = yield* reapLook(fence);
  if (!due) return result;
  const m = yield* mappers();
  const roomId = fence.roomId;
  const at = yield* now();
  const lines: (LogLine & { runId: string; taskId: string })[] = [];
  const moved = (
    r: { run_id: string; task_id: string },
    to: TaskStatus,
    data: Record<string, unknown>,
  ): void => {
    lines.push({ runId: r.run_id, taskId: r.task_id, kind: `task.${to}`, data });
  };
  const key = (r: { run_id: string; task_id: string; version: number }) => ({
    runId: r.run_id,
    taskId: r.task_id,
    version: r.version,
    at,
  });

  for (const r of yield* rows<ReapRow>(OVERDUE_ROWS, { roomId })) {
    const decision = reapDecision(r, at);
    if (decision === null) continue;
    if (decision.to === "canceled") {
      if ((yield* run(CANCEL, key(r))) === 1) {
        result.canceled++;
        moved(r, "canceled", { reason: decision.reason });
      }
      continue;
    }
    const { moved: n, data } = yield* moveOverdue(r, decision, at);
    if (n !== 1) continue;
    if (decision.to === "queued") result.requeued++;
    else if (decision.to === "timed_out") result.timedOut++;
    else result.failed++;
    moved(r, decision.to, data);
  }

  for (const r of yield* rows<ReapRow & { queued_at: number | null; queue_timeout_ms: number | null }>(
    STALE_ROWS,
    { roomId },
  )) {
    const timedOut = queueTimedOut(
      { status: r.status, queuedAt: r.queued_at, queueTimeoutMs: r.queue_timeout_ms },
      at,
    );
    if (timedOut && (yield* run(QUEUE_TIMEOUT, key(r))) === 1) {
      result.timedOut++;
      moved(r, "timed_out", { reason: "queue timeout" });
    }
  }

  // Open approval gates past their timeout: timed_out or skipped, as the gate declares.
  for (const r of yield* rows<ReapRow & { gate: unknown; gate_state: unknown }>(GATE_ROWS, { roomId })) {
    const spec = m.json<GateSpec>(r.gate);
    const verdict = timeOutGate(spec, m.json<GateState>(r.gate_state), at);
    const values = { ...key(r), to: verdict.to, state: verdict.state, error: gateTimeoutError(spec) };
    if ((yield* run(GATE_TIMEOUT, values)) !== 1) continue;
    if (verdict.to === "timed_out") result.timedOut++;
    lines.push({
      runId: r.run_id,
      taskId: r.task_id,
      kind: "gate.timed_out",
      data: { onTimeout: spec.onTimeout },
    });
    moved(r, verdict.to, { reason: "gate timeout" });
  }

  const term = fence.term;
  const actor = sessionKey(fence.session);
  const expired = (yield* rows<{ run_id: string }>(EXPIRE, { roomId })).map((r) => r.run_id);
  result.expiredRuns = expired.length;
  if (expired.length > 0) {
    for (const t of yield* rows<{ run_id: string; task_id: string }>(CANCEL_UNSTARTED, { runIds: expired }))
      lines.push({ runId: t.run_id, taskId: t.task_id, kind: "task.canceled", data: {} });
    for (const runId of [...expired].sort())
      yield* log(roomId, { kind: "run.expired", runId, term, actor, data: { from: "pending" } });
    yield* touch("runs", roomId);
  }

  lines.sort((a, b) => cmp(a.runId, b.runId) || cmp(a.taskId, b.taskId));
  for (const l of lines) yield* log(roomId, { ...l, term, actor });
  if (lines.length > 0) yield* touch("tasks", roomId);
  return result;
}

const cmp = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);
