/** DAG runs on SQLite: all-or-nothing creation deduplicated by (room, dag_id) and hash, and the leader's decisions. */
import { randomUUID } from "node:crypto";
import type { RunStatus, TaskStatus } from "../../domain/model.js";
import { executedTasks, taskArgs } from "../../domain/params.js";
import { ConflictError, NotFoundError } from "../../ports/errors.js";
import type {
  CommandContext,
  CreateRunInput,
  CreateRunResult,
  LeaderFence,
  RunDecisionResult,
  RunPage,
  RunPageQuery,
  RunRecord,
  TaskRecord,
} from "../../ports/store.js";
import type { Row, SqliteConnection, Tx } from "./connection.js";
import { LIMIT } from "./connection.js";
import { sessionKey } from "./connection.js";
import { checkRoom } from "../store-common/checks.js";
import type { RunDecision } from "../store-common/run-outcomes.js";
import {
  againstExisting,
  decisionOutcome,
  decisionVerdict,
  runStatusAt,
  publishOutcome,
} from "../store-common/run-outcomes.js";
import { cutPage, pageReadLimit, pageRunsWhere } from "../store-common/run-pages.js";
import { recordDefinitionInTx } from "./definitions.js";
import { markHandledInTx } from "./inbox.js";
import { RUN_COLUMNS, toRun, toTask } from "./rows.js";
import { checkFence } from "./script-driver.js";

export const TASK_COLUMNS = `seq, run_id, task_id, status, version, attempt, max_attempts, action, args, needs, labels,
  node_pin, priority, concurrency_key, timeout_ms, queue_timeout_ms, retry_backoff_ms, executor_node, executor_boot,
  lease_expires_at, not_before, deadline, queued_at, started_at, finished_at, exit_code, output, output_bytes, error,
  output_patterns, output_values, gate, gate_state`;

const DEFAULT_LIST_LIMIT = 100;

function runByDag(c: SqliteConnection, roomId: string, dagId: string): RunRecord | undefined {
  const row = c.get(`SELECT ${RUN_COLUMNS} FROM runs WHERE room_id = ? AND dag_id = ?`, roomId, dagId);
  return row === undefined ? undefined : toRun(row);
}

function runById(c: SqliteConnection, runId: string): RunRecord {
  return toRun(c.get(`SELECT ${RUN_COLUMNS} FROM runs WHERE run_id = ?`, runId) as Row);
}

export function createRun(
  c: SqliteConnection,
  ctx: CommandContext,
  input: CreateRunInput,
): Promise<CreateRunResult> {
  return c.write("create run", (tx) => {
    const { fence } = ctx;
    checkFence(c, tx, "create run", fence);
    checkRoom("create run", ctx, input.roomId);
    const dagId = input.dag.id;
    const existing = runByDag(c, input.roomId, dagId);
    let result: CreateRunResult;
    if (existing !== undefined) {
      result = againstExisting(existing, input.hash);
    } else {
      result = { kind: "created", run: insertRunInTx(c, tx, fence, input) };
    }
    if (ctx.inboxEventId !== undefined)
      markHandledInTx(c, tx, fence, ctx.inboxEventId, publishOutcome(result, dagId, input.hash, ctx.verb));
    return result;
  });
}

/** Inside a write: a new run, its definition's row and its tasks, and `run.created`. */
export function insertRunInTx(
  c: SqliteConnection,
  tx: Tx,
  fence: LeaderFence,
  input: CreateRunInput,
): RunRecord {
  const dagId = input.dag.id;
  const runId = randomUUID();
  const status: RunStatus = input.needsConfirmation ? "pending" : "running";
  c.run(
    `INSERT INTO runs (${RUN_COLUMNS}, definition_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?, ?, ?)`,
    runId,
    input.roomId,
    dagId,
    input.hash,
    status,
    input.dag.description,
    input.dag.maxParallel,
    input.publisher,
    input.publishEventId,
    input.needsConfirmation ? tx.now + input.confirmTimeoutMs : null,
    tx.now,
    tx.now,
    JSON.stringify(input.dag),
    input.dag.definition ?? dagId,
  );
  recordDefinitionInTx(c, tx, input.roomId, fence, runId, input.dag, input.hash, input.publisher);
  // Document order is insertion order, so seq gives FIFO within a run and across runs.
  for (const t of executedTasks(input.dag)) {
    c.run(
      `INSERT INTO tasks (run_id, task_id, room_id, status, version, attempt, max_attempts, action, args, needs, labels,
         node_pin, priority, concurrency_key, timeout_ms, queue_timeout_ms, retry_backoff_ms, output_patterns, gate,
         rerun_if_lost)
       VALUES (?, ?, ?, 'blocked', 1, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      runId,
      t.id,
      input.roomId,
      t.retries + 1,
      t.action,
      JSON.stringify(taskArgs(input.dag, t)),
      JSON.stringify(t.needs),
      JSON.stringify(t.on.labels),
      t.on.node,
      t.priority,
      t.concurrencyKey,
      t.timeoutMs,
      t.queueTimeoutMs,
      t.retryBackoffMs,
      t.outputs === undefined ? null : JSON.stringify(t.outputs),
      t.gate === undefined ? null : JSON.stringify(t.gate),
      t.rerunIfLost === false ? 0 : 1,
    );
  }
  tx.log({
    roomId: input.roomId,
    kind: "run.created",
    runId,
    term: fence.term,
    actor: sessionKey(fence.session),
    data: {
      dagId,
      hash: input.hash,
      status,
      tasks: executedTasks(input.dag).length,
      publisher: input.publisher,
    },
  });
  tx.touch("runs", input.roomId);
  tx.touch("tasks", input.roomId);
  return runById(c, runId);
}

/**
 * One leader decision on a run: load, classify, apply where the run's status takes it, mark the
 * inbox row, all in one transaction.
 */
function decide(
  c: SqliteConnection,
  decision: RunDecision,
  ctx: CommandContext,
  roomId: string,
  dagId: string,
  by: string,
  apply: (tx: Tx, run: RunRecord) => void,
): Promise<RunDecisionResult> {
  const operation = `${decision} run`;
  return c.write(operation, (tx) => {
    checkFence(c, tx, operation, ctx.fence);
    checkRoom(operation, ctx, roomId);
    const before = runByDag(c, roomId, dagId);
    if (before === undefined) throw new NotFoundError(operation, { roomId, dagId });
    // Judged on the store's clock now: past its confirmation deadline a pending run is expired.
    const status = runStatusAt(before, tx.now);
    const verdict = decisionVerdict(decision, status);
    const kind = verdict === "apply" ? "done" : verdict;
    if (verdict === "apply") apply(tx, before);
    const run = kind === "done" ? runById(c, before.runId) : { ...before, status };
    if (kind === "done") tx.touch("runs", roomId);
    if (ctx.inboxEventId !== undefined)
      markHandledInTx(c, tx, ctx.fence, ctx.inboxEventId, decisionOutcome(decision, kind, run, dagId, by));
    return { kind, run };
  });
}

function setRunStatus(
  c: SqliteConnection,
  tx: Tx,
  ctx: CommandContext,
  run: RunRecord,
  to: RunStatus,
  by: string,
): void {
  const changed = c.run(
    `UPDATE runs SET status = ?, updated_at = ?, confirmed_by = CASE WHEN ? = 'running' THEN ? ELSE confirmed_by END
      WHERE run_id = ? AND status = ?`,
    to,
    tx.now,
    to,
    by,
    run.runId,
    run.status,
  );
  if (changed !== 1) throw new ConflictError(`set run ${to}`, { status: run.status }, null);
  tx.log({
    roomId: run.roomId,
    kind: `run.${to}`,
    runId: run.runId,
    term: ctx.fence.term,
    actor: sessionKey(ctx.fence.session),
    data: { from: run.status, by },
  });
}

/** blocked/queued → canceled for a run that will never start them (cancel, reject). Returns how many. */
export function cancelUnstartedTasks(
  c: SqliteConnection,
  tx: Tx,
  runId: string,
  roomId: string,
  term: number,
  actor: string,
): number {
  const rows = c.all<{ task_id: string }>(
    `UPDATE tasks SET status = 'canceled', version = version + 1, finished_at = ?,
            error = COALESCE(error, 'canceled before it started')
      WHERE run_id = ? AND status IN ('blocked','queued')
      RETURNING task_id`,
    tx.now,
    runId,
  );
  for (const r of rows) tx.log({ roomId, kind: "task.canceled", runId, taskId: r.task_id, term, actor });
  if (rows.length > 0) tx.touch("tasks", roomId);
  return rows.length;
}

export function confirmRun(
  c: SqliteConnection,
  ctx: CommandContext,
  roomId: string,
  dagId: string,
  by: string,
) {
  return decide(c, "confirm", ctx, roomId, dagId, by, (tx, run) => {
    setRunStatus(c, tx, ctx, run, "running", by);
    tx.touch("tasks", roomId);
  });
}

export function rejectRun(
  c: SqliteConnection,
  ctx: CommandContext,
  roomId: string,
  dagId: string,
  by: string,
) {
  return decide(c, "reject", ctx, roomId, dagId, by, (tx, run) => {
    setRunStatus(c, tx, ctx, run, "rejected", by);
    cancelUnstartedTasks(c, tx, run.runId, roomId, ctx.fence.term, sessionKey(ctx.fence.session));
  });
}

export function cancelRun(
  c: SqliteConnection,
  ctx: CommandContext,
  roomId: string,
  dagId: string,
  by: string,
) {
  return decide(c, "cancel", ctx, roomId, dagId, by, (tx, run) => {
    const actor = sessionKey(ctx.fence.session);
    cancelUnstartedTasks(c, tx, run.runId, roomId, ctx.fence.term, actor);
    // The executor keeps its claim (claim_version): it learns of the cancel on its next renewal.
    const stopping = c.all<{ task_id: string }>(
      `UPDATE tasks SET status = 'canceling', version = version + 1
        WHERE run_id = ? AND status = 'running' RETURNING task_id`,
      run.runId,
    );
    for (const r of stopping)
      tx.log({
        roomId,
        kind: "task.canceling",
        runId: run.runId,
        taskId: r.task_id,
        term: ctx.fence.term,
        actor,
      });
    const live = c.get<{ n: number }>(
      "SELECT COUNT(*) AS n FROM tasks WHERE run_id = ? AND status IN ('running','canceling')",
      run.runId,
    );
    setRunStatus(c, tx, ctx, run, (live?.n ?? 0) > 0 ? "canceling" : "canceled", by);
    tx.touch("tasks", roomId);
  });
}

export function getRun(c: SqliteConnection, roomId: string, dagId: string): Promise<RunRecord | null> {
  return c.read("get run", () => runByDag(c, roomId, dagId) ?? null);
}

export function getRunById(c: SqliteConnection, runId: string): Promise<RunRecord | null> {
  return c.read("get run by id", () => {
    const row = c.get(`SELECT ${RUN_COLUMNS} FROM runs WHERE run_id = ?`, runId);
    return row === undefined ? null : toRun(row);
  });
}

export function listRuns(
  c: SqliteConnection,
  roomId: string,
  options: { statuses?: RunStatus[]; limit?: number } = {},
): Promise<RunRecord[]> {
  return c.read("list runs", () =>
    c
      .all(
        `SELECT ${RUN_COLUMNS} FROM runs
          WHERE room_id = ? AND (? IS NULL OR status IN (SELECT value FROM json_each(?)))
          ORDER BY created_at DESC, rowid DESC ${LIMIT}`,
        roomId,
        options.statuses === undefined ? null : 1,
        JSON.stringify(options.statuses ?? []),
        options.limit ?? DEFAULT_LIST_LIMIT,
      )
      .map(toRun),
  );
}

/** The statement of a page of runs (its plan is tested: test/adapters/run-page-plans.test.ts). */
export function pageRunsStatement(roomId: string, query: RunPageQuery): { sql: string; values: unknown[] } {
  const values: unknown[] = [];
  const param = (v: unknown): string => {
    values.push(v);
    return "?";
  };
  const where = pageRunsWhere(roomId, query, {
    param,
    seq: "rowid",
    statusIn: (statuses) => `status IN (${statuses.map(param).join(", ")})`,
  });
  const limit = param(pageReadLimit(query));
  const sql = `SELECT ${RUN_COLUMNS}, rowid AS page_seq FROM runs WHERE ${where}
    ORDER BY created_at DESC, rowid DESC LIMIT ${limit}`;
  return { sql, values };
}

export function pageRuns(c: SqliteConnection, roomId: string, query: RunPageQuery): Promise<RunPage> {
  const { sql, values } = pageRunsStatement(roomId, query);
  return c.read("page runs", () => cutPage(c.all(sql, ...values), query, toRun));
}

export function listTasks(c: SqliteConnection, runId: string): Promise<TaskRecord[]> {
  return c.read("list tasks", () =>
    c.all(`SELECT ${TASK_COLUMNS} FROM tasks WHERE run_id = ? ORDER BY seq`, runId).map(toTask),
  );
}

/** SQLite binds at most 32,766 values per statement; lists of runs are far shorter, chunked anyway. */
const COUNT_CHUNK = 500;

export function countTaskStatuses(
  c: SqliteConnection,
  runIds: readonly string[],
): Promise<Map<string, Partial<Record<TaskStatus, number>>>> {
  return c.read("count task statuses", () => {
    const out = new Map<string, Partial<Record<TaskStatus, number>>>();
    for (let i = 0; i < runIds.length; i += COUNT_CHUNK) {
      const chunk = runIds.slice(i, i + COUNT_CHUNK);
      const rows = c.all(
        `SELECT run_id, status, count(*) AS n FROM tasks WHERE run_id IN (${chunk.map(() => "?").join(",")})
          GROUP BY run_id, status`,
        ...chunk,
      ) as { run_id: string; status: TaskStatus; n: number }[];
      for (const row of rows) out.set(row.run_id, { ...out.get(row.run_id), [row.status]: Number(row.n) });
    }
    return out;
  });
}

export function getTask(c: SqliteConnection, runId: string, taskId: string): Promise<TaskRecord | null> {
  return c.read("get task", () => {
    const row = c.get(`SELECT ${TASK_COLUMNS} FROM tasks WHERE run_id = ? AND task_id = ?`, runId, taskId);
    return row === undefined ? null : toTask(row);
  });
}
