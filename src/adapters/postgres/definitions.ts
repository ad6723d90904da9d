/**
 * Definitions on PostgreSQL (issue 12): the row publishing writes in the same transaction as a
 * definition's first run, the counters later runs move, and the indexed reads by definition.
 */
import type { ParsedDag } from "../../domain/model.js";
import { definitionOf } from "../../domain/params.js";
import { NotFoundError } from "../../ports/errors.js";
import type { DefinitionRecord, RunRecord } from "../../ports/store.js";
import { runNumber } from "../store-common/definitions.js";
import type { Db, Tx } from "./db.js";
import { DEFINITION_COLUMNS, DEFINITION_FROM, RUN_COLUMNS, toDefinition, toRun } from "./rows.js";
import { json, NOW } from "./sql.js";

const DEFAULT_SCHEDULED_LIMIT = 1000;
const DEFAULT_RUNS_LIMIT = 100;

/**
 * Inside createRun's transaction, after the run row is written: a DAG without `definition` creates
 * its definition, or adopts one whose first run is gone (its runs keep pointing at it); a DAG with
 * one moves that definition's newest slot and run number. NotFoundError when that one is missing.
 */
export async function recordDefinitionInTx(
  tx: Tx,
  roomId: string,
  runId: string,
  dag: ParsedDag,
  hash: string,
  publisher: string,
): Promise<void> {
  const of = dag.definition;
  if (of === undefined) {
    const doc = definitionOf(dag);
    await tx.query(
      `INSERT INTO definitions (room_id, dag_id, hash, dag, schedule_cron, schedule_timezone, schedule_missed,
                                publisher, first_run_id, created_at, updated_at)
       VALUES ($2, $3, $4, $5::jsonb, $6, $7, $8, $9, $10, ${NOW}, ${NOW})
       ON CONFLICT (room_id, dag_id) DO UPDATE SET hash = excluded.hash, dag = excluded.dag,
         schedule_cron = excluded.schedule_cron, schedule_timezone = excluded.schedule_timezone,
         schedule_missed = excluded.schedule_missed, publisher = excluded.publisher,
         first_run_id = excluded.first_run_id, created_at = excluded.created_at, updated_at = excluded.updated_at`,
      [
        tx.clockParam,
        roomId,
        dag.id,
        hash,
        json(doc),
        doc.schedule?.cron ?? null,
        doc.schedule?.timezone ?? null,
        doc.schedule?.missed ?? null,
        publisher,
        runId,
      ],
    );
    return;
  }
  const { rowCount } = await tx.query(
    `UPDATE definitions SET last_slot_at = GREATEST(last_slot_at, $2::bigint),
            last_run_number = GREATEST(last_run_number, COALESCE($3::integer, 0)), updated_at = ${NOW}
      WHERE room_id = $4 AND dag_id = $5`,
    [tx.clockParam, dag.slot?.at ?? null, runNumber(dag.id, of), roomId, of],
  );
  if (rowCount !== 1) throw new NotFoundError("create run", { roomId, definition: of });
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
