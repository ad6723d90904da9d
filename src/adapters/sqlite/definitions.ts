/**
 * Definitions on SQLite (issue 12): the row publishing writes in the same transaction as a
 * definition's first run, the counters later runs move, and the indexed reads by definition.
 */
import type { ParsedDag } from "../../domain/model.js";
import { definitionOf } from "../../domain/params.js";
import { NotFoundError } from "../../ports/errors.js";
import type { DefinitionRecord, RunRecord } from "../../ports/store.js";
import { runNumber } from "../store-common/definitions.js";
import type { SqliteConnection, Tx } from "./connection.js";
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
         first_run_id = excluded.first_run_id, created_at = excluded.created_at, updated_at = excluded.updated_at`,
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
            last_run_number = MAX(last_run_number, COALESCE(?, 0)), updated_at = ?
      WHERE room_id = ? AND dag_id = ?`,
    slotAt,
    slotAt,
    slotAt,
    runNumber(dag.id, of),
    tx.now,
    roomId,
    of,
  );
  if (changed !== 1) throw new NotFoundError("create run", { roomId, definition: of });
}

export function getDefinition(
  c: SqliteConnection,
  roomId: string,
  dagId: string,
): Promise<DefinitionRecord | null> {
  return c.read("get definition", () => {
    const row = c.get(
      `SELECT ${DEFINITION_COLUMNS} FROM ${DEFINITION_FROM} WHERE d.room_id = ? AND d.dag_id = ?`,
      roomId,
      dagId,
    );
    return row === undefined ? null : toDefinition(row);
  });
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
          WHERE d.room_id = ? AND d.schedule_cron IS NOT NULL ORDER BY d.dag_id LIMIT ?`,
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
          WHERE room_id = ? AND definition_id = ? ORDER BY created_at DESC, rowid DESC LIMIT ?`,
        roomId,
        dagId,
        Math.max(0, Math.floor(options.limit ?? DEFAULT_RUNS_LIMIT)),
      )
      .map(toRun),
  );
}
