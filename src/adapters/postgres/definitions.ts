/**
 * Definitions on PostgreSQL: the row publishing writes in the same transaction as a
 * definition's first run, the counters later runs move, and the indexed reads by definition.
 */
import { scheduleVerdict } from "../../domain/schedule.js";
import { NotFoundError } from "../../ports/errors.js";
import type {
  CommandContext,
  DefinitionRecord,
  LeaderFence,
  OutboxMessageInput,
  RunRecord,
  ScheduleChange,
  ScheduleChangeResult,
  SkippedSlots,
} from "../../ports/store.js";
import { checkRoom } from "../store-common/checks.js";
import { scheduleChangeLine, scheduleOutcome, slotsSkippedLine } from "../store-common/definitions.js";
import type { Db, Tx } from "./db.js";
import { markHandledInTx } from "./inbox.js";
import { enqueue } from "../store-common/ops/outbox.js";
import { lockFence, runScript } from "./script-driver.js";
import { DEFINITION_COLUMNS, DEFINITION_FROM, RUN_COLUMNS, toDefinition, toRun } from "./rows.js";
import { NOW } from "./sql.js";

const DEFAULT_SCHEDULED_LIMIT = 1000;
const DEFAULT_RUNS_LIMIT = 100;

/**
 * Pause, resume or delete a schedule (DefinitionStore.changeSchedule): the decision is
 * scheduleVerdict's on the row locked FOR UPDATE, applied with one guarded UPDATE.
 */
export async function changeSchedule(
  db: Db,
  ctx: CommandContext,
  roomId: string,
  dagId: string,
  change: ScheduleChange,
  notices: OutboxMessageInput[] = [],
): Promise<ScheduleChangeResult> {
  const operation = `${change.action} schedule`;
  return db.tx(operation, async (tx) => {
    await lockFence(tx, operation, ctx.fence);
    checkRoom(operation, ctx, roomId);
    await tx.query("SELECT 1 FROM definitions WHERE room_id = $1 AND dag_id = $2 FOR UPDATE", [
      roomId,
      dagId,
    ]);
    const before = await readDefinition(tx, roomId, dagId);
    if (before === null || before.schedule === null) throw new NotFoundError(operation, { roomId, dagId });
    const verdict = scheduleVerdict(change.action, before.scheduleState.state);
    if (verdict.kind === "done") {
      await tx.query(
        `UPDATE definitions SET schedule_state = $2, schedule_state_by = $3, schedule_state_at = ${NOW},
                schedule_state_reason = $4, updated_at = ${NOW},
                slots_through = CASE WHEN $5 THEN GREATEST(slots_through, ${NOW}) ELSE slots_through END
          WHERE room_id = $6 AND dag_id = $7 AND schedule_state = $8`,
        [
          tx.clockParam,
          verdict.to,
          change.by,
          change.reason,
          change.action === "resume",
          roomId,
          dagId,
          before.scheduleState.state,
        ],
      );
      tx.log(roomId, scheduleChangeLine(ctx.fence, dagId, change));
      if (notices.length > 0) await runScript(tx, enqueue(ctx.fence, notices));
      tx.touch("runs", roomId);
    }
    const definition =
      verdict.kind === "done" ? ((await readDefinition(tx, roomId, dagId)) ?? before) : before;
    if (ctx.inboxEventId !== undefined)
      await markHandledInTx(
        tx,
        ctx.fence,
        ctx.inboxEventId,
        scheduleOutcome(change, verdict.kind, definition),
      );
    return { kind: verdict.kind, definition };
  });
}

export async function skipScheduleSlots(
  db: Db,
  fence: LeaderFence,
  roomId: string,
  dagId: string,
  skipped: SkippedSlots,
): Promise<void> {
  await db.tx("skip schedule slots", async (tx) => {
    await lockFence(tx, "skip schedule slots", fence);
    checkRoom("skip schedule slots", { fence }, roomId);
    const { rowCount } = await tx.query(
      `UPDATE definitions SET slots_through = GREATEST(slots_through, $2::bigint), updated_at = ${NOW}
        WHERE room_id = $3 AND dag_id = $4`,
      [tx.clockParam, skipped.last, roomId, dagId],
    );
    if (rowCount !== 1) throw new NotFoundError("skip schedule slots", { roomId, dagId });
    tx.log(roomId, slotsSkippedLine(fence, dagId, skipped));
  });
}

async function readDefinition(tx: Tx, roomId: string, dagId: string): Promise<DefinitionRecord | null> {
  const { rows } = await tx.query(
    `SELECT ${DEFINITION_COLUMNS} FROM ${DEFINITION_FROM} WHERE d.room_id = $1 AND d.dag_id = $2`,
    [roomId, dagId],
  );
  return rows[0] === undefined ? null : toDefinition(rows[0]);
}

export async function getDefinition(db: Db, roomId: string, dagId: string): Promise<DefinitionRecord | null> {
  const rows = await db.one(
    "get definition",
    `SELECT ${DEFINITION_COLUMNS} FROM ${DEFINITION_FROM} WHERE d.room_id = $1 AND d.dag_id = $2`,
    [roomId, dagId],
  );
  return rows[0] === undefined ? null : toDefinition(rows[0]);
}

export async function listScheduledDefinitions(
  db: Db,
  roomId: string,
  options: { limit?: number } = {},
): Promise<DefinitionRecord[]> {
  const rows = await db.one(
    "list scheduled definitions",
    `SELECT ${DEFINITION_COLUMNS} FROM ${DEFINITION_FROM}
      WHERE d.room_id = $1 AND d.schedule_cron IS NOT NULL ORDER BY d.dag_id LIMIT $2`,
    [roomId, Math.max(0, Math.floor(options.limit ?? DEFAULT_SCHEDULED_LIMIT))],
  );
  return rows.map(toDefinition);
}

export async function listDefinitionRuns(
  db: Db,
  roomId: string,
  dagId: string,
  options: { limit?: number } = {},
): Promise<RunRecord[]> {
  const rows = await db.one(
    "list definition runs",
    `SELECT ${RUN_COLUMNS} FROM runs WHERE room_id = $1 AND definition_id = $2
      ORDER BY created_at DESC, seq DESC LIMIT $3`,
    [roomId, dagId, Math.max(0, Math.floor(options.limit ?? DEFAULT_RUNS_LIMIT))],
  );
  return rows.map(toRun);
}
