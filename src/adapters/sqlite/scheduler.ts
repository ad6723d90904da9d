/**
 * The leader's periodic work on SQLite, each step one fenced transaction: scheduling (the pure
 * decideSchedule applied to a snapshot read in the same transaction). Reaping, run outcomes and
 * caps are written once, in store-common/ops/.
 */
import type { RunStatus, TaskStatus } from "../../domain/model.js";
import type { ScheduleDecision } from "../../domain/scheduling.js";
import { decideSchedule } from "../../domain/scheduling.js";
import { ScheduleView } from "../../domain/schedule-view.js";
import { ScheduleViews, SQLITE_NEEDS_MET } from "../store-common/schedule-views.js";
import type { GateSpec } from "../../domain/gates.js";
import { openGateState } from "../../domain/gates.js";
import { gateOpenedLine } from "../store-common/gate-writes.js";
import type { LeaderFence, ScheduleResult } from "../../ports/store.js";
import type { SqliteConnection } from "./connection.js";
import { sessionKey } from "./connection.js";
import { DEFAULT_ROOM_CAP } from "../store-common/checks.js";
import { checkFence } from "./script-driver.js";

export { DEFAULT_ROOM_CAP } from "../store-common/checks.js";

function roomCap(c: SqliteConnection, roomId: string): number {
  return (
    c.get<{ cap: number }>("SELECT cap FROM room_caps WHERE room_id = ?", roomId)?.cap ?? DEFAULT_ROOM_CAP
  );
}

type ScheduleRow = {
  run_id: string;
  task_id: string;
  status: TaskStatus;
  needs: string;
  priority: number;
  seq: number;
  concurrency_key: string | null;
  gate: number;
  gate_open: number;
};

/**
 * One scheduling step (docs/architecture.md §4, "Scheduling without rereading the room"): with
 * `incremental`, from the view the last step left under this fence when it still explains the room;
 * otherwise from a read of every task of the room's open runs.
 */
export function scheduleStep(
  c: SqliteConnection,
  fence: LeaderFence,
  incremental = false,
): Promise<ScheduleResult> {
  const kept = ScheduleViews.of(c);
  return kept.guard(
    fence,
    c.write("schedule step", (tx) => {
      checkFence(c, tx, "schedule step", fence);
      const roomId = fence.roomId;
      const runs = c
        .all<{ run_id: string; status: RunStatus; max_parallel: number | null }>(
          "SELECT run_id, status, max_parallel FROM runs WHERE room_id = ? AND status IN ('pending','running','canceling')",
          roomId,
        )
        .map((r) => ({ runId: r.run_id, status: r.status, maxParallel: r.max_parallel }));
      if (runs.length === 0) {
        kept.drop(fence);
        return { queued: 0, skipped: 0 };
      }
      const caps = { globalCap: roomCap(c, roomId) };
      const previous = incremental ? kept.get(fence) : undefined;
      let planned: { decision: ScheduleDecision; view: ScheduleView } | null = null;
      if (previous !== undefined && previous.sameRuns(runs)) {
        const view = previous;
        const active = c
          .all<{ run_id: string; task_id: string; concurrency_key: string | null }>(
            ACTIVE_ROWS_SQL,
            roomId,
            roomId,
          )
          .map((a) => ({ runId: a.run_id, taskId: a.task_id, concurrencyKey: a.concurrency_key }));
        const left = view.left(active);
        const ended =
          left?.map((t) => ({
            ...t,
            status:
              c.get<{ status: TaskStatus }>(
                "SELECT status FROM tasks WHERE run_id = ? AND task_id = ?",
                t.runId,
                t.taskId,
              )?.status ?? ("blocked" as TaskStatus),
          })) ?? null;
        if (ended !== null && view.ended(ended)) planned = { decision: view.decide(active, caps), view };
      }
      if (planned === null) {
        const tasks = c
          .all<ScheduleRow>(
            `SELECT t.run_id, t.task_id, t.status, t.needs, t.priority, t.seq, t.concurrency_key,
                    t.gate IS NOT NULL AS gate, t.gate_state IS NOT NULL AS gate_open
               FROM runs r JOIN tasks t ON t.run_id = r.run_id
              WHERE r.room_id = ? AND r.status IN ('pending','running','canceling')`,
            roomId,
          )
          .map((t) => ({
            runId: t.run_id,
            taskId: t.task_id,
            status: t.status,
            needs: JSON.parse(t.needs) as string[],
            priority: t.priority,
            seq: t.seq,
            concurrencyKey: t.concurrency_key,
            isGate: t.gate === 1,
            gateOpen: t.gate_open === 1,
          }));
        planned = {
          decision: decideSchedule({ runs, tasks }, caps),
          view: new ScheduleView({ runs, tasks }),
        };
      }
      const { decision, view } = planned;
      const actor = sessionKey(fence.session);
      const move = (to: "skipped" | "queued", refs: { runId: string; taskId: string }[]): number => {
        const stamp = to === "queued" ? "queued_at" : "finished_at";
        const guard = to === "queued" ? ` AND ${SQLITE_NEEDS_MET}` : "";
        let moved = 0;
        for (const t of refs) {
          const n = c.run(
            `UPDATE tasks SET status = '${to}', version = version + 1, ${stamp} = ?
            WHERE run_id = ? AND task_id = ? AND status = 'blocked'${guard}`,
            tx.now,
            t.runId,
            t.taskId,
          );
          if (n === 0) continue;
          moved += n;
          tx.log({ roomId, kind: `task.${to}`, runId: t.runId, taskId: t.taskId, term: fence.term, actor });
        }
        return moved;
      };
      const skipped = move("skipped", decision.toSkip);
      const queued = move("queued", decision.toQueue);
      let opened = 0;
      for (const t of decision.toOpen) {
        const row = c.get<{ gate: string }>(
          "SELECT gate FROM tasks WHERE run_id = ? AND task_id = ? AND status = 'blocked' AND gate_state IS NULL",
          t.runId,
          t.taskId,
        );
        if (row === undefined) continue;
        const spec = JSON.parse(row.gate) as GateSpec;
        const state = openGateState(tx.now, spec);
        opened += c.run(
          `UPDATE tasks SET gate_state = ?, deadline = ?, version = version + 1
            WHERE run_id = ? AND task_id = ? AND status = 'blocked' AND gate_state IS NULL`,
          JSON.stringify(state),
          state.deadline,
          t.runId,
          t.taskId,
        );
        tx.log({ roomId, ...gateOpenedLine(fence, t, spec, state) });
      }
      kept.settled(fence, view, decision, queued + skipped + opened);
      if (queued + skipped + opened > 0) tx.touch("tasks", roomId);
      return opened > 0 ? { queued, skipped, opened } : { queued, skipped };
    }),
  );
}

/**
 * The room's active tasks, as two halves that each name a partial index's own predicate
 * (tasks_claim: queued; tasks_executor: running and canceling), as REAP_OPEN_SQL does: SQLite uses a
 * partial index only for a query that repeats its predicate, so the active tasks are read through
 * those indexes and never by a scan of every task ever run. `%COLS%` is what each half selects.
 */
const ROOM_ACTIVE = `SELECT %COLS% FROM tasks t WHERE t.status = 'queued' AND t.room_id = ?
  UNION ALL SELECT %COLS% FROM tasks t WHERE t.status IN ('running','canceling') AND t.room_id = ?`;
/** The room's active tasks, for the caps of an incremental scheduling step. */
const ACTIVE_ROWS_SQL = ROOM_ACTIVE.replaceAll("%COLS%", "t.run_id, t.task_id, t.concurrency_key");
