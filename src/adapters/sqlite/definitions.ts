/**
 * Definitions on SQLite: the row publishing writes in the same transaction as a
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
import type { SqliteConnection } from "./connection.js";
import { LIMIT } from "./connection.js";
import { markHandledInTx } from "./inbox.js";
import { enqueue } from "../store-common/ops/outbox.js";
import { checkFence, runScript } from "./script-driver.js";
import { DEFINITION_COLUMNS, DEFINITION_FROM, RUN_COLUMNS, toDefinition, toRun } from "./rows.js";

const DEFAULT_SCHEDULED_LIMIT = 1000;
const DEFAULT_RUNS_LIMIT = 100;

/**
 * Pause, resume or delete a schedule (DefinitionStore.changeSchedule): the decision is
 * scheduleVerdict's, applied with one guarded UPDATE on the state read in the same transaction.
 */
export function changeSchedule(
  c: SqliteConnection,
  ctx: CommandContext,
  roomId: string,
  dagId: string,
  change: ScheduleChange,
  notices: OutboxMessageInput[] = [],
): Promise<ScheduleChangeResult> {
  const operation = `${change.action} schedule`;
  return c.write(operation, (tx) => {
    checkFence(c, tx, operation, ctx.fence);
    checkRoom(operation, ctx, roomId);
    const before = readDefinition(c, roomId, dagId);
    if (before === null || before.schedule === null) throw new NotFoundError(operation, { roomId, dagId });
    const verdict = scheduleVerdict(change.action, before.scheduleState.state);
    if (verdict.kind === "done") {
      c.run(
        `UPDATE definitions SET schedule_state = ?, schedule_state_by = ?, schedule_state_at = ?,
                schedule_state_reason = ?, updated_at = ?,
                slots_through = CASE WHEN ? THEN MAX(COALESCE(slots_through, ?), ?) ELSE slots_through END
          WHERE room_id = ? AND dag_id = ? AND schedule_state = ?`,
        verdict.to,
        change.by,
        tx.now,
        change.reason,
        tx.now,
        change.action === "resume" ? 1 : 0,
        tx.now,
        tx.now,
        roomId,
        dagId,
        before.scheduleState.state,
      );
      tx.log({ roomId, ...scheduleChangeLine(ctx.fence, dagId, change) });
      if (notices.length > 0) runScript(c, tx, enqueue(ctx.fence, notices));
      tx.touch("runs", roomId);
    }
    const definition = verdict.kind === "done" ? (readDefinition(c, roomId, dagId) ?? before) : before;
    if (ctx.inboxEventId !== undefined)
      markHandledInTx(c, tx, ctx.fence, ctx.inboxEventId, scheduleOutcome(change, verdict.kind, definition));
    return { kind: verdict.kind, definition };
  });
}

export function skipScheduleSlots(
  c: SqliteConnection,
  fence: LeaderFence,
  roomId: string,
  dagId: string,
  skipped: SkippedSlots,
): Promise<void> {
  return c.write("skip schedule slots", (tx) => {
    checkFence(c, tx, "skip schedule slots", fence);
    checkRoom("skip schedule slots", { fence }, roomId);
    const changed = c.run(
      `UPDATE definitions SET slots_through = MAX(COALESCE(slots_through, ?), ?), updated_at = ?
        WHERE room_id = ? AND dag_id = ?`,
      skipped.last,
      skipped.last,
      tx.now,
      roomId,
      dagId,
    );
    if (changed !== 1) throw new NotFoundError("skip schedule slots", { roomId, dagId });
    tx.log({ roomId, ...slotsSkippedLine(fence, dagId, skipped) });
  });
}

function readDefinition(c: SqliteConnection, roomId: string, dagId: string): DefinitionRecord | null {
  const row = c.get(
    `SELECT ${DEFINITION_COLUMNS} FROM ${DEFINITION_FROM} WHERE d.room_id = ? AND d.dag_id = ?`,
    roomId,
    dagId,
  );
  return row === undefined ? null : toDefinition(row);
}

export function getDefinition(
  c: SqliteConnection,
  roomId: string,
  dagId: string,
): Promise<DefinitionRecord | null> {
  return c.read("get definition", () => readDefinition(c, roomId, dagId));
}

export function listScheduledDefinitions(
  c: SqliteConnection,
  roomId: string,
  options: { limit?: number } = {},
): Promise<DefinitionRecord[]> {
  return c.read("list scheduled definitions", () =>
    c
      .all(
        `SELECT ${DEFINITION_COLUMNS} FROM ${DEFINITION_FROM}
          WHERE d.room_id = ? AND d.schedule_cron IS NOT NULL ORDER BY d.dag_id ${LIMIT}`,
        roomId,
        Math.max(0, Math.floor(options.limit ?? DEFAULT_SCHEDULED_LIMIT)),
      )
      .map(toDefinition),
  );
}

export function listDefinitionRuns(
  c: SqliteConnection,
  roomId: string,
  dagId: string,
  options: { limit?: number } = {},
): Promise<RunRecord[]> {
  return c.read("list definition runs", () =>
    c
      .all(
        `SELECT ${RUN_COLUMNS} FROM runs INDEXED BY runs_definition
          WHERE room_id = ? AND definition_id = ? ORDER BY created_at DESC, rowid DESC ${LIMIT}`,
        roomId,
        dagId,
        Math.max(0, Math.floor(options.limit ?? DEFAULT_RUNS_LIMIT)),
      )
      .map(toRun),
  );
}
