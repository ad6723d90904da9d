/**
 * A worker's finish, written once for both stores (docs/architecture.md §3, "Task lease"): the end
 * of the attempt its token holds, as the domain decides it (finishAnswers: the status for each case
 * the row may be in, and a retry's wait), applied by one guarded UPDATE fenced by the token that
 * picks among those answers and decides nothing. A finish may claim again in the same write
 * (finishAndClaim), the slot it frees taken at once.
 *
 * PostgreSQL: one statement, its log line written inside it (LOG_CTES), one round trip; a finish
 * and its claim are one statement too, and postgres/finishes.ts batches many finishes into one
 * statement built from the same fragments. SQLite, where a statement costs no round trip and the
 * write holds the database lock: the row the token holds is read (HELD), the domain decides its
 * finish (decideFinish), and a plain UPDATE by row id and version applies it, the log line as a
 * step. The one-statement UPDATE that picks among the answers with CASE cost SQLite's claim path a
 * quarter of its throughput.
 */
import type { TaskStatus } from "../../../domain/model.js";
import type { FinishAnswers, FinishDecision } from "../../../domain/task-states.js";
import { checkTaskOutcome, decideFinish, finishAnswers } from "../../../domain/task-states.js";
import { ConflictError } from "../../../ports/errors.js";
import type { ClaimBatch, NodeOffer, TaskResult, TaskToken } from "../../../ports/store.js";
import { checkClaim, outputBytes, outputTail, outputValuesJson } from "../checks.js";
import { LOG_CTES } from "../postgres-text.js";
import type { Row } from "../records.js";
import { sessionKey } from "../records.js";
import type { Param, Script, Statement } from "../script.js";
import { log, now, p, row, rows, run, sql, touch } from "../script.js";
import type { Claim } from "./claims.js";
import { claimAfter, claimCtes, claimValues, PICK, recordClaim } from "./claims.js";
import { TOKEN_HOLDS, tokenMiss, tokenValues } from "./task-token.js";

/** A value of the finish's statement: a named value, or SQL (a column of a batch's rows). */
type Slot = Param | Statement | string;

/**
 * Where the finish's UPDATE takes each value: named values for one finish, the columns of a batch's
 * `b` rows for many. `held` is the token's condition; `from` joins the batch's rows in.
 */
export interface FinishSlots {
  held: Statement | string;
  from: string;
  outcome: Slot;
  exitCode: Slot;
  output: Slot;
  error: Slot;
  bytes: Slot;
  /** The outputs as jsonb on PostgreSQL, JSON text on SQLite. */
  values: Slot;
  actor: Slot;
  /** The domain's answers (finishAnswers): the status of each case (null: refused), a retry's wait. */
  left: Slot;
  spent: Slot;
  canceling: Slot;
  waitMs: Slot;
  /** More columns for the caller, after the finish's own. */
  returning: string;
}

/**
 * The status the finish moves the row to: the domain's answer for the case the row is in, picked
 * here and decided nowhere else. Null: refused (a "canceled" for a task nobody canceled).
 */
const nextOf = (v: FinishSlots): Statement =>
  sql(
    "the status a finish moves to",
  )`(CASE WHEN status = 'canceling' THEN ${v.canceling} WHEN attempt < max_attempts THEN ${v.left} ELSE ${v.spent} END)`;

/**
 * The finish's UPDATE. Every value is read from the row as it was (both dialects evaluate SET
 * against the old row); the outputs land with a success only, in this fenced write: a stale
 * attempt's never do.
 */
export function finishMove(v: FinishSlots): Statement {
  const NEXT = nextOf(v);
  const RETRY = sql("the finish is a retry")`(${NEXT} = 'queued')`;
  return sql("a task's finish")`UPDATE tasks SET
      status = ${NEXT},
      version = version + 1,
      attempt = CASE WHEN ${RETRY} THEN attempt + 1 ELSE attempt END,
      claim_version = CASE WHEN ${RETRY} THEN NULL ELSE claim_version END,
      executor_node = CASE WHEN ${RETRY} THEN NULL ELSE executor_node END,
      executor_boot = CASE WHEN ${RETRY} THEN NULL ELSE executor_boot END,
      deadline = CASE WHEN ${RETRY} THEN NULL ELSE deadline END,
      not_before = CASE WHEN ${RETRY} THEN ${p.now} + ${v.waitMs} ELSE not_before END,
      queued_at = CASE WHEN ${RETRY} THEN ${p.now} ELSE queued_at END,
      finished_at = CASE WHEN ${RETRY} THEN NULL ELSE ${p.now} END,
      lease_expires_at = NULL, exit_code = ${v.exitCode}, output = ${v.output}, output_bytes = ${v.bytes}, error = ${v.error},
      output_values = CASE WHEN ${v.outcome} = 'succeeded' THEN ${v.values} ELSE output_values END${v.from}
    WHERE ${v.held} AND ${NEXT} IS NOT NULL
    RETURNING room_id, run_id, task_id, status, attempt, not_before${v.returning}`;
}

/** PostgreSQL: the log line of each row the finish moved (CTE `fin`), for LOG_CTES. */
export function finishLogSource(v: FinishSlots): Statement {
  return sql(
    "a finish's log lines",
  )`SELECT room_id, 1 AS ord, 'task.' || status AS kind, run_id, task_id, NULL::bigint AS term, ${v.actor} AS actor,
           jsonb_build_object('outcome', ${v.outcome},
                              'attempt', CASE WHEN status = 'queued' THEN attempt - 1 ELSE attempt END,
                              'exitCode', ${v.exitCode},
                              'notBefore', CASE WHEN status = 'queued' THEN not_before END,
                              'error', ${v.error}) AS data
      FROM fin`;
}

const ONE: FinishSlots = {
  held: TOKEN_HOLDS,
  from: "",
  outcome: p.text("outcome"),
  exitCode: p.int("exitCode"),
  output: p.text("output"),
  error: p.text("error"),
  bytes: p.int("bytes"),
  values: sql(
    "a finish's outputs",
  )`${p.only({ postgres: "CAST(" })}${p.text("values")}${p.only({ postgres: " AS jsonb)" })}`,
  actor: p.text("actor"),
  left: p.text("left"),
  spent: p.text("spent"),
  canceling: p.text("canceling"),
  waitMs: p.int("waitMs"),
  returning: "",
};

/** SQLite: the row the token holds, read inside the write lock before its finish is decided. */
const HELD = sql("the task a token holds")`
  SELECT seq, room_id, status, version, attempt, max_attempts, retry_backoff_ms FROM tasks WHERE ${TOKEN_HOLDS}`;

/**
 * One finish. PostgreSQL: the move and its log line in one statement (`logged`). SQLite: the row
 * the token holds (HELD), moved by `applyFinish`.
 */
export const FINISH = sql("a task's finish")`${p.only({
  sqlite: HELD,
  postgres: sql("a task's finish, logged")`WITH fin AS (${finishMove(ONE)}),
  src AS (${finishLogSource(ONE)}),
  ${LOG_CTES}
  SELECT room_id, run_id, task_id, status, attempt, not_before, true AS logged FROM fin`,
})}`;

/** SQLite's held row after a finish-and-claim's pick (PostgreSQL's finish is in its one statement). */
const HELD_AFTER_PICK = sql("the task a token holds, after the claim's pick")`${p.only({ sqlite: HELD })}`;

const BY_ROW = sql("the row as read")`seq = ${p.int("seq")} AND version = ${p.int("rowVersion")}`;

/** SQLite: a failed attempt with attempts left, back to the queue (decideFinish's retry). */
const RETRY = sql("a finished attempt, retried")`
  UPDATE tasks SET status = 'queued', version = version + 1, attempt = attempt + 1, claim_version = NULL,
         executor_node = NULL, executor_boot = NULL, lease_expires_at = NULL, deadline = NULL,
         not_before = ${p.int("notBefore")}, queued_at = ${p.now}, exit_code = ${p.int("exitCode")},
         output = ${p.text("output")}, output_bytes = ${p.int("bytes")}, error = ${p.text("error")}
   WHERE ${BY_ROW}`;

/** SQLite: the task's end (decideFinish's end); the outputs land with a success only. */
const END = sql("a finished attempt, ended")`
  UPDATE tasks SET status = ${p.text("to")}, version = version + 1, lease_expires_at = NULL, finished_at = ${p.now},
         exit_code = ${p.int("exitCode")}, output = ${p.text("output")}, output_bytes = ${p.int("bytes")},
         error = ${p.text("error")},
         output_values = CASE WHEN ${p.text("to")} = 'succeeded' THEN ${p.text("values")} ELSE output_values END
   WHERE ${BY_ROW}`;

interface Held {
  seq: number;
  room_id: string;
  status: TaskStatus;
  version: number;
  attempt: number;
  max_attempts: number;
  retry_backoff_ms: number;
}

/**
 * SQLite: the finish of the row the token holds, as the domain decides it for the row as read;
 * undefined when the domain refuses it (a "canceled" for a task nobody canceled).
 */
function* applyFinish(order: FinishOrder, r: Held): Script<Finished | undefined> {
  const task = {
    status: r.status,
    attempt: r.attempt,
    maxAttempts: r.max_attempts,
    retryBackoffMs: r.retry_backoff_ms,
  };
  const decision = decideFinish(task, checkTaskOutcome("finish task", order.result.outcome));
  if (decision.kind === "refused") return undefined;
  const values = { ...order.values, seq: r.seq, rowVersion: r.version };
  if (decision.kind === "retry") {
    const notBefore = (yield* now()) + decision.waitMs;
    yield* run(RETRY, { ...values, notBefore });
    return { room_id: r.room_id, status: "queued", attempt: r.attempt + 1, not_before: notBefore };
  }
  yield* run(END, { ...values, to: decision.to });
  return { room_id: r.room_id, status: decision.to, attempt: r.attempt, not_before: null };
}

/** The row a finish's first statement returned, moved: PostgreSQL's already (`logged`), SQLite's now. */
function* finished(order: FinishOrder, r: Row | undefined): Script<Finished | undefined> {
  if (r === undefined) return undefined;
  if (r.logged === true) return r as unknown as Finished;
  return yield* applyFinish(order, r as unknown as Held);
}

const PG_CLAIM = claimCtes(p.int("max"), "EXISTS (SELECT 1 FROM fin)");

/**
 * A finish and a claim. PostgreSQL: ONE statement (one round trip, one commit); the pick waits for
 * the finish (a token that no longer holds its task claims nothing, and the statement returns no
 * row), and like every statement it reads the tasks as they were when it began, so a failure the
 * finish sends back to the queue is not picked by it. SQLite: the claim's pick, first, so it too
 * sees the tasks as they were before the finish.
 */
export const FINISH_CLAIM = sql("a task's finish and a claim")`${p.only({
  sqlite: PICK,
  postgres: sql("a task's finish and a claim, logged")`WITH fin AS (${finishMove(ONE)}),
  ${PG_CLAIM.ctes},
  src AS (${finishLogSource(ONE)}
          UNION ALL
          ${PG_CLAIM.logSource}),
  ${LOG_CTES}
  SELECT fin.status AS fin_status, fin.room_id AS fin_room, fin.attempt AS fin_attempt,
         fin.not_before AS fin_not_before, rest.rest_ready, rest.rest_next_in, true AS logged, up.*
    FROM fin CROSS JOIN rest LEFT JOIN up ON true`,
})}`;

/** The claimed attempt a finish's answers are decided for (TaskToken.claim). */
export type AttemptOfClaim = NonNullable<TaskToken["claim"]>;

/** A finish checked, its answers decided and its named values made once (alone or in a batch). */
export interface FinishOrder {
  token: TaskToken;
  result: TaskResult;
  /** The named values of the finish's statements. */
  values: Record<string, unknown>;
  /** How many tasks it asks to claim with its offer (0: none). */
  claim: number;
}

/** Bad input of a finish, thrown before anything is read or written. */
export function checkFinish(result: TaskResult, claim: { offer: NodeOffer; max: number } | null): void {
  checkTaskOutcome("finish task", result.outcome);
  outputValuesJson(result);
  if (claim !== null) checkClaim(claim.offer, claim.max);
}

/** The status of each case as the statement takes it (null: refused), and a retry's wait. */
function answerValues(a: FinishAnswers): Record<string, unknown> {
  const to = (d: FinishDecision): string | null => (d.kind === "refused" ? null : d.to);
  return {
    left: to(a.left),
    spent: to(a.spent),
    canceling: to(a.canceling),
    waitMs: a.left.kind === "retry" ? a.left.waitMs : null,
  };
}

/** A finish made ready for its statement; bad input throws here, before anything is sent. */
export function finishOrder(
  token: TaskToken,
  result: TaskResult,
  claim: { offer: NodeOffer; max: number } | null,
  attempt: AttemptOfClaim,
): FinishOrder {
  const outcome = checkTaskOutcome("finish task", result.outcome);
  if (claim !== null) checkClaim(claim.offer, claim.max);
  return {
    token,
    result,
    values: {
      ...tokenValues(token),
      outcome,
      exitCode: result.exitCode,
      output: outputTail(result.output),
      error: result.error,
      bytes: outputBytes(result.output, result.outputBytes),
      values: outputValuesJson(result),
      actor: sessionKey(token.session),
      ...answerValues(finishAnswers(outcome, attempt)),
    },
    claim: claim?.max ?? 0,
  };
}

const ATTEMPT = sql("a task's claimed attempt")`
  SELECT attempt, retry_backoff_ms FROM tasks WHERE run_id = ${p.text("runId")} AND task_id = ${p.text("taskId")}`;

/**
 * The token's claimed attempt: as its claim found it, or, for a token made without a claim, read
 * from the row it fences (one more statement, never on a worker's path: its tokens come from claims).
 * A row the token no longer holds makes the finish miss whatever the answers say.
 */
export function* attemptOf(token: TaskToken): Script<AttemptOfClaim> {
  if (token.claim !== undefined) return token.claim;
  const r = yield* row<{ attempt: number; retry_backoff_ms: number }>(ATTEMPT, {
    runId: token.runId,
    taskId: token.taskId,
  });
  return { attempt: Number(r?.attempt ?? 0), retryBackoffMs: Number(r?.retry_backoff_ms ?? 0) };
}

/** The typed error of a finish whose token no longer holds its task (or was refused). */
export function* finishMiss(token: TaskToken, result: TaskResult): Script<Error> {
  const miss = yield* tokenMiss("finish task", token);
  // The token holds but the task is not canceling: "canceled" is only the answer to a cancel.
  if (miss instanceof ConflictError && result.outcome === "canceled" && miss.found?.status === "running")
    return new ConflictError("finish task", { status: "canceling", outcome: "canceled" }, miss.found);
  return miss;
}

/** The row a finish moved. */
interface Finished {
  room_id: string;
  status: TaskStatus;
  attempt: number;
  not_before: number | null;
  logged?: unknown;
}

/** A finish's log line (unless its statement wrote it) and change notes. */
function* recordFinish(order: FinishOrder, r: Finished): Script<void> {
  const { token, result } = order;
  const retried = r.status === "queued";
  if (r.logged !== true)
    yield* log(r.room_id, {
      kind: `task.${r.status}`,
      runId: token.runId,
      taskId: token.taskId,
      actor: sessionKey(token.session),
      data: {
        outcome: result.outcome,
        attempt: retried ? Number(r.attempt) - 1 : Number(r.attempt),
        exitCode: result.exitCode,
        notBefore: retried ? Number(r.not_before) : null,
        error: result.error,
      },
    });
  yield* touch("tasks", r.room_id);
  // A retry is claimable once its backoff passes, with no scheduling step: the leader must look.
  yield* touch(retried ? "ready" : "done", r.room_id);
}

/** One finish made ready (finishOrder), in its own statement. */
export function* finishOne(order: FinishOrder): Script<{ status: TaskStatus }> {
  const r = yield* finished(order, yield* row(FINISH, order.values));
  if (r === undefined) throw yield* finishMiss(order.token, order.result);
  yield* recordFinish(order, r);
  return { status: r.status };
}

/**
 * One finish made ready and a claim of up to its `claim` tasks with `offer`, in one write. A
 * refused finish throws and claims nothing (SQLite has only picked by then, and rolls back).
 */
export function* finishAndClaimOne(
  order: FinishOrder,
  offer: NodeOffer,
): Script<{ status: TaskStatus; batch: ClaimBatch }> {
  const values = { ...order.values, ...claimValues(offer, order.claim) };
  const first = yield* rows<Row>(FINISH_CLAIM, values);
  const head = first[0];
  const fin: Finished | undefined =
    head?.logged === true
      ? {
          room_id: String(head.fin_room),
          status: head.fin_status as TaskStatus,
          attempt: Number(head.fin_attempt),
          not_before: head.fin_not_before as number | null,
          logged: true,
        }
      : yield* finished(order, yield* row(HELD_AFTER_PICK, values));
  if (fin === undefined) throw yield* finishMiss(order.token, order.result);
  const claim: Claim = yield* claimAfter(first, offer, order.claim, values);
  yield* recordFinish(order, fin);
  yield* recordClaim(claim, offer, fin.room_id);
  return { status: fin.status, batch: claim.batch };
}

export function* finishTask(token: TaskToken, result: TaskResult): Script<{ status: TaskStatus }> {
  const attempt = yield* attemptOf(token);
  return yield* finishOne(finishOrder(token, result, null, attempt));
}

export function* finishAndClaim(
  token: TaskToken,
  result: TaskResult,
  offer: NodeOffer,
  max: number,
): Script<{ status: TaskStatus; batch: ClaimBatch }> {
  const attempt = yield* attemptOf(token);
  return yield* finishAndClaimOne(finishOrder(token, result, { offer, max }, attempt), offer);
}
