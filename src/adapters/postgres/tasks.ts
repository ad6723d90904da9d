/**
 * The worker's side on PostgreSQL: claim, renew and finish, each ONE statement (the hot path) with
 * its event-log line in the same statement, fenced by (claim version, session). Other Stores hear
 * of them through a NOTIFY sent right after the commit (Db.committed).
 */
import type { TaskStatus } from "../../domain/model.js";
import { ConflictError } from "../../ports/errors.js";
import type { ClaimBatch, ClaimedTask, NodeOffer, TaskResult, TaskToken } from "../../ports/store.js";
import { CLAIM_LEFT_MORE } from "../../ports/store.js";
import type { Db, Row } from "./db.js";
import { explainMiss, LOG_CTES } from "./guards.js";
import { cleanText, NOW, sessionKey } from "./sql.js";
import { TASK_COLUMNS, toTask } from "./rows.js";
import { checkClaim, outputBytes, outputTail, outputValuesJson } from "../store-common/checks.js";
import type { FinishAnswers, FinishDecision } from "../../domain/task-states.js";
import { checkTaskOutcome, finishAnswers } from "../../domain/task-states.js";

/**
 * The claim's pick (docs/query-plans.md): claim_pick (migration 7) walks the partial index
 * tasks_claim, which holds queued rows only, in claim order, so the walk stops at the first fitting
 * rows however many tasks were claimed or finished, and whatever the planner statistics say (the
 * function forbids the other plans). SKIP LOCKED lets racing claimers take different rows instead
 * of queueing on one. Parameters: $1 clock, $2 rooms, $3 node id, $4 actions, $5 labels; one row.
 */
export const CLAIM_PICK_SQL = `SELECT run_id, task_id FROM claim_pick(${NOW}, $2::text[], $3::text, $4::text[], $5::text[], 1)`;

/**
 * The claim's parameters in order (rooms, node id, actions, labels, boot id, lease ms, actor, max),
 * numbered from $`first`; the clock is $1 in every statement.
 */
function claimParams(first: number): [string, string, string, string, string, string, string, string] {
  const p = (i: number, t: string): string => `$${first + i}::${t}`;
  return [
    p(0, "text[]"),
    p(1, "text"),
    p(2, "text[]"),
    p(3, "text[]"),
    p(4, "text"),
    p(5, "bigint"),
    p(6, "text"),
    p(7, "int"),
  ];
}

/**
 * A batch claim's CTEs (pick, up, more, rest): up to `max` rows picked as CLAIM_PICK_SQL picks one
 * (claim_pick also says whether the batch left a fitting ready task behind) and moved. Only when
 * none was left is the soonest not_before of the fitting tasks still waiting read. `gate`, when
 * given, is a condition the pick needs (the finish that frees the slot took effect); `maxOf` makes
 * the pick's limit from the `max` parameter (a batch of finishes claims only for those that held).
 */
function claimCtes(
  first: number,
  gate?: string,
  maxOf: (maxParam: string) => string = (m) => m,
): { ctes: string; logSource: string } {
  const [rooms, node, actions, labels, boot, lease, actor, maxParam] = claimParams(first);
  const max = maxOf(maxParam);
  const fits = `FROM tasks q
     WHERE q.status = 'queued'
       AND q.room_id = ANY(${rooms})
       AND (q.node_pin IS NULL OR q.node_pin = ${node})
       AND q.action = ANY(${actions})
       AND q.labels <@ ${labels}`;
  const ctes = `pick AS (
    SELECT * FROM claim_pick(${NOW}, ${rooms}, ${node}, ${actions}, ${labels}, ${max})${gate === undefined ? "" : ` WHERE ${gate}`}),
  up AS (
    UPDATE tasks t SET status = 'running', version = t.version + 1, claim_version = t.version + 1,
           executor_node = ${node}, executor_boot = ${boot}, lease_expires_at = ${NOW} + ${lease},
           deadline = CASE WHEN t.timeout_ms IS NULL THEN NULL ELSE ${NOW} + t.timeout_ms END, started_at = ${NOW},
           output = NULL, output_bytes = NULL
      FROM pick WHERE t.run_id = pick.run_id AND t.task_id = pick.task_id
    RETURNING ${TASK_COLUMNS.split(", ")
      .map((c) => `t.${c}`)
      .join(", ")}),
  more AS (SELECT coalesce(bool_or(pick.more), false) AS rest_ready FROM pick),
  rest AS (
    SELECT more.rest_ready,
           CASE WHEN more.rest_ready THEN NULL
                ELSE (SELECT min(q.not_before) ${fits} AND q.not_before > ${NOW}) - ${NOW} END AS rest_next_in
      FROM more)`;
  const logSource = `SELECT room_id, 2 AS ord, 'task.running' AS kind, run_id, task_id, NULL::bigint AS term, ${actor} AS actor,
           jsonb_build_object('attempt', attempt, 'version', version) AS data FROM up`;
  return { ctes, logSource };
}

const CLAIM = claimCtes(2);

/**
 * A batch claim, moved and logged in one statement. A node with no claimed row still gets one row
 * back (the `rest` figures, task columns null). Parameters: $1 clock, then claimParams(2).
 */
export const CLAIM_SQL = `WITH ${CLAIM.ctes},
  src AS (${CLAIM.logSource}),
  ${LOG_CTES}
  SELECT rest.rest_ready, rest.rest_next_in, up.* FROM rest LEFT JOIN up ON true`;

const claimArgs = (offer: NodeOffer, max: number): unknown[] => [
  offer.roomIds,
  offer.session.nodeId,
  offer.actions,
  offer.labels,
  offer.session.bootId,
  Math.ceil(offer.leaseMs),
  sessionKey(offer.session),
  max,
];

/** The claim's answer from the statement's rows (claimed rows carry run_id; rest_* on every row). */
function claimBatch(db: Db, offer: NodeOffer, rows: Row[], finishedIn: readonly string[] = []): ClaimBatch {
  const claimed: ClaimedTask[] = [];
  const rooms = new Set<string>();
  for (const row of rows) {
    if (row.run_id === null || row.run_id === undefined) continue;
    const task = toTask(row);
    rooms.add(String(row.room_id));
    claimed.push({
      token: {
        runId: task.runId,
        taskId: task.taskId,
        version: task.version,
        session: offer.session,
        claim: { attempt: task.attempt, retryBackoffMs: task.retryBackoffMs },
      },
      task,
    });
  }
  const head = rows[0];
  const nextIn = head?.rest_next_in;
  const more = Number(head?.rest_ready ?? 0) > 0;
  // The claimer is named, so the leader knows the node it woke has acted (and whether it goes on).
  // A finish names it in its task's room even when the claim took nothing there: a node that stops
  // serving itself must say so, or the leader would count its free slots as taken.
  const claimer = `${more ? CLAIM_LEFT_MORE : ""}${offer.session.nodeId}`;
  for (const room of finishedIn) rooms.add(room);
  for (const room of rooms) db.committed("tasks", room, [claimer]);
  return {
    claimed,
    more,
    nextReadyInMs: nextIn === null || nextIn === undefined ? null : Math.max(0, Number(nextIn)),
  };
}

export async function claimTask(db: Db, offer: NodeOffer): Promise<ClaimedTask | null> {
  return (await claimTasks(db, offer, 1)).claimed[0] ?? null;
}

export async function claimTasks(db: Db, offer: NodeOffer, max: number): Promise<ClaimBatch> {
  checkClaim(offer, max);
  const rows = await db.one("claim task", CLAIM_SQL, [db.clockParam(), ...claimArgs(offer, max)]);
  return claimBatch(db, offer, rows);
}

/** The fence: the token (run, task, claim version, node, boot) still holds the task. */
const heldBy = (run: string, task: string, version: string, node: string, boot: string): string =>
  `run_id = ${run} AND task_id = ${task} AND claim_version = ${version}
  AND executor_node = ${node} AND executor_boot = ${boot} AND status IN ('running','canceling')`;
/** The fence from a token's five parameters (tokenParams), starting at $first. */
const heldAt = (first: number): string =>
  heldBy(
    `$${first}::text`,
    `$${first + 1}::text`,
    `$${first + 2}::int`,
    `$${first + 3}::text`,
    `$${first + 4}::text`,
  );
const HELD = heldAt(2);

const tokenParams = (t: TaskToken): unknown[] => [
  t.runId,
  t.taskId,
  t.version,
  t.session.nodeId,
  t.session.bootId,
];

/** The typed error for a token that no longer holds its task. */
function tokenMiss(db: Db, operation: string, token: TaskToken): Promise<Error> {
  return explainMiss(
    db,
    db,
    operation,
    null,
    { runId: token.runId, taskId: token.taskId },
    { status: ["running", "canceling"], version: token.version, executor: sessionKey(token.session) },
    `SELECT status, claim_version AS version,
            CASE WHEN executor_node IS NULL THEN NULL ELSE executor_node || '/' || executor_boot END AS executor
       FROM tasks WHERE run_id = $1 AND task_id = $2`,
    [token.runId, token.taskId],
  );
}

/**
 * Where a finish statement takes each value of a finish: parameters for one task, the columns of
 * the `b` rows (unnest of parameter arrays) for a batch. `held` is the fence; `from` joins `b` in.
 */
interface FinishSource {
  held: string;
  from: string;
  outcome: string;
  exitCode: string;
  output: string;
  error: string;
  actor: string;
  bytes: string;
  values: string;
  /**
   * The domain's answers (finishAnswers), as the status each case of the row goes to (null: the
   * finish is refused there), and a retry's wait.
   */
  left: string;
  spent: string;
  canceling: string;
  waitMs: string;
  /** More of `b` for the caller, after the task's columns. */
  returning: string;
}

/** One finish, from parameters $2–$13 (finishArgs) and its answers $14–$17 (answerArgs). */
const ONE: FinishSource = {
  held: HELD,
  from: "",
  outcome: "$7::text",
  exitCode: "$8::int",
  output: "$9::text",
  error: "$10::text",
  actor: "$11::text",
  bytes: "$12::bigint",
  values: "$13::jsonb",
  left: "$14::text",
  spent: "$15::text",
  canceling: "$16::text",
  waitMs: "$17::bigint",
  returning: "",
};

/**
 * The status the finish moves the row to: the domain's answer (finishAnswers, src/domain/task-states.ts)
 * for the case the row is in, picked here and decided nowhere else. Null: refused (a "canceled"
 * for a task nobody canceled), and the row is not moved.
 */
const next = (v: FinishSource): string =>
  `(CASE WHEN status = 'canceling' THEN ${v.canceling} WHEN attempt < max_attempts THEN ${v.left} ELSE ${v.spent} END)`;

/**
 * The finish's CTE `fin` and its log line's source. The outputs land with a success only, in this
 * fenced statement: a stale attempt's never do.
 */
function finishCte(v: FinishSource): string {
  const NEXT = next(v);
  const RETRY = `(${NEXT} = 'queued')`;
  return `fin AS (
    UPDATE tasks SET
      status = ${NEXT},
      version = version + 1,
      attempt = CASE WHEN ${RETRY} THEN attempt + 1 ELSE attempt END,
      claim_version = CASE WHEN ${RETRY} THEN NULL ELSE claim_version END,
      executor_node = CASE WHEN ${RETRY} THEN NULL ELSE executor_node END,
      executor_boot = CASE WHEN ${RETRY} THEN NULL ELSE executor_boot END,
      deadline = CASE WHEN ${RETRY} THEN NULL ELSE deadline END,
      not_before = CASE WHEN ${RETRY} THEN ${NOW} + ${v.waitMs} ELSE not_before END,
      queued_at = CASE WHEN ${RETRY} THEN ${NOW} ELSE queued_at END,
      finished_at = CASE WHEN ${RETRY} THEN NULL ELSE ${NOW} END,
      lease_expires_at = NULL, exit_code = ${v.exitCode}, output = ${v.output}, output_bytes = ${v.bytes}, error = ${v.error},
      output_values = CASE WHEN ${v.outcome} = 'succeeded' THEN ${v.values} ELSE output_values END${v.from}
    WHERE ${v.held} AND ${NEXT} IS NOT NULL
    RETURNING room_id, run_id, task_id, status, attempt, not_before${v.returning})`;
}

function finishLog(v: FinishSource): string {
  return `SELECT room_id, 1 AS ord, 'task.' || status AS kind, run_id, task_id, NULL::bigint AS term, ${v.actor} AS actor,
           jsonb_build_object('outcome', ${v.outcome},
                              'attempt', CASE WHEN status = 'queued' THEN attempt - 1 ELSE attempt END,
                              'exitCode', ${v.exitCode},
                              'notBefore', CASE WHEN status = 'queued' THEN not_before END,
                              'error', ${v.error}) AS data
      FROM fin`;
}

const FINISH_CTE = finishCte(ONE);
const FINISH_LOG = finishLog(ONE);

export const FINISH_SQL = `WITH ${FINISH_CTE},
  src AS (${FINISH_LOG}),
  ${LOG_CTES}
  SELECT status, room_id FROM fin`;

/**
 * finishTask and claimTasks as ONE statement (one round trip, one commit). The pick waits for the
 * finish (`gate`): a token that no longer holds its task claims nothing, and the statement returns
 * no row. Like every statement it reads the tasks as they were when it began, so a failure the
 * finish sends back to the queue is not picked by it. Parameters: $1 clock, $2–$17 as FINISH_SQL,
 * then claimParams(18).
 */
const FINISH_CLAIM = claimCtes(18, "EXISTS (SELECT 1 FROM fin)");
export const FINISH_CLAIM_SQL = `WITH ${FINISH_CTE},
  ${FINISH_CLAIM.ctes},
  src AS (${FINISH_LOG}
          UNION ALL
          ${FINISH_CLAIM.logSource}),
  ${LOG_CTES}
  SELECT fin.status AS fin_status, fin.room_id AS fin_room, rest.rest_ready, rest.rest_next_in, up.*
    FROM fin CROSS JOIN rest LEFT JOIN up ON true`;

const finishArgs = (token: TaskToken, result: TaskResult): unknown[] => [
  ...tokenParams(token),
  result.outcome,
  result.exitCode,
  cleanText(outputTail(result.output)),
  cleanText(result.error),
  sessionKey(token.session),
  outputBytes(result.output, result.outputBytes),
  outputValuesJson(result),
];

/** The finish's change notes, after the commit. */
function finished(db: Db, status: TaskStatus, roomId: string): void {
  db.committed("tasks", roomId);
  // A retry is claimable once its backoff passes, with no scheduling step: the leader must look.
  if (status === "queued") db.committed("ready", roomId);
  else db.committed("done", roomId);
}

/** The typed error of a finish whose token no longer holds its task. */
async function finishMiss(db: Db, token: TaskToken, result: TaskResult): Promise<Error> {
  const miss = await tokenMiss(db, "finish task", token);
  // The token holds but the task is not canceling: "canceled" is only the answer to a cancel.
  if (miss instanceof ConflictError && result.outcome === "canceled" && miss.found?.status === "running")
    return new ConflictError("finish task", { status: "canceling", outcome: "canceled" }, miss.found);
  return miss;
}

/** One finish, checked (finishOrder), in its own statement. */
export async function finishTask(db: Db, order: FinishOrder): Promise<{ status: TaskStatus }> {
  const { token, result } = order;
  const rows = await db.one<{ status: TaskStatus; room_id: string }>("finish task", FINISH_SQL, [
    db.clockParam(),
    ...order.columns,
    ...order.answers,
  ]);
  const r = rows[0];
  if (r === undefined) throw await finishMiss(db, token, result);
  finished(db, r.status, r.room_id);
  return { status: r.status };
}

/** One finish, checked (finishOrder), and a claim of up to its `claim` tasks, in one statement. */
export async function finishAndClaim(
  db: Db,
  order: FinishOrder,
  offer: NodeOffer,
): Promise<{ status: TaskStatus; batch: ClaimBatch }> {
  const { token, result } = order;
  const rows = await db.one("finish task", FINISH_CLAIM_SQL, [
    db.clockParam(),
    ...order.columns,
    ...order.answers,
    ...claimArgs(offer, order.claim),
  ]);
  const head = rows[0];
  if (head === undefined) throw await finishMiss(db, token, result);
  const status = head.fin_status as TaskStatus;
  finished(db, status, String(head.fin_room));
  return { status, batch: claimBatch(db, offer, rows, [String(head.fin_room)]) };
}

/**
 * Many finishes as ONE statement (Finishes, finishes.ts): the `b` rows are the finishes, unnested
 * from parameter arrays $2–$14 (finishArgs' columns, then how many tasks each asks to claim), and
 * their answers from $15–$18 (answerArgs' columns, read by the row's ordinal), each
 * fenced by its own token exactly as FINISH_SQL fences one; a refused one moves nothing and the
 * others go on. The statement's one commit and its log lock are shared.
 */
const MANY: FinishSource = {
  held: heldBy("b_run", "b_task", "b_version", "b_node", "b_boot"),
  from: `
    FROM b`,
  outcome: "b_outcome",
  exitCode: "b_exit",
  output: "b_output",
  error: "b_error",
  actor: "b_actor",
  bytes: "b_bytes",
  values: "b_values",
  // The answers of the batch's finishes, one array each, read at the row's ordinal (b_i).
  left: "($15::text[])[b_i]",
  spent: "($16::text[])[b_i]",
  canceling: "($17::text[])[b_i]",
  waitMs: "($18::bigint[])[b_i]",
  returning: ", b_i, b_outcome, b_exit, b_error, b_actor, b_wants",
};
const MANY_ROWS = `b AS (
    SELECT * FROM finish_rows($2::text[], $3::text[], $4::int[], $5::text[], $6::text[], $7::text[], $8::int[],
                              $9::text[], $10::text[], $11::text[], $12::bigint[], $13::jsonb[], $14::int[]))`;

export const FINISH_MANY_SQL = `WITH ${MANY_ROWS},
  ${finishCte(MANY)},
  src AS (${finishLog(MANY)}),
  ${LOG_CTES}
  SELECT b_i AS i, status, room_id FROM fin`;

/**
 * Many finishes and one claim for those of them that held and asked for one (all with one offer),
 * as ONE statement: the claim takes at most the sum of their asks. Parameters: $1 clock, $2–$18 as
 * FINISH_MANY_SQL, then claimParams(19) (its max: the sum of all the asks).
 */
const MANY_CLAIM = claimCtes(
  19,
  undefined,
  (max) => `least(${max}, (SELECT coalesce(sum(b_wants), 0) FROM fin))::int`,
);
export const FINISH_MANY_CLAIM_SQL = `WITH ${MANY_ROWS},
  ${finishCte(MANY)},
  ${MANY_CLAIM.ctes},
  src AS (${finishLog(MANY)}
          UNION ALL
          ${MANY_CLAIM.logSource}),
  ${LOG_CTES}
  SELECT (SELECT json_agg(json_build_array(b_i, status, room_id)) FROM fin) AS fins,
         rest.rest_ready, rest.rest_next_in, up.*
    FROM rest LEFT JOIN up ON true`;

/** A finish as the statements take it: checked, its parameter columns made once (finishOrder). */
export interface FinishOrder {
  token: TaskToken;
  result: TaskResult;
  /** finishArgs: the finish's parameters, in FINISH_SQL's order. */
  columns: readonly unknown[];
  /** answerArgs: the domain's answers for each case of the row, after the columns. */
  answers: readonly unknown[];
  /** How many tasks it asks to claim with its offer (0: none). */
  claim: number;
}

/** What became of one finish of a batch: its task's status, or the error it alone gets. */
export type FinishAnswer =
  { ok: true; status: TaskStatus; batch: ClaimBatch | null } | { ok: false; error: Error };

/**
 * A finish checked and made ready for a statement, alone or in a batch; bad input throws here, to
 * its own caller, before anything is sent. `offer`/`max`: the claim it asks for, if any.
 */
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
    columns: finishArgs(token, result),
    answers: answerArgs(finishAnswers(outcome, attempt)),
    claim: claim?.max ?? 0,
  };
}

/** The claimed attempt a finish's answers are decided for (TaskToken.claim). */
export type AttemptOfClaim = NonNullable<TaskToken["claim"]>;

/** Bad input of a finish, thrown before anything is read or sent. */
export function checkFinish(result: TaskResult, claim: { offer: NodeOffer; max: number } | null): void {
  checkTaskOutcome("finish task", result.outcome);
  if (claim !== null) checkClaim(claim.offer, claim.max);
}

/**
 * The token's claimed attempt: as its claim found it, or, for a token made without a claim, read
 * from the row it fences (one more round trip, never on a worker's path: its tokens come from claims).
 * A row the token no longer holds makes the finish miss whatever the answers say.
 */
export async function attemptOf(db: Db, token: TaskToken): Promise<AttemptOfClaim> {
  if (token.claim !== undefined) return token.claim;
  const rows = await db.one<{ attempt: number; retry_backoff_ms: number }>(
    "finish task",
    "SELECT attempt, retry_backoff_ms FROM tasks WHERE run_id = $1::text AND task_id = $2::text",
    [token.runId, token.taskId],
  );
  const r = rows[0];
  return { attempt: r?.attempt ?? 0, retryBackoffMs: r?.retry_backoff_ms ?? 0 };
}

/** The domain's answers as the statement takes them: the status of each case (null: refused), a retry's wait. */
function answerArgs(a: FinishAnswers): unknown[] {
  const to = (d: FinishDecision): string | null => (d.kind === "refused" ? null : d.to);
  return [to(a.left), to(a.spent), to(a.canceling), a.left.kind === "retry" ? a.left.waitMs : null];
}

/**
 * Runs finishes as one statement and answers each (in order). `offer`: the one offer of every
 * finish that asks to claim (null when none does). Throws only when the statement as a whole
 * failed, and then nothing was written.
 */
export async function finishMany(
  db: Db,
  orders: readonly FinishOrder[],
  offer: NodeOffer | null,
): Promise<FinishAnswer[]> {
  // finish_rows' arrays: each parameter of finishArgs across the finishes, then their claims;
  // then each of their answers across the finishes.
  const arrays = [
    ...(orders[0]?.columns ?? []).map((_, i) => orders.map((o) => o.columns[i])),
    orders.map((o) => o.claim),
    ...(orders[0]?.answers ?? []).map((_, i) => orders.map((o) => o.answers[i])),
  ];
  const held = new Map<number, { status: TaskStatus; room: string }>();
  let claimed: ClaimBatch | null = null;
  if (offer === null) {
    const rows = await db.one("finish task", FINISH_MANY_SQL, [db.clockParam(), ...arrays]);
    for (const r of rows) held.set(Number(r.i), { status: r.status as TaskStatus, room: String(r.room_id) });
  } else {
    const wants = orders.reduce((n, o) => n + o.claim, 0);
    checkClaim(offer, wants);
    const rows = await db.one("finish task", FINISH_MANY_CLAIM_SQL, [
      db.clockParam(),
      ...arrays,
      ...claimArgs(offer, wants),
    ]);
    const fins = (rows[0]?.fins ?? []) as [number, TaskStatus, string][];
    for (const [i, status, room] of fins) held.set(Number(i), { status, room });
    const rooms = orders.flatMap((o, k) => {
      const h = held.get(k + 1);
      return o.claim > 0 && h !== undefined ? [h.room] : [];
    });
    claimed = claimBatch(db, offer, rows, rooms);
  }
  let next = 0;
  const answers = orders.map((o, k): FinishAnswer | null => {
    const h = held.get(k + 1);
    if (h === undefined) return null;
    finished(db, h.status, h.room);
    if (claimed === null || o.claim === 0) return { ok: true, status: h.status, batch: null };
    const mine = claimed.claimed.slice(next, next + o.claim);
    next += mine.length;
    return { ok: true, status: h.status, batch: { ...claimed, claimed: mine } };
  });
  return Promise.all(
    answers.map(
      async (a, k): Promise<FinishAnswer> =>
        a ?? { ok: false, error: await finishMiss(db, orders[k]!.token, orders[k]!.result) },
    ),
  );
}
