/**
 * A decision on an approval gate: one fenced transaction, written once for both stores
 * (docs/architecture.md §3, "Gate"). The domain decides (decideGate in src/domain/gates.ts);
 * gateWrite names what that decision writes; this reads, asks, and applies it with one guarded UPDATE.
 */
import type { GateDecisionInput } from "../../../domain/gates.js";
import { decideGate as decide } from "../../../domain/gates.js";
import { NotFoundError } from "../../../ports/errors.js";
import type { CommandContext, GateDecisionResult } from "../../../ports/store.js";
import { checkRoom } from "../checks.js";
import { gateWrite } from "../gate-writes.js";
import { RUN_COLUMNS, sessionKey, TASK_COLUMNS } from "../records.js";
import type { Script } from "../script.js";
import { log, mappers, now, p, row, run, sql, touch } from "../script.js";
import { holdFence } from "./fence.js";
import { answerTaskDecision } from "./inbox-handled.js";

const RUN = sql("a run by its DAG")`
  SELECT ${RUN_COLUMNS} FROM runs WHERE room_id = ${p.text("roomId")} AND dag_id = ${p.text("dagId")}`;

// Locked as read on PostgreSQL: a reaper timing the gate out either came first (the gate is closed) or waits.
const TASK = sql("a gate's task, locked")`
  SELECT ${TASK_COLUMNS} FROM tasks WHERE run_id = ${p.text("runId")} AND task_id = ${p.text("taskId")}${p.only({ postgres: " FOR UPDATE" })}`;

const WRITE = sql("a gate's decision")`
  UPDATE tasks SET status = ${p.text("status")}, gate_state = ${p.json("state")}, version = version + 1,
         error = ${p.text("error")},
         finished_at = CASE WHEN ${p.bool("ends")} THEN ${p.int("at")} ELSE finished_at END,
         deadline = CASE WHEN ${p.bool("ends")} THEN NULL ELSE deadline END,
         output_values = coalesce(${p.json("outputs")}, output_values)
   WHERE run_id = ${p.text("runId")} AND task_id = ${p.text("taskId")} AND version = ${p.int("version")}
     AND status = 'blocked'`;

export function* decideGate(
  ctx: CommandContext<GateDecisionResult>,
  roomId: string,
  dagId: string,
  taskId: string,
  input: GateDecisionInput,
): Script<GateDecisionResult> {
  const operation = `${input.decision} gate`;
  const m = yield* mappers();
  yield* holdFence(operation, ctx.fence);
  checkRoom(operation, ctx, roomId);
  const runRow = yield* row(RUN, { roomId, dagId });
  if (runRow === undefined) throw new NotFoundError(operation, { roomId, dagId });
  const theRun = m.toRun(runRow);
  const found = yield* row(TASK, { runId: theRun.runId, taskId });
  const before = found === undefined ? undefined : m.toTask(found);
  if (before === undefined || before.gate === null)
    throw new NotFoundError(operation, { roomId, dagId, taskId });
  const at = yield* now();
  const verdict = decide(before.gate, before.status, before.gateState, input, at);
  const write = gateWrite(verdict, input);
  if (write.status !== null && "state" in verdict && verdict.state !== null) {
    yield* run(WRITE, {
      status: write.status,
      state: verdict.state,
      error: write.error,
      ends: write.ends,
      at,
      outputs: write.outputs,
      runId: theRun.runId,
      taskId,
      version: before.version,
    });
    const actor = sessionKey(ctx.fence.session);
    for (const line of write.lines)
      yield* log(roomId, { ...line, runId: theRun.runId, taskId, term: ctx.fence.term, actor });
    yield* touch("tasks", roomId);
  }
  return yield* answerTaskDecision(ctx, verdict, theRun, before);
}
