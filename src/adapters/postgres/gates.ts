/** Decisions on approval gates on PostgreSQL: one fenced transaction each (docs/architecture.md §3, "Gate"). */
import type { GateDecisionInput } from "../../domain/gates.js";
import { decideGate as decide } from "../../domain/gates.js";
import { NotFoundError } from "../../ports/errors.js";
import type { CommandContext, GateDecisionResult, TaskRecord } from "../../ports/store.js";
import type { Db, Tx } from "./db.js";
import { NOW, sessionKey } from "./sql.js";
import { checkRoom } from "../store-common/checks.js";
import { gateOutcome, gateWrite } from "../store-common/gate-writes.js";
import { markHandledInTx } from "./inbox.js";
import { RUN_COLUMNS, TASK_COLUMNS, toRun, toTask } from "./rows.js";

async function taskRow(
  tx: Tx,
  runId: string,
  taskId: string,
  lock: boolean,
): Promise<TaskRecord | undefined> {
  const { rows } = await tx.query(
    `SELECT ${TASK_COLUMNS} FROM tasks WHERE run_id = $1 AND task_id = $2${lock ? " FOR UPDATE" : ""}`,
    [runId, taskId],
  );
  return rows[0] === undefined ? undefined : toTask(rows[0]);
}

export function decideGate(
  db: Db,
  ctx: CommandContext,
  roomId: string,
  dagId: string,
  taskId: string,
  input: GateDecisionInput,
): Promise<GateDecisionResult> {
  const operation = `${input.decision} gate`;
  return db.tx(operation, async (tx) => {
    await db.lockFence(tx, operation, ctx.fence);
    checkRoom(operation, ctx, roomId);
    const runs = await tx.query(`SELECT ${RUN_COLUMNS} FROM runs WHERE room_id = $1 AND dag_id = $2`, [
      roomId,
      dagId,
    ]);
    if (runs.rows[0] === undefined) throw new NotFoundError(operation, { roomId, dagId });
    const run = toRun(runs.rows[0]);
    // Locked as read: a reaper timing the gate out either came first (the gate is closed) or waits.
    const before = await taskRow(tx, run.runId, taskId, true);
    if (before === undefined || before.gate === null)
      throw new NotFoundError(operation, { roomId, dagId, taskId });
    const { rows: nowRows } = await tx.query<{ now: string }>(`SELECT ${NOW} AS now`, [tx.clockParam]);
    const now = Number(nowRows[0]?.now);
    const verdict = decide(before.gate, before.status, before.gateState, input, now);
    const write = gateWrite(verdict, input);
    if (write.status !== null && "state" in verdict && verdict.state !== null) {
      await tx.query(
        `UPDATE tasks SET status = $4, gate_state = $5::jsonb, version = version + 1, error = $6,
                finished_at = CASE WHEN $7 THEN $8::bigint ELSE finished_at END,
                deadline = CASE WHEN $7 THEN NULL ELSE deadline END,
                output_values = coalesce($9::jsonb, output_values)
          WHERE run_id = $1 AND task_id = $2 AND version = $3 AND status = 'blocked'`,
        [
          run.runId,
          taskId,
          before.version,
          write.status,
          JSON.stringify(verdict.state),
          write.error,
          write.ends,
          now,
          write.outputs === null ? null : JSON.stringify(write.outputs),
        ],
      );
      const actor = sessionKey(ctx.fence.session);
      for (const line of write.lines)
        tx.log(roomId, { ...line, runId: run.runId, taskId, term: ctx.fence.term, actor });
      tx.touch("tasks", roomId);
    }
    if (ctx.inboxEventId !== undefined)
      await markHandledInTx(db, tx, ctx.fence, ctx.inboxEventId, gateOutcome(verdict, input, run, taskId));
    return { verdict, run, task: (await taskRow(tx, run.runId, taskId, false)) ?? before };
  });
}
