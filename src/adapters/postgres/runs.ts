/** DAG runs on PostgreSQL: all-or-nothing creation deduplicated by (room, dag_id) and hash, and the leader's decisions. */
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
import type { Db, Row, Tx } from "./db.js";
import { json, NOW, sessionKey } from "./sql.js";
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
import { RUN_COLUMNS, TASK_COLUMNS, toRun, toTask } from "./rows.js";
import { lockFence } from "./script-driver.js";

const DEFAULT_LIST_LIMIT = 100;

async function runByDag(tx: Tx, roomId: string, dagId: string, lock = false): Promise<RunRecord | undefined> {
  const { rows } = await tx.query(
    `SELECT ${RUN_COLUMNS} FROM runs WHERE room_id = $1 AND dag_id = $2${lock ? " FOR UPDATE" : ""}`,
    [roomId, dagId],
  );
  return rows[0] === undefined ? undefined : toRun(rows[0]);
}

export function createRun(db: Db, ctx: CommandContext, input: CreateRunInput): Promise<CreateRunResult> {
  return db.tx("create run", async (tx) => {
    const { fence } = ctx;
    await lockFence(tx, "create run", fence);
    checkRoom("create run", ctx, input.roomId);
    const dagId = input.dag.id;
    const existing = await runByDag(tx, input.roomId, dagId);
    let result: CreateRunResult;
    if (existing !== undefined) {
      result = againstExisting(existing, input.hash);
    } else {
      result = { kind: "created", run: await insertRunInTx(tx, fence, input) };
    }
    if (ctx.inboxEventId !== undefined)
      await markHandledInTx(tx, fence, ctx.inboxEventId, publishOutcome(result, dagId, input.hash, ctx.verb));
    return result;
  });
}

/** Inside a transaction: a new run, its definition's row and its tasks, and `run.created`. */
export async function insertRunInTx(tx: Tx, fence: LeaderFence, input: CreateRunInput): Promise<RunRecord> {
  const dagId = input.dag.id;
  const runId = randomUUID();
  const status: RunStatus = input.needsConfirmation ? "pending" : "running";
  const inserted = await tx.query(
    `INSERT INTO runs (run_id, room_id, dag_id, hash, status, description, max_parallel, publisher, publish_event_id,
                       confirm_deadline, created_at, updated_at, dag, definition_id)
     VALUES ($2, $3, $4, $5, $6, $7, $8, $9, $10,
             CASE WHEN $11::boolean THEN ${NOW} + $12::bigint END, ${NOW}, ${NOW}, $13::jsonb, $14)
     RETURNING ${RUN_COLUMNS}`,
    [
      tx.clockParam,
      runId,
      input.roomId,
      dagId,
      input.hash,
      status,
      input.dag.description,
      input.dag.maxParallel,
      input.publisher,
      input.publishEventId,
      input.needsConfirmation,
      Math.ceil(input.confirmTimeoutMs),
      json(input.dag),
      input.dag.definition ?? dagId,
    ],
  );
  await recordDefinitionInTx(tx, input.roomId, fence, runId, input.dag, input.hash, input.publisher);
  // One statement for every task; ORDER BY n draws seq in document order (FIFO within a run).
  await tx.query(
    `INSERT INTO tasks (run_id, task_id, room_id, status, version, attempt, max_attempts, action, args, needs, labels,
                        node_pin, priority, concurrency_key, timeout_ms, queue_timeout_ms, retry_backoff_ms,
                        output_patterns, gate, rerun_if_lost)
     SELECT $1, x.id, $2, 'blocked', 1, 1, x.retries + 1, x.action, x.args, x.needs, x.labels,
            x.node, x.priority, x.concurrency_key, x.timeout_ms, x.queue_timeout_ms, x.retry_backoff_ms,
            x.output_patterns, x.gate, x.rerun_if_lost
       FROM jsonb_to_recordset($3::jsonb) AS x(n int, id text, action text, args jsonb, needs text[], labels text[],
            node text, priority int, concurrency_key text, timeout_ms bigint, queue_timeout_ms bigint,
            retry_backoff_ms bigint, retries int, output_patterns jsonb, gate jsonb, rerun_if_lost boolean)
      ORDER BY x.n`,
    [
      runId,
      input.roomId,
      json(
        executedTasks(input.dag).map((t, n) => ({
          n,
          id: t.id,
          action: t.action,
          args: taskArgs(input.dag, t),
          needs: t.needs,
          labels: t.on.labels,
          node: t.on.node,
          priority: t.priority,
          concurrency_key: t.concurrencyKey,
          timeout_ms: t.timeoutMs,
          queue_timeout_ms: t.queueTimeoutMs,
          retry_backoff_ms: t.retryBackoffMs,
          retries: t.retries,
          output_patterns: t.outputs ?? null,
          gate: t.gate ?? null,
          rerun_if_lost: t.rerunIfLost ?? true,
        })),
      ),
    ],
  );
  tx.log(input.roomId, {
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
  return toRun(inserted.rows[0] as Row);
}

/**
 * One leader decision on a run: lock, classify, apply where the run's status takes it (returning
 * the run as it is after), mark the inbox row, all in one transaction.
 */
function decide(
  db: Db,
  decision: RunDecision,
  ctx: CommandContext,
  roomId: string,
  dagId: string,
  by: string,
  apply: (tx: Tx, run: RunRecord) => Promise<RunRecord>,
): Promise<RunDecisionResult> {
  const operation = `${decision} run`;
  return db.tx(operation, async (tx) => {
    await lockFence(tx, operation, ctx.fence);
    checkRoom(operation, ctx, roomId);
    const before = await runByDag(tx, roomId, dagId, true);
    if (before === undefined) throw new NotFoundError(operation, { roomId, dagId });
    // Judged on the store's clock now: past its confirmation deadline a pending run is expired.
    const { rows: nowRows } = await tx.query<{ now: string }>(`SELECT ${NOW} AS now`, [tx.clockParam]);
    const status = runStatusAt(before, Number(nowRows[0]?.now));
    const verdict = decisionVerdict(decision, status);
    const kind = verdict === "apply" ? "done" : verdict;
    const run = verdict === "apply" ? await apply(tx, before) : { ...before, status };
    if (kind === "done") tx.touch("runs", roomId);
    if (ctx.inboxEventId !== undefined)
      await markHandledInTx(tx, ctx.fence, ctx.inboxEventId, decisionOutcome(decision, kind, run, dagId, by));
    return { kind, run };
  });
}

async function setRunStatus(
  tx: Tx,
  ctx: CommandContext,
  run: RunRecord,
  to: RunStatus,
  by: string,
): Promise<RunRecord> {
  const { rows } = await tx.query(
    `UPDATE runs SET status = $2, updated_at = ${NOW},
            confirmed_by = CASE WHEN $2 = 'running' THEN $3 ELSE confirmed_by END
      WHERE run_id = $4 AND status = $5
      RETURNING ${RUN_COLUMNS}`,
    [tx.clockParam, to, by, run.runId, run.status],
  );
  if (rows[0] === undefined) throw new ConflictError(`set run ${to}`, { status: run.status }, null);
  tx.log(run.roomId, {
    kind: `run.${to}`,
    runId: run.runId,
    term: ctx.fence.term,
    actor: sessionKey(ctx.fence.session),
    data: { from: run.status, by },
  });
  return toRun(rows[0]);
}

/** blocked/queued → canceled for runs that will never start them (cancel, reject, expiry). */
export async function cancelUnstartedTasks(
  tx: Tx,
  runIds: string[],
  roomId: string,
  term: number,
  actor: string,
): Promise<number> {
  const { rows } = await tx.query<{ run_id: string; task_id: string }>(
    `UPDATE tasks SET status = 'canceled', version = version + 1, finished_at = ${NOW},
            error = coalesce(error, 'canceled before it started')
      WHERE run_id = ANY($2::text[]) AND status IN ('blocked','queued')
      RETURNING run_id, task_id`,
    [tx.clockParam, runIds],
  );
  for (const r of rows)
    tx.log(roomId, { kind: "task.canceled", runId: r.run_id, taskId: r.task_id, term, actor });
  if (rows.length > 0) tx.touch("tasks", roomId);
  return rows.length;
}

export function confirmRun(db: Db, ctx: CommandContext, roomId: string, dagId: string, by: string) {
  return decide(db, "confirm", ctx, roomId, dagId, by, async (tx, run) => {
    const after = await setRunStatus(tx, ctx, run, "running", by);
    tx.touch("tasks", roomId);
    return after;
  });
}

export function rejectRun(db: Db, ctx: CommandContext, roomId: string, dagId: string, by: string) {
  return decide(db, "reject", ctx, roomId, dagId, by, async (tx, run) => {
    const after = await setRunStatus(tx, ctx, run, "rejected", by);
    await cancelUnstartedTasks(tx, [run.runId], roomId, ctx.fence.term, sessionKey(ctx.fence.session));
    return after;
  });
}

export function cancelRun(db: Db, ctx: CommandContext, roomId: string, dagId: string, by: string) {
  return decide(db, "cancel", ctx, roomId, dagId, by, async (tx, run) => {
    const actor = sessionKey(ctx.fence.session);
    await cancelUnstartedTasks(tx, [run.runId], roomId, ctx.fence.term, actor);
    // The executor keeps its claim (claim_version): it learns of the cancel on its next renewal.
    const stopping = await tx.query<{ task_id: string }>(
      `UPDATE tasks SET status = 'canceling', version = version + 1
        WHERE run_id = $1 AND status = 'running' RETURNING task_id`,
      [run.runId],
    );
    for (const r of stopping.rows)
      tx.log(roomId, {
        kind: "task.canceling",
        runId: run.runId,
        taskId: r.task_id,
        term: ctx.fence.term,
        actor,
      });
    // Row locks: a claim racing this cancel either committed first (its task is canceling now) or
    // finds the task canceled; so "nothing live" here means nothing will start.
    const live = await tx.query<{ n: number }>(
      "SELECT count(*) AS n FROM tasks WHERE run_id = $1 AND status IN ('running','canceling')",
      [run.runId],
    );
    const after = await setRunStatus(tx, ctx, run, (live.rows[0]?.n ?? 0) > 0 ? "canceling" : "canceled", by);
    tx.touch("tasks", roomId);
    return after;
  });
}

export async function getRun(db: Db, roomId: string, dagId: string): Promise<RunRecord | null> {
  const rows = await db.one("get run", `SELECT ${RUN_COLUMNS} FROM runs WHERE room_id = $1 AND dag_id = $2`, [
    roomId,
    dagId,
  ]);
  return rows[0] === undefined ? null : toRun(rows[0]);
}

export async function getRunById(db: Db, runId: string): Promise<RunRecord | null> {
  const rows = await db.one("get run by id", `SELECT ${RUN_COLUMNS} FROM runs WHERE run_id = $1`, [runId]);
  return rows[0] === undefined ? null : toRun(rows[0]);
}

export async function listRuns(
  db: Db,
  roomId: string,
  options: { statuses?: RunStatus[]; limit?: number } = {},
): Promise<RunRecord[]> {
  const rows = await db.one(
    "list runs",
    `SELECT ${RUN_COLUMNS} FROM runs WHERE room_id = $1 AND ($2::text[] IS NULL OR status = ANY($2::text[]))
      ORDER BY created_at DESC, seq DESC LIMIT $3`,
    [roomId, options.statuses ?? null, Math.max(0, Math.floor(options.limit ?? DEFAULT_LIST_LIMIT))],
  );
  return rows.map(toRun);
}

/** The statement of a page of runs (its plan is tested: test/adapters/run-page-plans.test.ts). */
export function pageRunsStatement(roomId: string, query: RunPageQuery): { sql: string; values: unknown[] } {
  const values: unknown[] = [];
  const param = (v: unknown): string => {
    values.push(v);
    return `$${values.length}`;
  };
  const where = pageRunsWhere(roomId, query, {
    param,
    seq: "seq",
    statusIn: (statuses) => `status = ANY(${param([...statuses])}::text[])`,
  });
  const limit = param(pageReadLimit(query));
  const sql = `SELECT ${RUN_COLUMNS}, seq AS page_seq FROM runs WHERE ${where}
    ORDER BY created_at DESC, seq DESC LIMIT ${limit}`;
  return { sql, values };
}

export async function pageRuns(db: Db, roomId: string, query: RunPageQuery): Promise<RunPage> {
  const { sql, values } = pageRunsStatement(roomId, query);
  return cutPage(await db.one("page runs", sql, values), query, toRun);
}

export async function listTasks(db: Db, runId: string): Promise<TaskRecord[]> {
  const rows = await db.one(
    "list tasks",
    `SELECT ${TASK_COLUMNS} FROM tasks WHERE run_id = $1 ORDER BY seq`,
    [runId],
  );
  return rows.map(toTask);
}

export async function countTaskStatuses(
  db: Db,
  runIds: readonly string[],
): Promise<Map<string, Partial<Record<TaskStatus, number>>>> {
  const out = new Map<string, Partial<Record<TaskStatus, number>>>();
  if (runIds.length === 0) return out;
  const rows = await db.one<{ run_id: string; status: TaskStatus; n: string | number }>(
    "count task statuses",
    `SELECT run_id, status, count(*) AS n FROM tasks WHERE run_id = ANY($1::text[]) GROUP BY run_id, status`,
    [[...runIds]],
  );
  for (const row of rows) out.set(row.run_id, { ...out.get(row.run_id), [row.status]: Number(row.n) });
  return out;
}

export async function getTask(db: Db, runId: string, taskId: string): Promise<TaskRecord | null> {
  const rows = await db.one(
    "get task",
    `SELECT ${TASK_COLUMNS} FROM tasks WHERE run_id = $1 AND task_id = $2`,
    [runId, taskId],
  );
  return rows[0] === undefined ? null : toTask(rows[0]);
}
