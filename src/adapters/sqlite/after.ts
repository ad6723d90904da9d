/**
 * Triggers on SQLite: a definition's firing for one upstream run is a row keyed by
 * (room, definition, upstream run), written in the same transaction as the run it starts, so a
 * second firing of the same pair (a repeated round, another leader) finds it and writes nothing.
 */
import { numberedRunId } from "../../domain/after.js";
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
import type { SqliteConnection } from "./connection.js";
import { LIMIT } from "./connection.js";
import { NotFoundError } from "../../ports/errors.js";
import { DEFINITION_COLUMNS, DEFINITION_FROM, RUN_COLUMNS, toDefinition, toRun } from "./rows.js";
import { insertRunInTx } from "./runs.js";
import { checkFence } from "./script-driver.js";

export function listAfterDefinitions(
  c: SqliteConnection,
  roomId: string,
  options: { limit?: number } = {},
): Promise<DefinitionRecord[]> {
  return c.read("list after definitions", () =>
    c
      .all(
        `SELECT ${DEFINITION_COLUMNS} FROM ${DEFINITION_FROM}
          WHERE d.room_id = ? AND json_extract(d.dag, '$.after.dag') IS NOT NULL ORDER BY d.dag_id ${LIMIT}`,
        roomId,
        limitOf(options.limit, DEFAULT_DEFINITIONS_LIMIT),
      )
      .map(toDefinition),
  );
}

export function unfiredUpstreamRuns(
  c: SqliteConnection,
  roomId: string,
  dagId: string,
  upstream: string,
  since: number,
  options: { limit?: number } = {},
): Promise<RunRecord[]> {
  return c.read("unfired upstream runs", () =>
    c
      .all(
        `SELECT ${RUN_COLUMNS} FROM runs r
          WHERE r.room_id = ? AND r.definition_id = ? AND r.status IN ('succeeded','failed','canceled')
            AND r.updated_at >= ?
            AND NOT EXISTS (SELECT 1 FROM after_firings f
                             WHERE f.room_id = r.room_id AND f.dag_id = ? AND f.upstream_run_id = r.run_id)
          ORDER BY r.updated_at, r.rowid ${LIMIT}`,
        roomId,
        upstream,
        since,
        dagId,
        limitOf(options.limit, DEFAULT_LIMIT),
      )
      .map(toRun),
  );
}

function firingOf(
  c: SqliteConnection,
  roomId: string,
  dagId: string,
  upstreamRunId: string,
): AfterFiringRecord | null {
  const row = c.get(
    `SELECT ${FIRING_COLUMNS} FROM after_firings WHERE room_id = ? AND dag_id = ? AND upstream_run_id = ?`,
    roomId,
    dagId,
    upstreamRunId,
  );
  return row === undefined ? null : firingFromRow(row);
}

export function recordAfterFiring(
  c: SqliteConnection,
  fence: LeaderFence,
  input: AfterFiringInput,
): Promise<AfterFiringResult> {
  return c.write("record after firing", (tx) => {
    checkFence(c, tx, "record after firing", fence);
    const { roomId, dagId, upstream } = input;
    const inserted = c.run(
      `INSERT INTO after_firings (room_id, dag_id, upstream_run_id, upstream_dag_id, upstream_status, reason, fired_at, term)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (room_id, dag_id, upstream_run_id) DO NOTHING`,
      roomId,
      dagId,
      upstream.runId,
      upstream.dagId,
      upstream.status,
      input.fire === null ? (input.reason ?? "skipped") : null,
      tx.now,
      fence.term,
    );
    if (inserted === 0) return { kind: "exists", firing: firingOf(c, roomId, dagId, upstream.runId)! };
    if (input.fire === null) {
      const firing = firingOf(c, roomId, dagId, upstream.runId)!;
      tx.log({ roomId, ...skippedLine(fence, firing) });
      tx.touch("runs", roomId);
      return { kind: "skipped", firing };
    }
    const def = c.get<{ last_run_number: number }>(
      "SELECT last_run_number FROM definitions WHERE room_id = ? AND dag_id = ?",
      roomId,
      dagId,
    );
    if (def === undefined) throw new NotFoundError("record after firing", { roomId, definition: dagId });
    let n = Math.max(2, def.last_run_number + 1);
    const taken = (id: string): boolean =>
      c.get("SELECT 1 AS x FROM runs WHERE room_id = ? AND dag_id = ?", roomId, id) !== undefined;
    while (taken(numberedRunId(dagId, n)) && n < MAX_FIRED_RUN_NUMBER) n++;
    const run = insertRunInTx(c, tx, fence, firedRunInput(roomId, dagId, input.fire, n));
    c.run(
      "UPDATE after_firings SET run_id = ?, run_dag_id = ? WHERE room_id = ? AND dag_id = ? AND upstream_run_id = ?",
      run.runId,
      run.dagId,
      roomId,
      dagId,
      upstream.runId,
    );
    const firing = firingOf(c, roomId, dagId, upstream.runId)!;
    for (const line of firedLines(fence, firing)) tx.log({ roomId, ...line });
    return { kind: "fired", run, firing };
  });
}

export function listAfterFirings(
  c: SqliteConnection,
  roomId: string,
  options: { dagId?: string; limit?: number } = {},
): Promise<AfterFiringRecord[]> {
  return c.read("list after firings", () =>
    c
      .all(
        `SELECT ${FIRING_COLUMNS} FROM after_firings
          WHERE room_id = ? AND (? IS NULL OR dag_id = ?) ORDER BY fired_at DESC, rowid DESC ${LIMIT}`,
        roomId,
        options.dagId ?? null,
        options.dagId ?? null,
        limitOf(options.limit, DEFAULT_LIMIT),
      )
      .map(firingFromRow),
  );
}
