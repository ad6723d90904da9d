/**
 * One scheduling step of the leader (docs/architecture.md §4, "Scheduling without rereading the
 * room"), written once for both stores: the pure decideSchedule applied to what this fenced
 * transaction reads. With `incremental`, the step decides from the view the last step left under
 * this fence when it still explains the room (the room's runs, cap and active tasks are read, and
 * the status of the tasks the view had running); otherwise from one read of every task of the
 * room's open runs. Every read is one statement of tagged rows, so PostgreSQL makes the same round
 * trips as the snapshot it built as JSON before.
 */
import type { GateSpec } from "../../../domain/gates.js";
import { openGateState } from "../../../domain/gates.js";
import type { RunStatus, TaskStatus } from "../../../domain/model.js";
import type { ActiveTask } from "../../../domain/schedule-view.js";
import { ScheduleView } from "../../../domain/schedule-view.js";
import type { ScheduleDecision, ScheduleRun, ScheduleTask, TaskRef } from "../../../domain/scheduling.js";
import { decideSchedule } from "../../../domain/scheduling.js";
import type { NeedEnd } from "../../../domain/run-when.js";
import { isRunWhen, judgeWhen } from "../../../domain/run-when.js";
import type { LeaderFence, ScheduleResult } from "../../../ports/store.js";
import { DEFAULT_ROOM_CAP } from "../checks.js";
import { gateOpenedLine } from "../gate-writes.js";
import { sessionKey } from "../records.js";
import type { ScheduleViews } from "../schedule-views.js";
import type { Script } from "../script.js";
import { log, mappers, now, p, row, rows, sql, touch } from "../script.js";
import { expandFanOut, stopFanOut } from "./fan-out.js";
import { holdFence } from "./fence.js";

const OPEN_RUNS = sql("the room's open runs")`room_id = ${p.text("roomId")}
  AND status IN ('pending','running','canceling')`;
const CAP = sql("the room's cap")`coalesce((SELECT cap FROM room_caps WHERE room_id = ${p.text("roomId")}),
  ${p.int("defaultCap")})`;
const NO_TEXT = "CAST(NULL AS TEXT)";
const NO_INT = "CAST(NULL AS INTEGER)";

/**
 * What an incremental step needs: the room's active tasks, its open runs and its cap, as tagged
 * rows. The active tasks are read as two halves that each name a partial index's own predicate
 * (tasks_claim: queued; tasks_executor: running and canceling): SQLite uses a partial index only for
 * a query that repeats its predicate, so they are never read by a scan of every task ever run.
 */
export const STEP_LOOK = sql("the room's active tasks, open runs and cap")`
  SELECT 'active' AS k, t.run_id, t.task_id, t.concurrency_key, ${NO_TEXT} AS status,
         ${NO_INT} AS max_parallel, ${NO_INT} AS cap, t.fan_out
    FROM tasks t WHERE t.status = 'queued' AND t.room_id = ${p.text("roomId")}
  UNION ALL
  SELECT 'active', t.run_id, t.task_id, t.concurrency_key, ${NO_TEXT}, ${NO_INT}, ${NO_INT}, t.fan_out
    FROM tasks t WHERE t.status IN ('running','canceling') AND t.room_id = ${p.text("roomId")}
  UNION ALL
  SELECT 'run', run_id, ${NO_TEXT}, ${NO_TEXT}, status, max_parallel, ${NO_INT}, ${NO_TEXT} FROM runs WHERE ${OPEN_RUNS}
  UNION ALL
  SELECT 'cap', ${NO_TEXT}, ${NO_TEXT}, ${NO_TEXT}, ${NO_TEXT}, ${NO_INT}, ${CAP}, ${NO_TEXT}`;

/** Every task of the room's open runs, the runs and the cap, as tagged rows: a whole read. */
const SNAPSHOT = sql("the room's open runs, their tasks and the cap")`
  SELECT 'task' AS k, t.run_id, t.task_id, t.status, t.needs, t.priority, t.seq, t.concurrency_key,
         t.gate IS NOT NULL AS gate, t.gate_state IS NOT NULL AS gate_open, t.run_when,
         ${NO_INT} AS max_parallel, ${NO_INT} AS cap, t.for_each IS NOT NULL AS fan_out_template, t.fan_out,
         t.fan_out_limit, t.fan_out_fail_fast
    FROM runs r JOIN tasks t ON t.run_id = r.run_id
   WHERE r.room_id = ${p.text("roomId")} AND r.status IN ('pending','running','canceling')
  UNION ALL
  SELECT 'run', run_id, NULL, status, NULL, NULL, NULL, NULL, NULL, NULL, NULL, max_parallel, NULL, NULL, NULL, NULL, NULL
    FROM runs WHERE ${OPEN_RUNS}
  UNION ALL
  SELECT 'cap', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, ${CAP}, NULL, NULL, NULL, NULL`;

const REFS = (name: string) => p.table(name, "m", { run_id: "text", task_id: "text" });

/** The status now of the tasks the view last saw active. */
const STATUSES = sql("the status of the tasks the view had active")`
  SELECT t.run_id, t.task_id, t.status FROM ${REFS("refs")}
    JOIN tasks t ON t.run_id = m.run_id AND t.task_id = m.task_id`;

/**
 * How the needs given stand in the store now: a task is queued only where its run condition holds
 * on them (run-when.ts; by default every need succeeded), read in this transaction after its skips
 * were written (an ended task never changes again in a running run but by an operator's mark, which
 * runs under the same fence), so no view, however stale, starts a task early. One primary-key join;
 * a check inside the UPDATE was planned by PostgreSQL as a scan per task.
 */
const NEED_ENDS = sql("how the needs stand")`
  SELECT d.run_id, d.task_id, d.status, d.gate IS NOT NULL AS gate FROM ${REFS("refs")}
    JOIN tasks d ON d.run_id = m.run_id AND d.task_id = m.task_id`;

export const STEP_MOVE = sql("blocked tasks, queued or skipped")`
  UPDATE tasks SET status = ${p.text("to")}, version = version + 1,
         queued_at = CASE WHEN ${p.text("to")} = 'queued' THEN ${p.now} ELSE queued_at END,
         finished_at = CASE WHEN ${p.text("to")} = 'skipped' THEN ${p.now} ELSE finished_at END
    FROM ${REFS("refs")}
   WHERE tasks.run_id = m.run_id AND tasks.task_id = m.task_id AND tasks.status = 'blocked'
  RETURNING tasks.run_id, tasks.task_id`;

const GATE_SPEC = sql("a gate to open")`
  SELECT gate FROM tasks WHERE run_id = ${p.text("runId")} AND task_id = ${p.text("taskId")}
     AND status = 'blocked' AND gate_state IS NULL`;

const OPEN_GATE = sql("a gate, opened")`
  UPDATE tasks SET gate_state = ${p.json("state")}, deadline = ${p.int("deadline")}, version = version + 1
   WHERE run_id = ${p.text("runId")} AND task_id = ${p.text("taskId")} AND status = 'blocked' AND gate_state IS NULL
  RETURNING 1 AS opened`;

const truth = (v: unknown): boolean => v === true || v === 1;
const intOrNull = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v));
const key = (runId: string, taskId: string): string => `${runId}\u0000${taskId}`;

export function* scheduleStep(
  kept: ScheduleViews,
  fence: LeaderFence,
  incremental = false,
): Script<ScheduleResult> {
  yield* holdFence("schedule step", fence);
  const roomId = fence.roomId;
  const at = { roomId, defaultCap: DEFAULT_ROOM_CAP };
  const previous = incremental ? kept.get(fence) : undefined;
  let planned: { decision: ScheduleDecision; view: ScheduleView } | null = null;
  if (previous !== undefined) {
    const runs: ScheduleRun[] = [];
    const active: ActiveTask[] = [];
    let cap = DEFAULT_ROOM_CAP;
    for (const r of yield* rows<Record<string, unknown>>(STEP_LOOK, at)) {
      if (r.k === "run")
        runs.push({
          runId: String(r.run_id),
          status: r.status as RunStatus,
          maxParallel: intOrNull(r.max_parallel),
        });
      else if (r.k === "active")
        active.push({
          runId: String(r.run_id),
          taskId: String(r.task_id),
          concurrencyKey: (r.concurrency_key as string | null) ?? null,
          fanOut: (r.fan_out as string | null) ?? null,
        });
      else cap = Number(r.cap);
    }
    if (runs.length > 0 && previous.sameRuns(runs)) {
      const left = previous.left(active);
      if (left !== null) {
        const ended =
          left.length === 0
            ? []
            : (yield* rows<{ run_id: string; task_id: string; status: TaskStatus }>(STATUSES, {
                refs: left.map((t) => ({ run_id: t.runId, task_id: t.taskId })),
              })).map((t) => ({ runId: t.run_id, taskId: t.task_id, status: t.status }));
        if (ended.length === left.length && previous.ended(ended))
          planned = { decision: previous.decide(active, { globalCap: cap }), view: previous };
      }
    }
  }
  if (planned === null) {
    const m = yield* mappers();
    const room: { runs: ScheduleRun[]; tasks: ScheduleTask[] } = { runs: [], tasks: [] };
    let cap = DEFAULT_ROOM_CAP;
    for (const r of yield* rows<Record<string, unknown>>(SNAPSHOT, at)) {
      if (r.k === "task")
        room.tasks.push({
          runId: String(r.run_id),
          taskId: String(r.task_id),
          status: r.status as TaskStatus,
          needs: m.json<string[]>(r.needs),
          priority: Number(r.priority),
          seq: Number(r.seq),
          concurrencyKey: (r.concurrency_key as string | null) ?? null,
          isGate: truth(r.gate),
          gateOpen: truth(r.gate_open),
          isFanOut: truth(r.fan_out_template),
          fanOut: (r.fan_out as string | null) ?? null,
          fanOutLimit: intOrNull(r.fan_out_limit),
          failFast: truth(r.fan_out_fail_fast),
          ...(isRunWhen(r.run_when) ? { when: r.run_when } : {}),
        });
      else if (r.k === "run")
        room.runs.push({
          runId: String(r.run_id),
          status: r.status as RunStatus,
          maxParallel: intOrNull(r.max_parallel),
        });
      else cap = Number(r.cap);
    }
    if (room.runs.length === 0) {
      kept.drop(fence);
      return { queued: 0, skipped: 0 };
    }
    planned = { decision: decideSchedule(room, { globalCap: cap }), view: new ScheduleView(room) };
  }
  const { decision, view } = planned;
  const actor = sessionKey(fence.session);
  function* move(to: "skipped" | "queued", refs: readonly TaskRef[]): Script<number> {
    if (refs.length === 0) return 0;
    const moved = yield* rows<{ run_id: string; task_id: string }>(STEP_MOVE, {
      to,
      refs: refs.map((t) => ({ run_id: t.runId, task_id: t.taskId })),
    });
    const done = new Set(moved.map((r) => key(r.run_id, r.task_id)));
    // Logged in decision order (pick order for queued, seq order for skipped).
    for (const t of refs)
      if (done.has(key(t.runId, t.taskId)))
        yield* log(roomId, { kind: `task.${to}`, runId: t.runId, taskId: t.taskId, term: fence.term, actor });
    return done.size;
  }
  const skipped = yield* move("skipped", decision.toSkip);
  // After the skips: a conditional task may run behind a need skipped in this same decision.
  const toQueue = yield* needsMet(decision.toQueue, view);
  const queued = yield* move("queued", toQueue);
  let opened = 0;
  if (decision.toOpen.length > 0) {
    const m = yield* mappers();
    const openedAt = yield* now();
    for (const t of decision.toOpen) {
      const found = yield* row<{ gate: unknown }>(GATE_SPEC, { runId: t.runId, taskId: t.taskId });
      if (found === undefined) continue;
      const spec = m.json<GateSpec>(found.gate);
      const state = openGateState(openedAt, spec);
      const done = yield* row(OPEN_GATE, { ...t, state, deadline: state.deadline });
      if (done === undefined) continue;
      opened += 1;
      yield* log(roomId, gateOpenedLine(fence, t, spec, state));
    }
  }
  // Fan-outs (docs/architecture.md §6, "Fan-out"): templates replaced by their instances, and fail_fast's
  // queued instances skipped, in this same fenced write.
  let expanded = 0;
  for (const t of decision.toExpand) if ((yield* expandFanOut(fence, t)) !== null) expanded += 1;
  const stopped = yield* stopFanOut(fence, decision.toStop);
  kept.settled(fence, view, decision, queued + skipped + opened);
  if (queued + skipped + opened + expanded + stopped > 0) yield* touch("tasks", roomId);
  return {
    queued,
    skipped: skipped + stopped,
    ...(opened > 0 ? { opened } : {}),
    ...(expanded > 0 ? { expanded } : {}),
  };
}

/** Of `refs`, those whose run condition holds on their needs as the store has them now. */
function* needsMet(refs: readonly TaskRef[], view: ScheduleView): Script<TaskRef[]> {
  const needs = refs.flatMap((r) =>
    view.needsOf(r.runId, r.taskId).map((n) => ({ run_id: r.runId, task_id: n })),
  );
  if (needs.length === 0) return [...refs];
  const ends = new Map<string, NeedEnd>();
  for (const r of yield* rows<{ run_id: string; task_id: string; status: TaskStatus; gate: unknown }>(
    NEED_ENDS,
    { refs: needs },
  ))
    ends.set(key(r.run_id, r.task_id), { status: r.status, isGate: truth(r.gate) });
  return refs.filter(
    (r) =>
      judgeWhen(
        view.whenOf(r.runId, r.taskId),
        view.needsOf(r.runId, r.taskId).map((n) => ends.get(key(r.runId, n)) ?? { status: undefined }),
      ) === "run",
  );
}
