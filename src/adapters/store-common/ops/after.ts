/**
 * Triggers, written once for both stores (docs/architecture.md §3, "Trigger"): a definition's firing
 * for one upstream run is a row keyed by (room, definition, upstream run), written in the same
 * fenced transaction as the run it starts, so a second firing of the same pair (a repeated round,
 * another leader) finds the row and writes nothing. Whether a firing fires is the app's (afterFiring
 * in src/app/after.ts); this holds it to once.
 */
import { numberedRunId } from "../../../domain/after.js";
import { NotFoundError } from "../../../ports/errors.js";
import type {
  AfterFiringInput,
  AfterFiringRecord,
  AfterFiringResult,
  DefinitionRecord,
  LeaderFence,
  RunRecord,
} from "../../../ports/store.js";
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
} from "../after.js";
import { DEFINITION_COLUMNS, DEFINITION_FROM, RUN_COLUMNS } from "../records.js";
import type { Script } from "../script.js";
import { log, mappers, p, row, rows, sql, touch } from "../script.js";
import { holdFence } from "./fence.js";
import { SEQ } from "./run-reads.js";
import { insertRun } from "./runs.js";

const AFTER_DEFINITIONS = sql("the room's definitions with an after")`
  SELECT ${DEFINITION_COLUMNS} FROM ${DEFINITION_FROM}
   WHERE d.room_id = ${p.text("roomId")} AND d.dag -> 'after' ->> 'dag' IS NOT NULL
   ORDER BY d.dag_id ${p.limit("limit")}`;

const UNFIRED = sql("an upstream definition's ended runs not fired for a definition")`
  SELECT ${RUN_COLUMNS} FROM runs r
   WHERE r.room_id = ${p.text("roomId")} AND r.definition_id = ${p.text("upstream")}
     AND r.status IN ('succeeded','failed','canceled') AND r.updated_at >= ${p.int("since")}
     AND NOT EXISTS (SELECT 1 FROM after_firings f
                      WHERE f.room_id = r.room_id AND f.dag_id = ${p.text("dagId")} AND f.upstream_run_id = r.run_id)
   ORDER BY r.updated_at, r.${SEQ} ${p.limit("limit")}`;

const FIRING = sql("a firing")`
  SELECT ${FIRING_COLUMNS} FROM after_firings
   WHERE room_id = ${p.text("roomId")} AND dag_id = ${p.text("dagId")} AND upstream_run_id = ${p.text("upstreamRunId")}`;

// Insert-or-ignore on the key: a repeated firing (another round, another leader) inserts nothing.
const INSERT_FIRING = sql("a firing, recorded once")`
  INSERT INTO after_firings (room_id, dag_id, upstream_run_id, upstream_dag_id, upstream_status, reason, fired_at, term)
  VALUES (${p.text("roomId")}, ${p.text("dagId")}, ${p.text("upstreamRunId")}, ${p.text("upstreamDagId")},
          ${p.text("upstreamStatus")}, ${p.text("reason")}, ${p.now}, ${p.int("term")})
  ON CONFLICT (room_id, dag_id, upstream_run_id) DO NOTHING
  RETURNING ${FIRING_COLUMNS}`;

// Locked on PostgreSQL while the new run's number is chosen.
const LAST_NUMBER = sql("a definition's last run number, locked")`
  SELECT last_run_number FROM definitions
   WHERE room_id = ${p.text("roomId")} AND dag_id = ${p.text("dagId")}${p.only({ postgres: " FOR UPDATE" })}`;

const TAKEN = sql("a run's name, taken")`
  SELECT 1 AS taken FROM runs WHERE room_id = ${p.text("roomId")} AND dag_id = ${p.text("dagId")}`;

const FIRED = sql("a firing, with the run it started")`
  UPDATE after_firings SET run_id = ${p.text("runId")}, run_dag_id = ${p.text("runDagId")}
   WHERE room_id = ${p.text("roomId")} AND dag_id = ${p.text("dagId")} AND upstream_run_id = ${p.text("upstreamRunId")}
  RETURNING ${FIRING_COLUMNS}`;

const FIRINGS = sql("the room's firings")`
  SELECT ${FIRING_COLUMNS} FROM after_firings
   WHERE room_id = ${p.text("roomId")} AND (${p.text("dagId")} IS NULL OR dag_id = ${p.text("dagId")})
   ORDER BY fired_at DESC, ${SEQ} DESC ${p.limit("limit")}`;

export function* listAfterDefinitions(
  roomId: string,
  options: { limit?: number } = {},
): Script<DefinitionRecord[]> {
  const m = yield* mappers();
  const found = yield* rows(AFTER_DEFINITIONS, {
    roomId,
    limit: limitOf(options.limit, DEFAULT_DEFINITIONS_LIMIT),
  });
  return found.map(m.toDefinition);
}

export function* unfiredUpstreamRuns(
  roomId: string,
  dagId: string,
  upstream: string,
  since: number,
  options: { limit?: number } = {},
): Script<RunRecord[]> {
  const m = yield* mappers();
  const found = yield* rows(UNFIRED, {
    roomId,
    upstream,
    since,
    dagId,
    limit: limitOf(options.limit, DEFAULT_LIMIT),
  });
  return found.map(m.toRun);
}

export function* recordAfterFiring(fence: LeaderFence, input: AfterFiringInput): Script<AfterFiringResult> {
  const operation = "record after firing";
  yield* holdFence(operation, fence);
  const { roomId, dagId, upstream } = input;
  const key = { roomId, dagId, upstreamRunId: upstream.runId };
  const inserted = yield* row(INSERT_FIRING, {
    ...key,
    upstreamDagId: upstream.dagId,
    upstreamStatus: upstream.status,
    reason: input.fire === null ? (input.reason ?? "skipped") : null,
    term: fence.term,
  });
  if (inserted === undefined) return { kind: "exists", firing: yield* firingOf(operation, key) };
  if (input.fire === null) {
    const firing = firingFromRow(inserted);
    yield* log(roomId, skippedLine(fence, firing));
    yield* touch("runs", roomId);
    return { kind: "skipped", firing };
  }
  const def = yield* row<{ last_run_number: number }>(LAST_NUMBER, { roomId, dagId });
  if (def === undefined) throw new NotFoundError(operation, { roomId, definition: dagId });
  // The first free `<id>.N` from the definition's last number: a run of any definition may hold a name.
  let n = Math.max(2, Number(def.last_run_number) + 1);
  while (
    n < MAX_FIRED_RUN_NUMBER &&
    (yield* row(TAKEN, { roomId, dagId: numberedRunId(dagId, n) })) !== undefined
  )
    n++;
  const run = yield* insertRun(fence, firedRunInput(roomId, dagId, input.fire, n));
  const fired = yield* row(FIRED, { ...key, runId: run.runId, runDagId: run.dagId });
  const firing = fired === undefined ? yield* firingOf(operation, key) : firingFromRow(fired);
  for (const line of firedLines(fence, firing)) yield* log(roomId, line);
  return { kind: "fired", run, firing };
}

function* firingOf(
  operation: string,
  key: { roomId: string; dagId: string; upstreamRunId: string },
): Script<AfterFiringRecord> {
  const found = yield* row(FIRING, key);
  if (found === undefined) throw new NotFoundError(operation, key);
  return firingFromRow(found);
}

export function* listAfterFirings(
  roomId: string,
  options: { dagId?: string; limit?: number } = {},
): Script<AfterFiringRecord[]> {
  const found = yield* rows(FIRINGS, {
    roomId,
    dagId: options.dagId ?? null,
    limit: limitOf(options.limit, DEFAULT_LIMIT),
  });
  return found.map(firingFromRow);
}
