/**
 * The leader's periodic work on SQLite, each step one fenced transaction: scheduling (the pure
 * decideSchedule applied to a snapshot read in the same transaction), reaping, run outcomes, caps.
 */
import type { RunStatus, TaskStatus } from "../../domain/model.js";
import { deriveRunOutcome } from "../../domain/run-status.js";
import type { ScheduleDecision } from "../../domain/scheduling.js";
import { decideSchedule } from "../../domain/scheduling.js";
import { ScheduleView } from "../../domain/schedule-view.js";
import { ScheduleViews, SQLITE_NEEDS_MET } from "../store-common/schedule-views.js";
import type { GateSpec } from "../../domain/gates.js";
import type { GateState } from "../../domain/gates.js";
import { gateTimeoutError, openGateState, timeOutGate } from "../../domain/gates.js";
import { gateOpenedLine } from "../store-common/gate-writes.js";
import type {
  CommandContext,
  LeaderFence,
  ReapResult,
  RoomLoad,
  RunOutcome,
  ScheduleResult,
} from "../../ports/store.js";
import type { SqliteConnection, Tx } from "./connection.js";
import { sessionKey } from "./connection.js";
import { markHandledInTx } from "./inbox.js";
import { cancelUnstartedTasks } from "./runs.js";
import type { ReapRow as CommonReapRow } from "../store-common/reap.js";
import type { ReapDecision } from "../../domain/task-states.js";
import { REAP_COLUMNS, lostData, reapDecision } from "../store-common/reap.js";
import { checkRoom, checkRoomCap, DEFAULT_ROOM_CAP } from "../store-common/checks.js";
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

interface ReapRow extends CommonReapRow {
  seq: number;
}

/**
 * Whether the room holds anything that could expire. Each half names a partial index's own
 * predicate (tasks_claim, tasks_executor), so SQLite reads the open tasks only; one IN list over all
 * three statuses matched no index and scanned every task of every room under the write lock.
 */
export const REAP_OPEN_SQL = `SELECT EXISTS (SELECT 1 FROM tasks WHERE status = 'queued' AND room_id = ?)
    OR EXISTS (SELECT 1 FROM tasks WHERE status IN ('running','canceling') AND room_id = ?)
    OR EXISTS (SELECT 1 FROM runs WHERE room_id = ? AND status = 'pending' AND confirm_deadline IS NOT NULL)
    OR EXISTS (SELECT 1 FROM tasks WHERE status = 'blocked' AND gate_state IS NOT NULL AND room_id = ? AND deadline IS NOT NULL) AS open`;

export function reap(c: SqliteConnection, fence: LeaderFence): Promise<ReapResult> {
  return c.write("reap", (tx) => {
    checkFence(c, tx, "reap", fence);
    const roomId = fence.roomId;
    const term = fence.term;
    const actor = sessionKey(fence.session);
    const open =
      c.get<{ open: number }>(REAP_OPEN_SQL, fence.roomId, fence.roomId, fence.roomId, fence.roomId)?.open ===
      1;
    const result: ReapResult = { requeued: 0, failed: 0, timedOut: 0, canceled: 0, expiredRuns: 0, open };
    const logTask = (r: ReapRow, to: TaskStatus, data: Record<string, unknown>): void => {
      tx.log({ roomId, kind: `task.${to}`, runId: r.run_id, taskId: r.task_id, term, actor, data });
      tx.touch("tasks", roomId);
    };

    const overdue = c.all<ReapRow>(
      `SELECT seq, ${REAP_COLUMNS}
         FROM tasks WHERE room_id = ? AND status IN ('running','canceling')
          AND (lease_expires_at <= ? OR (status = 'running' AND deadline IS NOT NULL AND deadline <= ?))`,
      roomId,
      tx.now,
      tx.now,
    );
    for (const r of overdue) {
      const decision = reapDecision(r, tx.now);
      if (decision === null) continue;
      const reason = decision.reason;
      if (decision.to === "canceled") {
        result.canceled += c.run(
          `UPDATE tasks SET status = 'canceled', version = version + 1, lease_expires_at = NULL, finished_at = ?,
                  error = COALESCE(error, 'canceled; the executor stopped renewing')
            WHERE seq = ? AND version = ?`,
          tx.now,
          r.seq,
          r.version,
        );
        logTask(r, "canceled", { reason });
        continue;
      }
      const { moved, data } = moveOverdue(c, tx.now, r, decision);
      if (decision.to === "queued") result.requeued += moved;
      else if (decision.to === "timed_out") result.timedOut += moved;
      else result.failed += moved;
      logTask(r, decision.to, data);
    }

    const stale = c.all<ReapRow>(
      `SELECT seq, run_id, task_id, status, version FROM tasks
        WHERE room_id = ? AND status = 'queued' AND queue_timeout_ms IS NOT NULL AND queued_at + queue_timeout_ms <= ?`,
      roomId,
      tx.now,
    );
    for (const r of stale) {
      result.timedOut += c.run(
        `UPDATE tasks SET status = 'timed_out', version = version + 1, finished_at = ?, error = 'queue timeout'
          WHERE seq = ? AND version = ?`,
        tx.now,
        r.seq,
        r.version,
      );
      logTask(r, "timed_out", { reason: "queue timeout" });
    }

    // Open approval gates past their timeout: timed_out or skipped, as the gate declares.
    const gates = c.all<ReapRow & { gate: string; gate_state: string }>(
      `SELECT seq, run_id, task_id, status, version, gate, gate_state FROM tasks
        WHERE room_id = ? AND status = 'blocked' AND gate_state IS NOT NULL AND deadline IS NOT NULL AND deadline <= ?`,
      roomId,
      tx.now,
    );
    for (const r of gates) {
      const spec = JSON.parse(r.gate) as GateSpec;
      const verdict = timeOutGate(spec, JSON.parse(r.gate_state) as GateState, tx.now);
      const n = c.run(
        `UPDATE tasks SET status = ?, version = version + 1, gate_state = ?, deadline = NULL, finished_at = ?, error = ?
          WHERE seq = ? AND version = ? AND status = 'blocked'`,
        verdict.to,
        JSON.stringify(verdict.state),
        tx.now,
        gateTimeoutError(spec),
        r.seq,
        r.version,
      );
      if (n === 0) continue;
      if (verdict.to === "timed_out") result.timedOut += 1;
      tx.log({
        roomId,
        kind: "gate.timed_out",
        runId: r.run_id,
        taskId: r.task_id,
        term,
        actor,
        data: { onTimeout: spec.onTimeout },
      });
      logTask(r, verdict.to, { reason: "gate timeout" });
    }

    const expired = c.all<{ run_id: string }>(
      `UPDATE runs SET status = 'expired', updated_at = ?
        WHERE room_id = ? AND status = 'pending' AND confirm_deadline IS NOT NULL AND confirm_deadline <= ?
        RETURNING run_id`,
      tx.now,
      roomId,
      tx.now,
    );
    for (const r of expired) {
      tx.log({ roomId, kind: "run.expired", runId: r.run_id, term, actor, data: { from: "pending" } });
      cancelUnstartedTasks(c, tx, r.run_id, roomId, term, actor);
      tx.touch("runs", roomId);
    }
    result.expiredRuns = expired.length;
    return result;
  });
}

export function deriveRunOutcomes(c: SqliteConnection, fence: LeaderFence): Promise<RunOutcome[]> {
  return c.write("derive run outcomes", (tx) => {
    checkFence(c, tx, "derive run outcomes", fence);
    const roomId = fence.roomId;
    // Only runs with nothing left open can change; the partial index answers NOT EXISTS cheaply.
    const candidates = c.all<{ run_id: string; dag_id: string; status: RunStatus }>(
      `SELECT r.run_id, r.dag_id, r.status FROM runs r
        WHERE r.room_id = ? AND r.status IN ('running','canceling')
          AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.run_id = r.run_id
                           AND t.status IN ('blocked','queued','running','canceling'))`,
      roomId,
    );
    const outcomes: RunOutcome[] = [];
    for (const r of candidates) {
      const statuses = c
        .all<{ status: TaskStatus }>("SELECT status FROM tasks WHERE run_id = ?", r.run_id)
        .map((t) => t.status);
      const to = deriveRunOutcome(r.status, statuses);
      if (to === r.status) continue;
      c.run(
        "UPDATE runs SET status = ?, updated_at = ? WHERE run_id = ? AND status = ?",
        to,
        tx.now,
        r.run_id,
        r.status,
      );
      tx.log({
        roomId,
        kind: `run.${to}`,
        runId: r.run_id,
        term: fence.term,
        actor: sessionKey(fence.session),
        data: { from: r.status },
      });
      outcomes.push({ runId: r.run_id, dagId: r.dag_id, from: r.status, to });
    }
    if (outcomes.length > 0) tx.touch("runs", roomId);
    return outcomes;
  });
}

export function setRoomCap(
  c: SqliteConnection,
  roomId: string,
  cap: number,
  ctx?: CommandContext<{ previous: number }>,
): Promise<{ previous: number }> {
  checkRoomCap(cap);
  return c.write("set room cap", (tx: Tx) => {
    const fence = ctx?.fence;
    if (ctx !== undefined) {
      checkFence(c, tx, "set room cap", ctx.fence);
      checkRoom("set room cap", ctx, roomId);
    }
    const previous = roomCap(c, roomId);
    c.run(
      "INSERT INTO room_caps (room_id, cap) VALUES (?, ?) ON CONFLICT (room_id) DO UPDATE SET cap = excluded.cap",
      roomId,
      cap,
    );
    tx.log({
      roomId,
      kind: "cap.set",
      term: fence?.term ?? null,
      actor: fence === undefined ? null : sessionKey(fence.session),
      data: { cap },
    });
    const answer = ctx?.inboxEventId === undefined ? null : ctx.answer({ previous });
    if (answer !== null && ctx?.inboxEventId !== undefined)
      markHandledInTx(c, tx, ctx.fence, ctx.inboxEventId, answer);
    tx.touch("cap", roomId);
    return { previous };
  });
}

export function initRoomCap(c: SqliteConnection, roomId: string, cap: number): Promise<boolean> {
  checkRoomCap(cap);
  return c.write("init room cap", (tx: Tx) => {
    const inserted =
      c.run(
        "INSERT INTO room_caps (room_id, cap) VALUES (?, ?) ON CONFLICT (room_id) DO NOTHING",
        roomId,
        cap,
      ) === 1;
    if (inserted) {
      tx.log({ roomId, kind: "cap.set", term: null, actor: null, data: { cap, initial: true } });
      tx.touch("cap", roomId);
    }
    return inserted;
  });
}

export function getRoomCap(c: SqliteConnection, roomId: string): Promise<number> {
  return c.read("get room cap", () => roomCap(c, roomId));
}

/**
 * The room's active tasks, as two halves that each name a partial index's own predicate
 * (tasks_claim: queued; tasks_executor: running and canceling), as REAP_OPEN_SQL does: SQLite uses a
 * partial index only for a query that repeats its predicate, so the active tasks are read through
 * those indexes and never by a scan of every task ever run. `%COLS%` is what each half selects.
 */
const ROOM_ACTIVE = `SELECT %COLS% FROM tasks t WHERE t.status = 'queued' AND t.room_id = ?
  UNION ALL SELECT %COLS% FROM tasks t WHERE t.status IN ('running','canceling') AND t.room_id = ?`;
export const ROOM_ACTIVE_COUNT_SQL = `SELECT count(*) AS n FROM (${ROOM_ACTIVE.replaceAll("%COLS%", "1")})`;
export const ROOM_KEYS_SQL = `SELECT a.concurrency_key, r.dag_id, a.task_id
   FROM (${ROOM_ACTIVE.replaceAll("%COLS%", "t.seq, t.concurrency_key, t.task_id, t.run_id")}) a
   JOIN runs r ON r.run_id = a.run_id
  WHERE a.concurrency_key IS NOT NULL ORDER BY a.seq`;
/** The room's active tasks, for the caps of an incremental scheduling step. */
const ACTIVE_ROWS_SQL = ROOM_ACTIVE.replaceAll("%COLS%", "t.run_id, t.task_id, t.concurrency_key");

export function roomLoad(c: SqliteConnection, roomId: string): Promise<RoomLoad> {
  return c.read("room load", () => {
    const active = c.get<{ n: number }>(ROOM_ACTIVE_COUNT_SQL, roomId, roomId)?.n ?? 0;
    const keys = c
      .all<{ concurrency_key: string; dag_id: string; task_id: string }>(ROOM_KEYS_SQL, roomId, roomId)
      .map((k) => ({ key: k.concurrency_key, dagId: k.dag_id, taskId: k.task_id }));
    return { cap: roomCap(c, roomId), active, keys };
  });
}

/**
 * Moves a running task the reaper found overdue, or its worker released (releaseTask), as the
 * domain decided (decideReap, decideLost): back to the queue (attempt + 1; a lost node's rerun also
 * raises max_attempts, so no retry is spent) or to its end. Fenced by the row's version; how many
 * rows moved, and the log line's data.
 */
export function moveOverdue(
  c: SqliteConnection,
  now: number,
  r: { seq: number; version: number; attempt: number },
  decision: Exclude<ReapDecision, { to: "canceled" }>,
): { moved: number; data: Record<string, unknown> } {
  const reason = decision.reason;
  if (decision.to === "queued") {
    const notBefore = now + decision.waitMs;
    const moved = c.run(
      `UPDATE tasks SET status = 'queued', version = version + 1, attempt = attempt + 1, claim_version = NULL,
              executor_node = NULL, executor_boot = NULL, lease_expires_at = NULL, deadline = NULL,
              not_before = ?, queued_at = ?, error = ?, lost_reruns = lost_reruns + ?,
              max_attempts = max_attempts + ?
        WHERE seq = ? AND version = ?`,
      notBefore,
      now,
      reason,
      decision.lostNode ? 1 : 0,
      decision.lostRerun ? 1 : 0,
      r.seq,
      r.version,
    );
    return { moved, data: { reason, attempt: r.attempt, notBefore, ...lostData(decision) } };
  }
  const moved = c.run(
    `UPDATE tasks SET status = ?, version = version + 1, lease_expires_at = NULL, finished_at = ?, error = ?,
            lost_reruns = lost_reruns + ?
      WHERE seq = ? AND version = ?`,
    decision.to,
    now,
    reason,
    decision.lostNode ? 1 : 0,
    r.seq,
    r.version,
  );
  return { moved, data: { reason, attempt: r.attempt } };
}
