/**
 * The leader's periodic work on PostgreSQL: scheduling (the pure decideSchedule applied to a snapshot
 * read in the same fenced transaction). Reaping, run outcomes and caps are written once, in store-common/ops/.
 */
import type { RunStatus, TaskStatus } from "../../domain/model.js";
import type { ScheduleDecision } from "../../domain/scheduling.js";
import { decideSchedule } from "../../domain/scheduling.js";
import type { ActiveTask } from "../../domain/schedule-view.js";
import { ScheduleView } from "../../domain/schedule-view.js";
import { ScheduleViews } from "../store-common/schedule-views.js";
import type { TaskRef } from "../../domain/scheduling.js";
import type { GateSpec } from "../../domain/gates.js";
import { openGateState } from "../../domain/gates.js";
import { gateOpenedLine } from "../store-common/gate-writes.js";
import type { LeaderFence, ScheduleResult } from "../../ports/store.js";
import type { Db, Tx } from "./db.js";
import { NOW, sessionKey } from "./sql.js";
import { DEFAULT_ROOM_CAP } from "../store-common/checks.js";
import { lockFence } from "./script-driver.js";

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
