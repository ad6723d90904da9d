/**
 * DAG runs, written once for both stores: all-or-nothing creation deduplicated by (room, dag_id) and
 * hash, and the leader's decisions on a run (docs/architecture.md §3, "Run"). Which decision a run's
 * status takes, and which status it moves to, is the domain's (src/domain/run-states.ts); which
 * tasks a cancel ends or stops is the task table's (src/domain/task-states.ts).
 */
import { randomUUID } from "node:crypto";
import type { RunStatus } from "../../../domain/model.js";
import { executedTasks, taskArgs } from "../../../domain/params.js";
import { decisionTarget } from "../../../domain/run-states.js";
import { canceledFrom } from "../../../domain/task-states.js";
import { ConflictError, NotFoundError } from "../../../ports/errors.js";
import type {
  CommandContext,
  CreateRunInput,
  CreateRunResult,
  LeaderFence,
  RunDecisionResult,
  RunRecord,
} from "../../../ports/store.js";
import { checkRoom } from "../checks.js";
import { RUN_COLUMNS, sessionKey } from "../records.js";
import type { RunDecision } from "../run-outcomes.js";
import { againstExisting, decisionVerdict, runStatusAt } from "../run-outcomes.js";
import type { Script } from "../script.js";
import { log, mappers, p, row, rows, run, sql, touch } from "../script.js";
import { recordDefinition } from "./definitions.js";
import { holdFence } from "./fence.js";
import { getRun } from "./run-reads.js";
import { markAnswered } from "./inbox-handled.js";

// Locked on PostgreSQL: two decisions on one run apply one after the other. The clock comes with
// the row (no round trip of its own): a decision is judged on it (runStatusAt).
const RUN_LOCKED = sql("a run by its DAG, locked, and the clock")`
  SELECT ${RUN_COLUMNS}, ${p.now} AS now FROM runs
   WHERE room_id = ${p.text("roomId")} AND dag_id = ${p.text("dagId")}${p.only({ postgres: " FOR UPDATE" })}`;

// A deadline only for a run awaiting confirmation: `confirmFor` is null otherwise, and so is the sum.
const INSERT_RUN = sql("a new run")`
  INSERT INTO runs (run_id, room_id, dag_id, hash, status, description, max_parallel, publisher, publish_event_id,
                    confirm_deadline, created_at, updated_at, dag, definition_id)
  VALUES (${p.text("runId")}, ${p.text("roomId")}, ${p.text("dagId")}, ${p.text("hash")}, ${p.text("status")},
          ${p.text("description")}, ${p.int("maxParallel")}, ${p.text("publisher")}, ${p.text("publishEventId")},
          ${p.now} + ${p.int("confirmFor")}, ${p.now}, ${p.now}, ${p.json("dag")}, ${p.text("definitionId")})
  RETURNING ${RUN_COLUMNS}`;

// One statement for every task; ORDER BY n draws seq in document order (FIFO within a run and across runs).
const INSERT_TASKS = sql("a new run's tasks")`
  INSERT INTO tasks (run_id, task_id, room_id, status, version, attempt, max_attempts, action, args, needs, labels,
                     node_pin, priority, concurrency_key, timeout_ms, queue_timeout_ms, retry_backoff_ms,
                     output_patterns, gate, rerun_if_lost, run_when, for_each)
  SELECT ${p.text("runId")}, x.id, ${p.text("roomId")}, 'blocked', 1, 1, x.max_attempts, x.action, x.args, x.needs,
         x.labels, x.node, x.priority, x.concurrency_key, x.timeout_ms, x.queue_timeout_ms, x.retry_backoff_ms,
         x.output_patterns, x.gate, x.rerun_if_lost, x.run_when, x.for_each
    FROM ${p.table("tasks", "x", {
      n: "int",
      id: "text",
      action: "text",
      args: "json",
      needs: "textList",
      labels: "textList",
      node: "text",
      priority: "int",
      concurrency_key: "text",
      timeout_ms: "int",
      queue_timeout_ms: "int",
      retry_backoff_ms: "int",
      max_attempts: "int",
      output_patterns: "json",
      gate: "json",
      rerun_if_lost: "bool",
      run_when: "text",
      for_each: "json",
    })}
   ORDER BY x.n`;

// The guard: the run is still in the status the decision was judged on.
const SET_STATUS = sql("a run's status, by a decision")`
  UPDATE runs SET status = ${p.text("to")}, updated_at = ${p.now},
         confirmed_by = coalesce(${p.text("confirmedBy")}, confirmed_by)
   WHERE run_id = ${p.text("runId")} AND status = ${p.text("from")}
  RETURNING ${RUN_COLUMNS}`;

const CANCEL_UNSTARTED = sql("a run's tasks that never started, canceled")`
  UPDATE tasks SET status = 'canceled', version = version + 1, finished_at = ${p.now},
         error = coalesce(error, 'canceled before it started')
   WHERE run_id = ${p.text("runId")} AND status${p.inList("from")}
  RETURNING task_id`;

// The executor keeps its claim (claim_version): it learns of the cancel on its next renewal.
const STOP_RUNNING = sql("a run's running tasks, canceling")`
  UPDATE tasks SET status = 'canceling', version = version + 1
   WHERE run_id = ${p.text("runId")} AND status${p.inList("from")}
  RETURNING task_id`;

// Row locks: a claim racing this cancel either committed first (its task is canceling now) or finds
// the task canceled; so "nothing live" here means nothing will start.
const LIVE = sql("a run's tasks still live")`
  SELECT count(*) AS n FROM tasks WHERE run_id = ${p.text("runId")} AND status${p.inList("live")}`;

/** The tasks a cancel ends at once, and those whose process it stops (the task table's answer). */
const UNSTARTED = canceledFrom("canceled");
const STOPPABLE = canceledFrom("canceling");
/** A task a cancel waits for: its process is running, or stopping. */
const LIVE_STATUSES = [...STOPPABLE, "canceling"];

export function* createRun(
  ctx: CommandContext<CreateRunResult>,
  input: CreateRunInput,
): Script<CreateRunResult> {
  const operation = "create run";
  yield* holdFence(operation, ctx.fence);
  checkRoom(operation, ctx, input.roomId);
  const dagId = input.dag.id;
  const existing = yield* getRun(input.roomId, dagId);
  const result: CreateRunResult =
    existing !== null
      ? againstExisting(existing, input.hash)
      : { kind: "created", run: yield* insertRun(ctx.fence, input) };
  yield* markAnswered(ctx, result);
  return result;
}

/**
 * Inside a fenced write: a new run, its definition's row and its tasks, and `run.created`. Other
 * scripts that start a run (an `after` firing) call it with `yield*`.
 */
export function* insertRun(fence: LeaderFence, input: CreateRunInput): Script<RunRecord> {
  const m = yield* mappers();
  const { roomId, dag } = input;
  const runId = randomUUID();
  const status: RunStatus = input.needsConfirmation ? "pending" : "running";
  const inserted = yield* row(INSERT_RUN, {
    runId,
    roomId,
    dagId: dag.id,
    hash: input.hash,
    status,
    description: dag.description,
    maxParallel: dag.maxParallel,
    publisher: input.publisher,
    publishEventId: input.publishEventId,
    confirmFor: input.needsConfirmation ? Math.ceil(input.confirmTimeoutMs) : null,
    dag,
    definitionId: dag.definition ?? dag.id,
  });
  if (inserted === undefined) throw new Error(`create run: the insert of ${dag.id} returned no row`);
  yield* recordDefinition(roomId, fence, runId, dag, input.hash, input.publisher);
  const tasks = executedTasks(dag);
  if (tasks.length > 0)
    yield* run(INSERT_TASKS, {
      runId,
      roomId,
      tasks: tasks.map((t, n) => ({
        n,
        id: t.id,
        action: t.action,
        args: taskArgs(dag, t),
        needs: t.needs,
        labels: t.on.labels,
        node: t.on.node,
        priority: t.priority,
        concurrency_key: t.concurrencyKey,
        timeout_ms: t.timeoutMs,
        queue_timeout_ms: t.queueTimeoutMs,
        retry_backoff_ms: t.retryBackoffMs,
        max_attempts: t.retries + 1,
        output_patterns: t.outputs ?? null,
        gate: t.gate ?? null,
        rerun_if_lost: t.rerunIfLost ?? true,
        run_when: t.when ?? null,
        for_each: t.forEach ?? null,
      })),
    });
  yield* log(roomId, {
    kind: "run.created",
    runId,
    term: fence.term,
    actor: sessionKey(fence.session),
    data: { dagId: dag.id, hash: input.hash, status, tasks: tasks.length, publisher: input.publisher },
  });
  yield* touch("runs", roomId);
  yield* touch("tasks", roomId);
  return m.toRun(inserted);
}

type DecisionContext = CommandContext<RunDecisionResult>;
export const confirmRun = (ctx: DecisionContext, roomId: string, dagId: string, by: string) =>
  decide("confirm", ctx, roomId, dagId, by);
export const rejectRun = (ctx: DecisionContext, roomId: string, dagId: string, by: string) =>
  decide("reject", ctx, roomId, dagId, by);
export const cancelRun = (ctx: DecisionContext, roomId: string, dagId: string, by: string) =>
  decide("cancel", ctx, roomId, dagId, by);

/**
 * One leader decision on a run: lock, judge on the transaction's clock, apply where the run's
 * status takes it (the run as it is after), mark the inbox row, all in one transaction.
 */
function* decide(
  decision: RunDecision,
  ctx: DecisionContext,
  roomId: string,
  dagId: string,
  by: string,
): Script<RunDecisionResult> {
  const operation = `${decision} run`;
  const m = yield* mappers();
  yield* holdFence(operation, ctx.fence);
  checkRoom(operation, ctx, roomId);
  const found = yield* row(RUN_LOCKED, { roomId, dagId });
  if (found === undefined) throw new NotFoundError(operation, { roomId, dagId });
  const before = m.toRun(found);
  // Judged on the store's clock now: past its confirmation deadline a pending run is expired.
  const status = runStatusAt(before, Number(found.now));
  const verdict = decisionVerdict(decision, status);
  const kind = verdict === "apply" ? "done" : verdict;
  const theRun = verdict === "apply" ? yield* apply(decision, ctx, before, by) : { ...before, status };
  if (kind === "done") yield* touch("runs", roomId);
  const result: RunDecisionResult = { kind, run: theRun };
  yield* markAnswered(ctx, result);
  return result;
}

function* apply(
  decision: RunDecision,
  ctx: DecisionContext,
  before: RunRecord,
  by: string,
): Script<RunRecord> {
  const { roomId, runId } = before;
  const term = ctx.fence.term;
  const actor = sessionKey(ctx.fence.session);
  if (decision === "reject") {
    const after = yield* setStatus(ctx, before, decisionTarget(decision, before.status, 0), by);
    yield* cancelUnstarted(runId, roomId, term, actor);
    return after;
  }
  let live = 0;
  if (decision === "cancel") {
    yield* cancelUnstarted(runId, roomId, term, actor);
    const stopping = yield* rows<{ task_id: string }>(STOP_RUNNING, { runId, from: STOPPABLE });
    for (const r of stopping)
      yield* log(roomId, { kind: "task.canceling", runId, taskId: r.task_id, term, actor });
    const count = yield* row<{ n: number | string }>(LIVE, { runId, live: LIVE_STATUSES });
    live = Number(count?.n ?? 0);
  }
  const after = yield* setStatus(ctx, before, decisionTarget(decision, before.status, live), by);
  yield* touch("tasks", roomId);
  return after;
}

function* setStatus(ctx: DecisionContext, before: RunRecord, to: RunStatus, by: string): Script<RunRecord> {
  const m = yield* mappers();
  const changed = yield* row(SET_STATUS, {
    to,
    confirmedBy: to === "running" ? by : null,
    runId: before.runId,
    from: before.status,
  });
  if (changed === undefined) throw new ConflictError(`set run ${to}`, { status: before.status }, null);
  yield* log(before.roomId, {
    kind: `run.${to}`,
    runId: before.runId,
    term: ctx.fence.term,
    actor: sessionKey(ctx.fence.session),
    data: { from: before.status, by },
  });
  return m.toRun(changed);
}

/** A run's tasks that never started → canceled (cancel, reject, expiry), each logged. Returns how many. */
export function* cancelUnstarted(runId: string, roomId: string, term: number, actor: string): Script<number> {
  const canceled = yield* rows<{ task_id: string }>(CANCEL_UNSTARTED, { runId, from: UNSTARTED });
  for (const r of canceled)
    yield* log(roomId, { kind: "task.canceled", runId, taskId: r.task_id, term, actor });
  if (canceled.length > 0) yield* touch("tasks", roomId);
  return canceled.length;
}
