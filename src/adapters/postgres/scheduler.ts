/**
 * The leader's periodic work on PostgreSQL: scheduling (the pure decideSchedule applied to a snapshot
 * read in the same fenced transaction), reaping and run outcomes (one fenced statement each), caps.
 */
import type { RunStatus, TaskStatus } from "../../domain/model.js";
import { decideSchedule } from "../../domain/scheduling.js";
import type {
  CommandContext,
  LeaderFence,
  ReapResult,
  RunOutcome,
  ScheduleResult,
} from "../../ports/store.js";
import type { Db } from "./db.js";
import { fenceCte, fenceParams, LOG_CTES } from "./guards.js";
import { markHandledInTx } from "./inbox.js";
import { NOW, sessionKey } from "./sql.js";
import { BACKOFF } from "./tasks.js";
import { checkRoom, checkRoomCap, DEFAULT_ROOM_CAP } from "../store-common/checks.js";
import { capOutcome } from "../store-common/run-outcomes.js";

export { DEFAULT_ROOM_CAP } from "../store-common/checks.js";

export function scheduleStep(db: Db, fence: LeaderFence): Promise<ScheduleResult> {
  return db.tx("schedule step", async (tx) => {
    await db.lockFence(tx, "schedule step", fence);
    const roomId = fence.roomId;
    // One snapshot of the room's open runs, their tasks and the cap; only this leader moves blocked tasks.
    const { rows } = await tx.query<{
      snapshot: { runs: SnapRun[] | null; tasks: SnapTask[] | null; cap: number };
    }>(
      `SELECT json_build_object(
         'runs', (SELECT json_agg(json_build_object('runId', run_id, 'status', status, 'maxParallel', max_parallel))
                    FROM runs WHERE room_id = $1 AND status IN ('pending','running','canceling')),
         'tasks', (SELECT json_agg(json_build_object('runId', t.run_id, 'taskId', t.task_id, 'status', t.status,
                                                     'needs', t.needs, 'priority', t.priority, 'seq', t.seq,
                                                     'concurrencyKey', t.concurrency_key))
                     FROM runs r JOIN tasks t ON t.run_id = r.run_id
                    WHERE r.room_id = $1 AND r.status IN ('pending','running','canceling')),
         'cap', coalesce((SELECT cap FROM room_caps WHERE room_id = $1), $2::int)) AS snapshot`,
      [roomId, DEFAULT_ROOM_CAP],
    );
    const snap = rows[0]?.snapshot;
    if (snap === undefined || snap.runs === null) return { queued: 0, skipped: 0 };
    const decision = decideSchedule({ runs: snap.runs, tasks: snap.tasks ?? [] }, { globalCap: snap.cap });
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
    const queued = await move("queued", decision.toQueue);
    if (queued + skipped > 0) tx.touch("tasks", roomId);
    return { queued, skipped };
  });
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
}

// Running past its deadline, or running/canceling with a lease nobody renewed.
const OVERDUE = `room_id = $2::text AND status IN ('running','canceling')
  AND (lease_expires_at <= ${NOW} OR (status = 'running' AND deadline IS NOT NULL AND deadline <= ${NOW}))`;
const PAST_DEADLINE = `(deadline IS NOT NULL AND deadline <= ${NOW})`;

/**
 * Every reap transition in ONE fenced statement. The sets are disjoint (by status and attempts
 * left), so no row is touched twice; every sub-statement sees the same snapshot and the same now.
 */
const REAP_SQL = `WITH ${fenceCte(2)},
  gone AS (
    UPDATE tasks SET status = 'canceled', version = version + 1, lease_expires_at = NULL, finished_at = ${NOW},
           error = coalesce(error, 'canceled; the executor stopped renewing')
     WHERE ${OVERDUE} AND status = 'canceling' AND EXISTS (SELECT 1 FROM fence)
    RETURNING run_id, task_id, 'canceled'::text AS to_status, jsonb_build_object('reason', 'lease expired') AS data),
  again AS (
    UPDATE tasks SET status = 'queued', version = version + 1, attempt = attempt + 1, claim_version = NULL,
           executor_node = NULL, executor_boot = NULL, lease_expires_at = NULL, deadline = NULL,
           not_before = ${NOW} + ${BACKOFF}, queued_at = ${NOW},
           error = CASE WHEN ${PAST_DEADLINE} THEN 'deadline passed' ELSE 'lease expired' END
     WHERE ${OVERDUE} AND status = 'running' AND attempt < max_attempts AND EXISTS (SELECT 1 FROM fence)
    RETURNING run_id, task_id, 'queued'::text AS to_status,
              jsonb_build_object('reason', error, 'attempt', attempt - 1, 'notBefore', not_before) AS data),
  dead AS (
    UPDATE tasks SET status = CASE WHEN ${PAST_DEADLINE} THEN 'timed_out' ELSE 'failed' END,
           version = version + 1, lease_expires_at = NULL, finished_at = ${NOW},
           error = CASE WHEN ${PAST_DEADLINE} THEN 'deadline passed' ELSE 'lease expired' END
     WHERE ${OVERDUE} AND status = 'running' AND attempt >= max_attempts AND EXISTS (SELECT 1 FROM fence)
    RETURNING run_id, task_id, status AS to_status, jsonb_build_object('reason', error, 'attempt', attempt) AS data),
  stale AS (
    UPDATE tasks SET status = 'timed_out', version = version + 1, finished_at = ${NOW}, error = 'queue timeout'
     WHERE room_id = $2::text AND status = 'queued' AND queue_timeout_ms IS NOT NULL
       AND queued_at + queue_timeout_ms <= ${NOW} AND EXISTS (SELECT 1 FROM fence)
    RETURNING run_id, task_id, 'timed_out'::text AS to_status, jsonb_build_object('reason', 'queue timeout') AS data),
  expired AS (
    UPDATE runs SET status = 'expired', updated_at = ${NOW}
     WHERE room_id = $2::text AND status = 'pending' AND confirm_deadline IS NOT NULL
       AND confirm_deadline <= ${NOW} AND EXISTS (SELECT 1 FROM fence)
    RETURNING run_id),
  unstarted AS (
    UPDATE tasks SET status = 'canceled', version = version + 1, finished_at = ${NOW},
           error = coalesce(error, 'canceled before it started')
     WHERE run_id IN (SELECT run_id FROM expired) AND status IN ('blocked','queued')
    RETURNING run_id, task_id, 'canceled'::text AS to_status, '{}'::jsonb AS data),
  moved AS (
    SELECT * FROM gone UNION ALL SELECT * FROM again UNION ALL SELECT * FROM dead
    UNION ALL SELECT * FROM stale UNION ALL SELECT * FROM unstarted),
  src AS (
    SELECT $2::text AS room_id, row_number() OVER (ORDER BY ord0, run_id, task_id) AS ord, kind, run_id, task_id,
           $5::bigint AS term, $6::text AS actor, data
      FROM (SELECT 0 AS ord0, 'task.' || to_status AS kind, run_id, task_id, data FROM moved
            UNION ALL
            SELECT -1, 'run.expired', run_id, NULL, jsonb_build_object('from', 'pending') FROM expired) l),
  ${LOG_CTES}
  SELECT EXISTS (SELECT 1 FROM fence) AS fenced,
         (SELECT count(*) FROM gone) AS canceled, (SELECT count(*) FROM again) AS requeued,
         (SELECT count(*) FROM dead WHERE to_status = 'failed') AS failed,
         (SELECT count(*) FROM dead WHERE to_status = 'timed_out') + (SELECT count(*) FROM stale) AS timed_out,
         (SELECT count(*) FROM expired) AS expired_runs,
         (SELECT count(*) FROM moved) AS moved_tasks,
         CASE WHEN EXISTS (SELECT 1 FROM moved) THEN pg_notify('dagbot', 'tasks:' || $2::text) END,
         CASE WHEN EXISTS (SELECT 1 FROM expired) THEN pg_notify('dagbot', 'runs:' || $2::text) END`;

export async function reap(db: Db, fence: LeaderFence): Promise<ReapResult> {
  const rows = await db.one<{
    fenced: boolean;
    canceled: number;
    requeued: number;
    failed: number;
    timed_out: number;
    expired_runs: number;
    moved_tasks: number;
  }>("reap", REAP_SQL, [db.clockParam(), ...fenceParams(fence), sessionKey(fence.session)]);
  const r = rows[0];
  if (r === undefined || !r.fenced) throw await db.fenceConflict("reap", fence);
  if (r.moved_tasks > 0) db.committed("tasks", fence.roomId);
  if (r.expired_runs > 0) db.committed("runs", fence.roomId);
  return {
    requeued: r.requeued,
    failed: r.failed,
    timedOut: r.timed_out,
    canceled: r.canceled,
    expiredRuns: r.expired_runs,
  };
}

/**
 * running → succeeded/failed once every task is terminal; canceling → canceled once every task is
 * terminal (domain/run-status.ts deriveRunOutcome, the same rule as one statement).
 */
const DERIVE_SQL = `WITH ${fenceCte(2)},
  up AS (
    UPDATE runs r SET updated_at = ${NOW},
           status = CASE WHEN r.status = 'canceling' THEN 'canceled'
                         WHEN EXISTS (SELECT 1 FROM tasks t WHERE t.run_id = r.run_id AND t.status <> 'succeeded')
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
  if (r === undefined || !r.fenced) throw await db.fenceConflict("derive run outcomes", fence);
  if (r.outcomes.length > 0) db.committed("runs", fence.roomId);
  return r.outcomes;
}

export async function setRoomCap(
  db: Db,
  roomId: string,
  cap: number,
  ctx?: CommandContext,
): Promise<{ previous: number }> {
  checkRoomCap(cap);
  return db.tx("set room cap", async (tx) => {
    const fence = ctx?.fence;
    if (ctx !== undefined) {
      await db.lockFence(tx, "set room cap", ctx.fence);
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
    if (fence !== undefined && ctx?.inboxEventId !== undefined)
      await markHandledInTx(db, tx, fence, ctx.inboxEventId, capOutcome(cap, previous));
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
