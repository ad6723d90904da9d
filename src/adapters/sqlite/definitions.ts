/**
 * Definitions on SQLite: the row publishing writes in the same transaction as a
 * definition's first run, the counters later runs move, and the indexed reads by definition.
 */
import type { ParsedDag } from "../../domain/model.js";
import { definitionOf } from "../../domain/params.js";
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
import {
  runNumber,
  scheduleChangeLine,
  scheduleOutcome,
  slotFiredLine,
  slotsSkippedLine,
} from "../store-common/definitions.js";
import type { SqliteConnection, Tx } from "./connection.js";
import { LIMIT } from "./connection.js";
import { markHandledInTx } from "./inbox.js";
import { enqueue } from "../store-common/ops/outbox.js";
import { checkFence, runScript } from "./script-driver.js";
import { DEFINITION_COLUMNS, DEFINITION_FROM, RUN_COLUMNS, toDefinition, toRun } from "./rows.js";

const DEFAULT_SCHEDULED_LIMIT = 1000;
const DEFAULT_RUNS_LIMIT = 100;

/**
 * Inside createRun's transaction, after the run row is written: a DAG without `definition` creates
 * its definition, or adopts one whose first run is gone (its runs keep pointing at it); a DAG with
 * one moves that definition's newest slot and run number. NotFoundError when that one is missing.
 */
export function recordDefinitionInTx(
  c: SqliteConnection,
  tx: Tx,
  roomId: string,
  fence: LeaderFence,
  runId: string,
  dag: ParsedDag,
  hash: string,
  publisher: string,
): void {
  const of = dag.definition;
  if (of === undefined) {
    const doc = definitionOf(dag);
    c.run(
      `INSERT INTO definitions (room_id, dag_id, hash, dag, schedule_cron, schedule_timezone, schedule_missed,
                                publisher, first_run_id, created_at, updated_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (room_id, dag_id) DO UPDATE SET hash = excluded.hash, dag = excluded.dag,
         schedule_cron = excluded.schedule_cron, schedule_timezone = excluded.schedule_timezone,
         schedule_missed = excluded.schedule_missed, publisher = excluded.publisher,
         first_run_id = excluded.first_run_id, created_at = excluded.created_at, updated_at = excluded.updated_at,
         schedule_state = 'active', schedule_state_by = NULL, schedule_state_at = NULL,
         schedule_state_reason = NULL, slots_through = NULL`,
      roomId,
      dag.id,
      hash,
      JSON.stringify(doc),
      doc.schedule?.cron ?? null,
      doc.schedule?.timezone ?? null,
      doc.schedule?.missed ?? null,
      publisher,
      runId,
      tx.now,
      tx.now,
    );
    return;
  }
  const slotAt = dag.slot?.at ?? null;
  const changed = c.run(
    `UPDATE definitions
        SET last_slot_at = CASE WHEN ? IS NULL THEN last_slot_at ELSE MAX(COALESCE(last_slot_at, ?), ?) END,
            slots_through = CASE WHEN ? IS NULL THEN slots_through ELSE MAX(COALESCE(slots_through, ?), ?) END,
            last_run_number = MAX(last_run_number, COALESCE(?, 0)), updated_at = ?
      WHERE room_id = ? AND dag_id = ?`,
    slotAt,
    slotAt,
    slotAt,
    slotAt,
    slotAt,
    slotAt,
    runNumber(dag.id, of),
    tx.now,
    roomId,
    of,
  );
  if (changed !== 1) throw new NotFoundError("create run", { roomId, definition: of });
  if (dag.slot !== undefined) tx.log({ roomId, ...slotFiredLine(fence, runId, of, dag.slot) });
}

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
