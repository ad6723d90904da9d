/**
 * The reads of runs and their tasks, written once for both stores: a run by its DAG or id, the
 * room's runs (a list, or a page by keyset: docs/architecture.md §9, "a page of runs"), a run's
 * tasks and the count of their statuses.
 */
import type { RunStatus, TaskStatus } from "../../../domain/model.js";
import type { RunPage, RunPageQuery, RunRecord, TaskRecord } from "../../../ports/store.js";
import { RUN_COLUMNS, TASK_COLUMNS } from "../records.js";
import { cutPage, pageReadLimit } from "../run-pages.js";
import type { Script, Statement } from "../script.js";
import { mappers, p, row, rows, sql } from "../script.js";

/** A row's insertion order (runs, after_firings): SQLite's rowid, PostgreSQL's seq column. */
export const SEQ = p.only({ sqlite: "rowid", postgres: "seq" });

const DEFAULT_LIST_LIMIT = 100;

const BY_DAG = sql("a run by its DAG")`
  SELECT ${RUN_COLUMNS} FROM runs WHERE room_id = ${p.text("roomId")} AND dag_id = ${p.text("dagId")}`;

const BY_ID = sql("a run by its id")`SELECT ${RUN_COLUMNS} FROM runs WHERE run_id = ${p.text("runId")}`;

// Two statements, one per filter, so that each has its own plan.
const LIST = sql("the room's runs")`
  SELECT ${RUN_COLUMNS} FROM runs WHERE room_id = ${p.text("roomId")}
   ORDER BY created_at DESC, ${SEQ} DESC ${p.limit("limit")}`;

const LIST_IN = sql("the room's runs in some statuses")`
  SELECT ${RUN_COLUMNS} FROM runs WHERE room_id = ${p.text("roomId")} AND status${p.inList("statuses")}
   ORDER BY created_at DESC, ${SEQ} DESC ${p.limit("limit")}`;

/** How much of each task's kept output a run's list carries: its last characters (Store.listTasks). */
export const LISTED_OUTPUT_CHARS = 4096;
const [BEFORE_OUTPUT = "", AFTER_OUTPUT = ""] = TASK_COLUMNS.split(", output, ");
const OUTPUT_TAIL = p.only({
  postgres: `right(output, ${LISTED_OUTPUT_CHARS})`,
  sqlite: `substr(output, -${LISTED_OUTPUT_CHARS})`,
});

const TASKS = sql("a run's tasks")`
  SELECT ${BEFORE_OUTPUT}, ${OUTPUT_TAIL} AS output, ${AFTER_OUTPUT}
    FROM tasks WHERE run_id = ${p.text("runId")} ORDER BY seq`;

const TASK = sql("a task")`
  SELECT ${TASK_COLUMNS} FROM tasks WHERE run_id = ${p.text("runId")} AND task_id = ${p.text("taskId")}`;

const COUNTS = sql("the statuses of some runs' tasks")`
  SELECT run_id, status, count(*) AS n FROM tasks WHERE run_id${p.inList("runIds")} GROUP BY run_id, status`;

export function* getRun(roomId: string, dagId: string): Script<RunRecord | null> {
  const m = yield* mappers();
  const r = yield* row(BY_DAG, { roomId, dagId });
  return r === undefined ? null : m.toRun(r);
}

export function* getRunById(runId: string): Script<RunRecord | null> {
  const m = yield* mappers();
  const r = yield* row(BY_ID, { runId });
  return r === undefined ? null : m.toRun(r);
}

export function* listRuns(
  roomId: string,
  options: { statuses?: RunStatus[]; limit?: number } = {},
): Script<RunRecord[]> {
  const m = yield* mappers();
  const limit = Math.max(0, Math.floor(options.limit ?? DEFAULT_LIST_LIMIT));
  const found =
    options.statuses === undefined
      ? yield* rows(LIST, { roomId, limit })
      : yield* rows(LIST_IN, { roomId, statuses: options.statuses, limit });
  return found.map(m.toRun);
}

/**
 * The statement of a page of runs for the filters asked (only those, so each combination is its
 * own statement with its own plan, and a prepared statement never falls back to a generic plan that
 * ignores the indexes); its plans are tested: test/adapters/run-page-plans.test.ts. The position is
 * a keyset condition written so that its first term is a range on the index's created_at.
 */
export function pageRunsStatement(query: RunPageQuery): Statement {
  const statuses = query.statuses === undefined ? "" : query.statuses.length === 1 ? "one" : "many";
  const shape = `${query.definition !== undefined}/${statuses}/${query.after !== undefined}`;
  let statement = PAGES.get(shape);
  if (statement === undefined) {
    const parts: Statement["parts"][number][] = [
      `SELECT ${RUN_COLUMNS}, `,
      SEQ,
      " AS page_seq FROM runs WHERE room_id = ",
      p.text("roomId"),
    ];
    if (query.definition !== undefined) parts.push(" AND definition_id = ", p.text("definition"));
    if (statuses === "one") parts.push(" AND status = ", p.text("status"));
    if (statuses === "many") parts.push(" AND status", p.inList("statuses"));
    if (query.after !== undefined)
      parts.push(
        " AND created_at <= ",
        p.int("at"),
        " AND (created_at < ",
        p.int("at"),
        " OR ",
        SEQ,
        " < ",
        p.int("seq"),
        ")",
      );
    parts.push(" ORDER BY created_at DESC, ", SEQ, " DESC ", p.limit("limit"));
    statement = { name: `a page of runs (${shape})`, parts };
    PAGES.set(shape, statement);
  }
  return statement;
}
const PAGES = new Map<string, Statement>();

/** The values of pageRunsStatement(query). */
export function pageRunsValues(roomId: string, query: RunPageQuery): Record<string, unknown> {
  return {
    roomId,
    definition: query.definition,
    status: query.statuses?.[0],
    statuses: query.statuses,
    at: query.after?.createdAt,
    seq: query.after?.seq,
    limit: pageReadLimit(query),
  };
}

export function* pageRuns(roomId: string, query: RunPageQuery): Script<RunPage> {
  const m = yield* mappers();
  const found = yield* rows(pageRunsStatement(query), pageRunsValues(roomId, query));
  return cutPage(found, query, m.toRun);
}

export function* listTasks(runId: string): Script<TaskRecord[]> {
  const m = yield* mappers();
  return (yield* rows(TASKS, { runId })).map(m.toTask);
}

export function* getTask(runId: string, taskId: string): Script<TaskRecord | null> {
  const m = yield* mappers();
  const r = yield* row(TASK, { runId, taskId });
  return r === undefined ? null : m.toTask(r);
}

export function* countTaskStatuses(
  runIds: readonly string[],
): Script<Map<string, Partial<Record<TaskStatus, number>>>> {
  const out = new Map<string, Partial<Record<TaskStatus, number>>>();
  if (runIds.length === 0) return out;
  const found = yield* rows<{ run_id: string; status: TaskStatus; n: number | string }>(COUNTS, {
    runIds: [...runIds],
  });
  for (const r of found) out.set(r.run_id, { ...out.get(r.run_id), [r.status]: Number(r.n) });
  return out;
}
