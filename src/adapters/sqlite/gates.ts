/** Decisions on approval gates on SQLite: one fenced transaction each (docs/architecture.md §3, "Gate"). */
import type { GateDecisionInput } from "../../domain/gates.js";
import { decideGate as decide } from "../../domain/gates.js";
import { NotFoundError } from "../../ports/errors.js";
import type { CommandContext, GateDecisionResult, RunRecord, TaskRecord } from "../../ports/store.js";
import type { Row, SqliteConnection } from "./connection.js";
import { sessionKey } from "./connection.js";
import { checkRoom } from "../store-common/checks.js";
import { gateOutcome, gateWrite } from "../store-common/gate-writes.js";
import { markHandledInTx } from "./inbox.js";
import { RUN_COLUMNS, toRun, toTask } from "./rows.js";
import { TASK_COLUMNS } from "./runs.js";

export function decideGate(
  c: SqliteConnection,
  ctx: CommandContext,
  roomId: string,
  dagId: string,
  taskId: string,
  input: GateDecisionInput,
): Promise<GateDecisionResult> {
  const operation = `${input.decision} gate`;
  return c.write(operation, (tx) => {
    c.checkFence(operation, ctx.fence, tx.now);
    checkRoom(operation, ctx, roomId);
    const runRow = c.get(`SELECT ${RUN_COLUMNS} FROM runs WHERE room_id = ? AND dag_id = ?`, roomId, dagId);
    if (runRow === undefined) throw new NotFoundError(operation, { roomId, dagId });
    const run: RunRecord = toRun(runRow);
    const read = (): TaskRecord | undefined => {
      const row = c.get(
        `SELECT ${TASK_COLUMNS} FROM tasks WHERE run_id = ? AND task_id = ?`,
        run.runId,
        taskId,
      );
      return row === undefined ? undefined : toTask(row as Row);
    };
    const before = read();
    if (before === undefined || before.gate === null)
      throw new NotFoundError(operation, { roomId, dagId, taskId });
    const verdict = decide(before.gate, before.status, before.gateState, input, tx.now);
    const write = gateWrite(verdict, input);
    if (write.status !== null && "state" in verdict && verdict.state !== null) {
      c.run(
        `UPDATE tasks SET status = ?, gate_state = ?, version = version + 1, error = ?,
                finished_at = CASE WHEN ? THEN ? ELSE finished_at END,
                deadline = CASE WHEN ? THEN NULL ELSE deadline END,
                output_values = COALESCE(?, output_values)
          WHERE run_id = ? AND task_id = ? AND version = ? AND status = 'blocked'`,
        write.status,
        JSON.stringify(verdict.state),
        write.error,
        write.ends ? 1 : 0,
        tx.now,
        write.ends ? 1 : 0,
        write.outputs === null ? null : JSON.stringify(write.outputs),
        run.runId,
        taskId,
        before.version,
      );
      const actor = sessionKey(ctx.fence.session);
      for (const line of write.lines)
        tx.log({ ...line, roomId, runId: run.runId, taskId, term: ctx.fence.term, actor });
      tx.touch("tasks", roomId);
    }
    if (ctx.inboxEventId !== undefined)
      markHandledInTx(c, tx, ctx.fence, ctx.inboxEventId, gateOutcome(verdict, input, run, taskId));
    return { verdict, run, task: read() ?? before };
  });
}
