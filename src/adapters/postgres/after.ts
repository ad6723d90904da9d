/**
 * Triggers on PostgreSQL: a definition's firing for one upstream run is a row keyed by
 * (room, definition, upstream run), written in the same transaction as the run it starts. A second
 * firing of the same pair waits on the key and then writes nothing; the definition's row is locked
 * while the new run's number is chosen.
 */
import { numberedRunId } from "../../domain/after.js";
import { NotFoundError } from "../../ports/errors.js";
import type {
  AfterFiringInput,
  AfterFiringRecord,
  AfterFiringResult,
  DefinitionRecord,
  LeaderFence,
  RunRecord,
} from "../../ports/store.js";
import {
  DEFAULT_DEFINITIONS_LIMIT,
  DEFAULT_LIMIT,
  FIRING_COLUMNS,
  firedLines,
  firedRunInput,
  firingFromRow,
  limitOf,
  MAX_FIRED_RUN_NUMBER,
  skippedLine,
} from "../store-common/after.js";
import type { Db, Tx } from "./db.js";
import { DEFINITION_COLUMNS, DEFINITION_FROM, RUN_COLUMNS, toDefinition, toRun } from "./rows.js";
import { insertRunInTx } from "./runs.js";
import { NOW } from "./sql.js";
import { lockFence } from "./script-driver.js";

export async function listAfterDefinitions(
  db: Db,
  roomId: string,
  options: { limit?: number } = {},
): Promise<DefinitionRecord[]> {
  const rows = await db.one(
    "list after definitions",
    `SELECT ${DEFINITION_COLUMNS} FROM ${DEFINITION_FROM}
      WHERE d.room_id = $1 AND d.dag ? 'after' ORDER BY d.dag_id LIMIT $2`,
    [roomId, limitOf(options.limit, DEFAULT_DEFINITIONS_LIMIT)],
  );
  return rows.map(toDefinition);
}

export async function unfiredUpstreamRuns(
  db: Db,
  roomId: string,
  dagId: string,
  upstream: string,
  since: number,
  options: { limit?: number } = {},
): Promise<RunRecord[]> {
  const rows = await db.one(
    "unfired upstream runs",
    `SELECT ${RUN_COLUMNS} FROM runs r
      WHERE r.room_id = $1 AND r.definition_id = $2 AND r.status IN ('succeeded','failed','canceled')
        AND r.updated_at >= $3
        AND NOT EXISTS (SELECT 1 FROM after_firings f
                         WHERE f.room_id = r.room_id AND f.dag_id = $4 AND f.upstream_run_id = r.run_id)
      ORDER BY r.updated_at, r.seq LIMIT $5`,
    [roomId, upstream, since, dagId, limitOf(options.limit, DEFAULT_LIMIT)],
  );
  return rows.map(toRun);
}

async function firingOf(
  tx: Tx,
  roomId: string,
  dagId: string,
  upstreamRunId: string,
): Promise<AfterFiringRecord> {
  const { rows } = await tx.query(
    `SELECT ${FIRING_COLUMNS} FROM after_firings WHERE room_id = $1 AND dag_id = $2 AND upstream_run_id = $3`,
    [roomId, dagId, upstreamRunId],
  );
  return firingFromRow(rows[0]!);
}

export function recordAfterFiring(
  db: Db,
  fence: LeaderFence,
  input: AfterFiringInput,
): Promise<AfterFiringResult> {
  return db.tx("record after firing", async (tx) => {
    await lockFence(tx, "record after firing", fence);
    const { roomId, dagId, upstream } = input;
    const { rowCount } = await tx.query(
      `INSERT INTO after_firings (room_id, dag_id, upstream_run_id, upstream_dag_id, upstream_status, reason, fired_at, term)
       VALUES ($2, $3, $4, $5, $6, $7, ${NOW}, $8) ON CONFLICT (room_id, dag_id, upstream_run_id) DO NOTHING`,
      [
        tx.clockParam,
        roomId,
        dagId,
        upstream.runId,
        upstream.dagId,
        upstream.status,
        input.fire === null ? (input.reason ?? "skipped") : null,
        fence.term,
      ],
    );
    if (rowCount !== 1) return { kind: "exists", firing: await firingOf(tx, roomId, dagId, upstream.runId) };
    if (input.fire === null) {
      const firing = await firingOf(tx, roomId, dagId, upstream.runId);
      tx.log(roomId, skippedLine(fence, firing));
      tx.touch("runs", roomId);
      return { kind: "skipped", firing };
    }
    const def = await tx.query<{ last_run_number: number }>(
      "SELECT last_run_number FROM definitions WHERE room_id = $1 AND dag_id = $2 FOR UPDATE",
      [roomId, dagId],
    );
    if (def.rows[0] === undefined)
      throw new NotFoundError("record after firing", { roomId, definition: dagId });
    const from = Math.max(2, Number(def.rows[0].last_run_number) + 1);
    // The first free `<id>.N` from there: one statement over the numbers runs of it already hold.
    const taken = await tx.query<{ dag_id: string }>(
      "SELECT dag_id FROM runs WHERE room_id = $1 AND definition_id = $2",
      [roomId, dagId],
    );
    const names = new Set(taken.rows.map((r) => r.dag_id));
    let n = from;
    while (names.has(numberedRunId(dagId, n)) && n < MAX_FIRED_RUN_NUMBER) n++;
    const run = await insertRunInTx(tx, fence, firedRunInput(roomId, dagId, input.fire, n));
    await tx.query(
      "UPDATE after_firings SET run_id = $1, run_dag_id = $2 WHERE room_id = $3 AND dag_id = $4 AND upstream_run_id = $5",
      [run.runId, run.dagId, roomId, dagId, upstream.runId],
    );
    const firing = await firingOf(tx, roomId, dagId, upstream.runId);
    for (const line of firedLines(fence, firing)) tx.log(roomId, line);
    return { kind: "fired", run, firing };
  });
}

export async function listAfterFirings(
  db: Db,
  roomId: string,
  options: { dagId?: string; limit?: number } = {},
): Promise<AfterFiringRecord[]> {
  const rows = await db.one(
    "list after firings",
    `SELECT ${FIRING_COLUMNS} FROM after_firings
      WHERE room_id = $1 AND ($2::text IS NULL OR dag_id = $2) ORDER BY fired_at DESC, seq DESC LIMIT $3`,
    [roomId, options.dagId ?? null, limitOf(options.limit, DEFAULT_LIMIT)],
  );
  return rows.map(firingFromRow);
}
