/**
 * The leader's periodic work on PostgreSQL: scheduling (the pure decideSchedule applied to a snapshot
 * read in the same fenced transaction), reaping (the domain's decideReap applied in one fenced
 * transaction), run outcomes (one fenced statement), caps.
 */
import type { RunStatus, TaskStatus } from "../../domain/model.js";
import type { ScheduleDecision } from "../../domain/scheduling.js";
import { decideSchedule } from "../../domain/scheduling.js";
import type { ActiveTask } from "../../domain/schedule-view.js";
import { ScheduleView } from "../../domain/schedule-view.js";
import { ScheduleViews } from "../store-common/schedule-views.js";
import type { TaskRef } from "../../domain/scheduling.js";
import type { GateSpec } from "../../domain/gates.js";
import type { GateState } from "../../domain/gates.js";
import { gateTimeoutError, openGateState, timeOutGate } from "../../domain/gates.js";
import { gateOpenedLine } from "../store-common/gate-writes.js";
import { queueTimedOut } from "../../domain/task-states.js";
import type { ReapDecision } from "../../domain/task-states.js";
import type { ReapRow } from "../store-common/reap.js";
import { REAP_COLUMNS, lostData, reapDecision } from "../store-common/reap.js";
import type {
  CommandContext,
  LeaderFence,
  ReapResult,
  RoomLoad,
  RunOutcome,
  ScheduleResult,
} from "../../ports/store.js";
import type { Db, Tx } from "./db.js";
import { fenceCte, fenceHoldsText, fenceParams, LOG_CTES } from "./guards.js";
import { markHandledInTx } from "./inbox.js";
import { NOW, sessionKey } from "./sql.js";
import { checkRoom, checkRoomCap, DEFAULT_ROOM_CAP } from "../store-common/checks.js";
import { fenceConflict, lockFence } from "./script-driver.js";

export { DEFAULT_ROOM_CAP } from "../store-common/checks.js";

/** The room's ($1) open runs as JSON, and its cap ($2 when never set): what every step reads. */
const OPEN_RUNS_JSON = `(SELECT json_agg(json_build_object('runId', run_id, 'status', status, 'maxParallel', max_parallel))
   FROM runs WHERE room_id = $1 AND status IN ('pending','running','canceling'))`;
const ROOM_CAP_SQL = "coalesce((SELECT cap FROM room_caps WHERE room_id = $1), $2::int)";

/**
 * One scheduling step (docs/architecture.md §4, "Scheduling without rereading the room"): with
 * `incremental`, from the view the last step left under this fence when it still explains the room;
 * otherwise from one snapshot of every task of the room's open runs.
 */
export function scheduleStep(db: Db, fence: LeaderFence, incremental = false): Promise<ScheduleResult> {
  const kept = ScheduleViews.of(db);
  return kept.guard(
    fence,
    db.tx("schedule step", async (tx) => {
      await lockFence(tx, "schedule step", fence);
      const roomId = fence.roomId;
      const previous = incremental ? kept.get(fence) : undefined;
      let planned: { decision: ScheduleDecision; view: ScheduleView } | null = null;
      if (previous !== undefined) {
        // The room's open runs, its cap and its active tasks: what an incremental step needs.
        const { rows } = await tx.query<{
          look: { runs: SnapRun[] | null; active: ActiveTask[] | null; cap: number };
        }>(
          `SELECT json_build_object(
             'runs', ${OPEN_RUNS_JSON},
             'active', (SELECT json_agg(json_build_object('runId', run_id, 'taskId', task_id,
                                                          'concurrencyKey', concurrency_key))
                          FROM tasks WHERE room_id = $1 AND status IN ('queued','running','canceling')),
             'cap', ${ROOM_CAP_SQL}) AS look`,
          [roomId, DEFAULT_ROOM_CAP],
        );
        const look = rows[0]?.look;
        if (look !== undefined && look.runs !== null && previous.sameRuns(look.runs)) {
          const active = look.active ?? [];
          const left = previous.left(active);
          if (left !== null) {
            const ended =
              left.length === 0
                ? []
                : (
                    await tx.query<{ runId: string; taskId: string; status: TaskStatus }>(
                      `SELECT t.run_id AS "runId", t.task_id AS "taskId", t.status
                         FROM unnest($1::text[], $2::text[]) AS m(run_id, task_id)
                         JOIN tasks t ON t.run_id = m.run_id AND t.task_id = m.task_id`,
                      [left.map((r) => r.runId), left.map((r) => r.taskId)],
                    )
                  ).rows;
            if (ended.length === left.length && previous.ended(ended))
              planned = { decision: previous.decide(active, { globalCap: look.cap }), view: previous };
          }
        }
      }
      if (planned === null) {
        // One snapshot of the room's open runs, their tasks and the cap; only this leader moves blocked tasks.
        const { rows } = await tx.query<{
          snapshot: { runs: SnapRun[] | null; tasks: SnapTask[] | null; cap: number };
        }>(
          `SELECT json_build_object(
             'runs', ${OPEN_RUNS_JSON},
             'tasks', (SELECT json_agg(json_build_object('runId', t.run_id, 'taskId', t.task_id, 'status', t.status,
                                                         'needs', t.needs, 'priority', t.priority, 'seq', t.seq,
                                                         'concurrencyKey', t.concurrency_key,
                                                         'isGate', t.gate IS NOT NULL, 'gateOpen', t.gate_state IS NOT NULL))
                         FROM runs r JOIN tasks t ON t.run_id = r.run_id
                        WHERE r.room_id = $1 AND r.status IN ('pending','running','canceling')),
             'cap', ${ROOM_CAP_SQL}) AS snapshot`,
          [roomId, DEFAULT_ROOM_CAP],
        );
        const snap = rows[0]?.snapshot;
        if (snap === undefined || snap.runs === null) {
          kept.drop(fence);
          return { queued: 0, skipped: 0 };
        }
        const room = { runs: snap.runs, tasks: snap.tasks ?? [] };
        planned = { decision: decideSchedule(room, { globalCap: snap.cap }), view: new ScheduleView(room) };
      }
      const { decision, view } = planned;
      // Queued only where every need has succeeded, read from the store in this transaction (a
      // succeeded task never changes again): no view, however stale, starts a task early. Read as
      // one primary-key join; a check inside the UPDATE was planned as a scan per task (35 ms).
      const toQueue = await needsMet(tx, decision.toQueue, view);
      const actor = sessionKey(fence.session);
      const move = async (to: TaskStatus, refs: { runId: string; taskId: string }[]): Promise<number> => {
        if (refs.length === 0) return 0;
        const stamp = to === "queued" ? "queued_at" : "finished_at";
        const moved = await tx.query<{ run_id: string; task_id: string; n: number }>(
          `UPDATE tasks t SET status = $2, version = t.version + 1, ${stamp} = ${NOW}
             FROM unnest($3::text[], $4::text[]) WITH ORDINALITY AS m(run_id, task_id, n)
            WHERE t.run_id = m.run_id AND t.task_id = m.task_id AND t.status = 'blocked'
            RETURNING t.run_id, t.task_id, m.n`,
          [tx.clockParam, to, refs.map((r) => r.runId), refs.map((r) => r.taskId)],
        );
        // Log in decision order (pick order for queued, seq order for skipped).
        const ordered = [...moved.rows].sort((a, b) => a.n - b.n);
        for (const r of ordered)
          tx.log(roomId, { kind: `task.${to}`, runId: r.run_id, taskId: r.task_id, term: fence.term, actor });
        return moved.rows.length;
      };
      const skipped = await move("skipped", decision.toSkip);
      const queued = await move("queued", toQueue);
      let opened = 0;
      for (const t of decision.toOpen) {
        const { rows: specRows } = await tx.query<{ gate: GateSpec }>(
          "SELECT gate FROM tasks WHERE run_id = $1 AND task_id = $2 AND status = 'blocked' AND gate_state IS NULL",
          [t.runId, t.taskId],
        );
        const spec = specRows[0]?.gate;
        if (spec === undefined) continue;
        const { rows: nowRows } = await tx.query<{ now: string }>(`SELECT ${NOW} AS now`, [tx.clockParam]);
        const state = openGateState(Number(nowRows[0]?.now), spec);
        const moved = await tx.query(
          `UPDATE tasks SET gate_state = $3::jsonb, deadline = $4, version = version + 1
            WHERE run_id = $1 AND task_id = $2 AND status = 'blocked' AND gate_state IS NULL`,
          [t.runId, t.taskId, JSON.stringify(state), state.deadline],
        );
        if ((moved.rowCount ?? 0) === 0) continue;
        opened += 1;
        tx.log(roomId, gateOpenedLine(fence, t, spec, state));
      }
      kept.settled(fence, view, decision, queued + skipped + opened);
      if (queued + skipped + opened > 0) tx.touch("tasks", roomId);
      return opened > 0 ? { queued, skipped, opened } : { queued, skipped };
    }),
  );
}

/** Of `refs`, those whose every need is succeeded in the store now. */
async function needsMet(tx: Tx, refs: readonly TaskRef[], view: ScheduleView): Promise<TaskRef[]> {
  const pairs = refs.flatMap((r) => view.needsOf(r.runId, r.taskId).map((n) => [r.runId, n] as const));
  if (pairs.length === 0) return [...refs];
  const { rows } = await tx.query<{ run_id: string; task_id: string }>(
    `SELECT d.run_id, d.task_id FROM unnest($1::text[], $2::text[]) AS m(run_id, task_id)
       JOIN tasks d ON d.run_id = m.run_id AND d.task_id = m.task_id
      WHERE d.status = 'succeeded'`,
    [pairs.map((p) => p[0]), pairs.map((p) => p[1])],
  );
  const done = new Set(rows.map((r) => `${r.run_id}\u0000${r.task_id}`));
  return refs.filter((r) => view.needsOf(r.runId, r.taskId).every((n) => done.has(`${r.runId}\u0000${n}`)));
}

interface SnapRun {
  runId: string;
  status: RunStatus;
  maxParallel: number | null;
}

interface SnapTask {
  runId: string;
  taskId: string;
  status: TaskStatus;
  needs: string[];
  priority: number;
  seq: number;
  concurrencyKey: string | null;
  isGate: boolean;
  gateOpen: boolean;
}

// Running past its deadline, or running/canceling with a lease nobody renewed.
const OVERDUE = `room_id = $2::text AND status IN ('running','canceling')
  AND (lease_expires_at <= ${NOW} OR (status = 'running' AND deadline IS NOT NULL AND deadline <= ${NOW}))`;
const STALE = `room_id = $2::text AND status = 'queued' AND queue_timeout_ms IS NOT NULL
  AND queued_at + queue_timeout_ms <= ${NOW}`;
const GATE_DUE = `room_id = $2::text AND status = 'blocked' AND gate_state IS NOT NULL
  AND deadline IS NOT NULL AND deadline <= ${NOW}`;
const EXPIRED = `room_id = $2::text AND status = 'pending' AND confirm_deadline IS NOT NULL
  AND confirm_deadline <= ${NOW}`;

/**
 * The reaper's look, without a lock or a write: is the fence still held, and is anything due? A
 * leader reaps on every tick and almost always finds nothing, so that costs this one read.
 */
const REAP_DUE_SQL = `SELECT EXISTS (SELECT 1 FROM room_leases WHERE ${fenceHoldsText(2)}) AS fenced,
         EXISTS (SELECT 1 FROM tasks WHERE ${OVERDUE}) OR EXISTS (SELECT 1 FROM tasks WHERE ${STALE})
           OR EXISTS (SELECT 1 FROM runs WHERE ${EXPIRED}) OR EXISTS (SELECT 1 FROM tasks WHERE ${GATE_DUE}) AS due,
         EXISTS (SELECT 1 FROM tasks WHERE room_id = $2 AND status IN ('queued','running','canceling'))
           OR EXISTS (SELECT 1 FROM runs WHERE room_id = $2 AND status = 'pending'
                                           AND confirm_deadline IS NOT NULL)
           OR EXISTS (SELECT 1 FROM tasks WHERE room_id = $2 AND status = 'blocked' AND gate_state IS NOT NULL
                                            AND deadline IS NOT NULL) AS open`;

/**
 * The reaper on PostgreSQL: the domain decides (decideReap for each overdue running or canceling
 * task, queueTimedOut for a queued one), this applies, in one fenced transaction whose rows are
 * locked as read, so a worker's finish or renewal either comes first (and the task is no longer
 * overdue when read) or waits and then finds the version moved. Log lines: expired runs first, then
 * the moved tasks by run and task id.
 */
export async function reap(db: Db, fence: LeaderFence): Promise<ReapResult> {
  const look = await db.one<{ fenced: boolean; due: boolean; open: boolean }>("reap", REAP_DUE_SQL, [
    db.clockParam(),
    ...fenceParams(fence),
  ]);
  if (look[0] === undefined || !look[0].fenced) throw await fenceConflict(db, "reap", fence);
  const result: ReapResult = {
    requeued: 0,
    failed: 0,
    timedOut: 0,
    canceled: 0,
    expiredRuns: 0,
    open: look[0].open,
  };
  if (!look[0].due) return result;

  return db.tx("reap", async (tx) => {
    await lockFence(tx, "reap", fence);
    const roomId = fence.roomId;
    const term = fence.term;
    const actor = sessionKey(fence.session);
    const { rows: nowRows } = await tx.query<{ now: number }>(`SELECT ${NOW} AS now`, [tx.clockParam]);
    const now = Number(nowRows[0]?.now);
    const room = [tx.clockParam, roomId];
    const lines: { runId: string; taskId: string; kind: string; data: Record<string, unknown> }[] = [];
    const moved = (r: ReapRow, to: TaskStatus, data: Record<string, unknown>): void => {
      lines.push({ runId: r.run_id, taskId: r.task_id, kind: `task.${to}`, data });
    };
    const apply = async (r: ReapRow, set: string, values: unknown[]): Promise<boolean> =>
      ((
        await tx.query(
          `UPDATE tasks SET ${set}, version = version + 1 WHERE run_id = $1 AND task_id = $2 AND version = $3`,
          [r.run_id, r.task_id, r.version, ...values],
        )
      ).rowCount ?? 0) === 1;

    const overdue = await tx.query<ReapRow>(
      `SELECT ${REAP_COLUMNS} FROM tasks WHERE ${OVERDUE} FOR UPDATE`,
      room,
    );
    for (const r of overdue.rows) {
      const decision = reapDecision(r, now);
      if (decision === null) continue;
      const reason = decision.reason;
      if (decision.to === "canceled") {
        const set = `status = 'canceled', lease_expires_at = NULL, finished_at = $4,
                     error = coalesce(error, 'canceled; the executor stopped renewing')`;
        if (await apply(r, set, [now])) {
          result.canceled++;
          moved(r, "canceled", { reason });
        }
      } else {
        const moves = await moveOverdue(tx, r, decision, now);
        if (moves === null) continue;
        if (decision.to === "queued") result.requeued++;
        else if (decision.to === "timed_out") result.timedOut++;
        else result.failed++;
        moved(r, decision.to, moves);
      }
    }

    const stale = await tx.query<ReapRow & { queued_at: number | null; queue_timeout_ms: number | null }>(
      `SELECT run_id, task_id, status, version, queued_at, queue_timeout_ms FROM tasks WHERE ${STALE} FOR UPDATE`,
      room,
    );
    for (const r of stale.rows) {
      const due = queueTimedOut(
        { status: r.status, queuedAt: r.queued_at, queueTimeoutMs: r.queue_timeout_ms },
        now,
      );
      if (due && (await apply(r, "status = 'timed_out', finished_at = $4, error = 'queue timeout'", [now]))) {
        result.timedOut++;
        moved(r, "timed_out", { reason: "queue timeout" });
      }
    }

    // Open approval gates past their timeout: timed_out or skipped, as the gate declares.
    const gates = await tx.query<ReapRow & { gate: GateSpec; gate_state: GateState }>(
      `SELECT run_id, task_id, status, version, gate, gate_state FROM tasks WHERE ${GATE_DUE} FOR UPDATE`,
      room,
    );
    for (const r of gates.rows) {
      const verdict = timeOutGate(r.gate, r.gate_state, now);
      const set = "status = $4, gate_state = $5::jsonb, deadline = NULL, finished_at = $6, error = $7";
      if (await apply(r, set, [verdict.to, JSON.stringify(verdict.state), now, gateTimeoutError(r.gate)])) {
        if (verdict.to === "timed_out") result.timedOut++;
        lines.push({
          runId: r.run_id,
          taskId: r.task_id,
          kind: "gate.timed_out",
          data: { onTimeout: r.gate.onTimeout },
        });
        moved(r, verdict.to, { reason: "gate timeout" });
      }
    }

    const expired = await tx.query<{ run_id: string }>(
      `UPDATE runs SET status = 'expired', updated_at = ${NOW} WHERE ${EXPIRED} RETURNING run_id`,
      room,
    );
    result.expiredRuns = expired.rows.length;
    if (expired.rows.length > 0) {
      const runIds = expired.rows.map((r) => r.run_id);
      const unstarted = await tx.query<{ run_id: string; task_id: string }>(
        `UPDATE tasks SET status = 'canceled', version = version + 1, finished_at = $2,
                error = coalesce(error, 'canceled before it started')
          WHERE run_id = ANY($1::text[]) AND status IN ('blocked','queued')
          RETURNING run_id, task_id`,
        [runIds, now],
      );
      for (const t of unstarted.rows)
        lines.push({ runId: t.run_id, taskId: t.task_id, kind: "task.canceled", data: {} });
      for (const runId of [...runIds].sort())
        tx.log(roomId, { kind: "run.expired", runId, term, actor, data: { from: "pending" } });
      tx.touch("runs", roomId);
    }

    lines.sort((a, b) => cmp(a.runId, b.runId) || cmp(a.taskId, b.taskId));
    for (const l of lines) tx.log(roomId, { ...l, term, actor });
    if (lines.length > 0) tx.touch("tasks", roomId);
    return result;
  });
}

const cmp = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/**
 * Moves a running task the reaper found overdue, or its worker released (releaseTask), as the
 * domain decided (decideReap, decideLost): back to the queue (attempt + 1; a lost node's rerun also
 * raises max_attempts, so no retry is spent) or to its end. Fenced by the row's version; the log
 * line's data, or null when the row had moved.
 */
export async function moveOverdue(
  tx: Tx,
  r: { run_id: string; task_id: string; version: number; attempt: number },
  decision: Exclude<ReapDecision, { to: "canceled" }>,
  now: number,
): Promise<Record<string, unknown> | null> {
  const where = "version = version + 1 WHERE run_id = $1 AND task_id = $2 AND version = $3";
  const key = [r.run_id, r.task_id, r.version];
  const reason = decision.reason;
  if (decision.to === "queued") {
    const notBefore = now + decision.waitMs;
    const res = await tx.query(
      `UPDATE tasks SET status = 'queued', attempt = attempt + 1, claim_version = NULL, executor_node = NULL,
              executor_boot = NULL, lease_expires_at = NULL, deadline = NULL, not_before = $4,
              queued_at = $5, error = $6, lost_reruns = lost_reruns + $7::int,
              max_attempts = max_attempts + $8::int, ${where}`,
      [...key, notBefore, now, reason, decision.lostNode ? 1 : 0, decision.lostRerun ? 1 : 0],
    );
    if ((res.rowCount ?? 0) !== 1) return null;
    return { reason, attempt: r.attempt, notBefore, ...lostData(decision) };
  }
  const res = await tx.query(
    `UPDATE tasks SET status = $4, lease_expires_at = NULL, finished_at = $5, error = $6,
            lost_reruns = lost_reruns + $7::int, ${where}`,
    [...key, decision.to, now, reason, decision.lostNode ? 1 : 0],
  );
  if ((res.rowCount ?? 0) !== 1) return null;
  return { reason, attempt: r.attempt };
}

/**
 * running → succeeded/failed once every task is terminal; canceling → canceled once every task is
 * terminal (domain/run-status.ts deriveRunOutcome, the same rule as one statement).
 */
const DERIVE_SQL = `WITH ${fenceCte(2)},
  up AS (
    UPDATE runs r SET updated_at = ${NOW},
           status = CASE WHEN r.status = 'canceling' THEN 'canceled'
                         WHEN EXISTS (SELECT 1 FROM tasks t WHERE t.run_id = r.run_id AND t.status NOT IN ('succeeded','skipped'))
                         THEN 'failed' ELSE 'succeeded' END
     WHERE r.room_id = $2::text AND r.status IN ('running','canceling') AND EXISTS (SELECT 1 FROM fence)
       AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.run_id = r.run_id
                        AND t.status IN ('blocked','queued','running','canceling'))
    RETURNING r.run_id, r.dag_id, r.seq, r.status,
              CASE WHEN r.status = 'canceled' THEN 'canceling' ELSE 'running' END AS from_status),
  src AS (
    SELECT $2::text AS room_id, row_number() OVER (ORDER BY seq) AS ord, 'run.' || status AS kind, run_id,
           NULL::text AS task_id, $5::bigint AS term, $6::text AS actor, jsonb_build_object('from', from_status) AS data
      FROM up),
  ${LOG_CTES}
  SELECT EXISTS (SELECT 1 FROM fence) AS fenced,
         coalesce((SELECT json_agg(json_build_object('runId', run_id, 'dagId', dag_id, 'from', from_status, 'to', status)
                                   ORDER BY seq) FROM up), '[]') AS outcomes,
         CASE WHEN EXISTS (SELECT 1 FROM up) THEN pg_notify('dagbot', 'runs:' || $2::text) END`;

export async function deriveRunOutcomes(db: Db, fence: LeaderFence): Promise<RunOutcome[]> {
  const rows = await db.one<{ fenced: boolean; outcomes: RunOutcome[] }>("derive run outcomes", DERIVE_SQL, [
    db.clockParam(),
    ...fenceParams(fence),
    sessionKey(fence.session),
  ]);
  const r = rows[0];
  if (r === undefined || !r.fenced) throw await fenceConflict(db, "derive run outcomes", fence);
  if (r.outcomes.length > 0) db.committed("runs", fence.roomId);
  return r.outcomes;
}

export async function setRoomCap(
  db: Db,
  roomId: string,
  cap: number,
  ctx?: CommandContext<{ previous: number }>,
): Promise<{ previous: number }> {
  checkRoomCap(cap);
  return db.tx("set room cap", async (tx) => {
    const fence = ctx?.fence;
    if (ctx !== undefined) {
      await lockFence(tx, "set room cap", ctx.fence);
      checkRoom("set room cap", ctx, roomId);
    }
    // The old value comes back from the same statement that replaces it (FOR UPDATE of the old row).
    const { rows } = await tx.query<{ previous: number | null }>(
      `WITH old AS (SELECT cap FROM room_caps WHERE room_id = $1 FOR UPDATE),
            upsert AS (INSERT INTO room_caps (room_id, cap) VALUES ($1, $2)
                       ON CONFLICT (room_id) DO UPDATE SET cap = excluded.cap)
       SELECT (SELECT cap FROM old) AS previous`,
      [roomId, cap],
    );
    const previous = rows[0]?.previous ?? DEFAULT_ROOM_CAP;
    tx.log(roomId, {
      kind: "cap.set",
      term: fence?.term ?? null,
      actor: fence === undefined ? null : sessionKey(fence.session),
      data: { cap },
    });
    const answer = ctx?.inboxEventId === undefined ? null : ctx.answer({ previous });
    if (answer !== null && ctx?.inboxEventId !== undefined)
      await markHandledInTx(tx, ctx.fence, ctx.inboxEventId, answer);
    tx.touch("cap", roomId);
    return { previous };
  });
}

export async function initRoomCap(db: Db, roomId: string, cap: number): Promise<boolean> {
  checkRoomCap(cap);
  return db.tx("init room cap", async (tx) => {
    const { rowCount } = await tx.query(
      "INSERT INTO room_caps (room_id, cap) VALUES ($1, $2) ON CONFLICT (room_id) DO NOTHING",
      [roomId, cap],
    );
    const inserted = rowCount === 1;
    if (inserted) {
      tx.log(roomId, { kind: "cap.set", term: null, actor: null, data: { cap, initial: true } });
      tx.touch("cap", roomId);
    }
    return inserted;
  });
}

export async function getRoomCap(db: Db, roomId: string): Promise<number> {
  const rows = await db.one<{ cap: number }>("get room cap", "SELECT cap FROM room_caps WHERE room_id = $1", [
    roomId,
  ]);
  return rows[0]?.cap ?? DEFAULT_ROOM_CAP;
}

/**
 * The room's cap, active count and held keys in one statement (one round trip). Its task rows are
 * the room's active ones, found through tasks_open.
 */
export async function roomLoad(db: Db, roomId: string): Promise<RoomLoad> {
  const rows = await db.one<{ cap: number | null; active: string; keys: RoomLoad["keys"] | null }>(
    "room load",
    `WITH active AS (
       SELECT t.seq, t.concurrency_key, t.task_id, t.run_id FROM tasks t
        WHERE t.room_id = $1 AND t.status IN ('blocked','queued','running','canceling')
          AND t.status IN ('queued','running','canceling'))
     SELECT (SELECT cap FROM room_caps WHERE room_id = $1) AS cap,
            (SELECT count(*) FROM active) AS active,
            (SELECT json_agg(json_build_object('key', a.concurrency_key, 'dagId', r.dag_id, 'taskId', a.task_id)
                             ORDER BY a.seq)
               FROM active a JOIN runs r ON r.run_id = a.run_id
              WHERE a.concurrency_key IS NOT NULL) AS keys`,
    [roomId],
  );
  const row = rows[0];
  return { cap: row?.cap ?? DEFAULT_ROOM_CAP, active: Number(row?.active ?? 0), keys: row?.keys ?? [] };
}
