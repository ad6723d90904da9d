/**
 * A worker's claim, written once for both stores (docs/architecture.md §3, "Task lease"; the pick's
 * plans: docs/query-plans.md): up to `max` queued tasks that fit the node's offer, in claim order,
 * moved to running under a new claim version and logged, and whether a fitting task was left ready
 * (or, when none was, how soon the next one will be).
 *
 * PostgreSQL claims in ONE statement (CLAIM: the pick through claim_pick, the move, the log lines
 * through LOG_CTES, what was left), the hot path's one round trip. SQLite, whose write holds the
 * database lock, picks (one statement, its plan pinned to the partial index of queued tasks), moves
 * each pick (MOVE) and reads what is left (REST) only when the pick did not say; it logs with a step.
 * The move and the look at what is left are written once (MOVED, FITS) for both.
 */
import type { ClaimBatch, ClaimedTask, NodeOffer } from "../../../ports/store.js";
import { CLAIM_LEFT_MORE } from "../../../ports/store.js";
import type { LogLine, Row } from "../records.js";
import { sessionKey, TASK_COLUMNS } from "../records.js";
import { LOG_CTES } from "../postgres-text.js";
import type { Mappers, Param, Script, Statement } from "../script.js";
import { log, mappers, p, row, rows, sql, touch } from "../script.js";

/** A value of the claim's PostgreSQL CTEs: a named value, or SQL text. */
type Slot = Param | Statement | string;

/**
 * The queued tasks that fit the offer, on the partial index of queued tasks (SQLite pins it:
 * docs/query-plans.md). The columns are unqualified: SQLite's pick names no alias, so its plan reads
 * as docs/query-plans.md shows it; PostgreSQL's look keeps the alias its plan always had.
 */
const FITS = sql(
  "the queued tasks that fit the offer",
)`FROM tasks${p.only({ sqlite: " INDEXED BY tasks_claim", postgres: " q" })}
  WHERE status = 'queued'
    AND room_id${p.inList("rooms")}
    AND (node_pin IS NULL OR node_pin = ${p.text("node")})
    AND action${p.inList("actions")}
    AND ${p.only({
      sqlite: sql("the labels fit")`NOT EXISTS (SELECT 1 FROM json_each(tasks.labels) AS need
                     WHERE need.value NOT${p.inList("labels")})`,
      postgres: sql("the labels fit")`labels <@ ${p.texts("labels")}`,
    })}`;

/** How soon the soonest fitting task still waiting for its not_before is ready (null: none waits). */
const NEXT_IN = sql(
  "how soon the next fitting task is ready",
)`(SELECT min(not_before) ${FITS} AND not_before > ${p.now}) - ${p.now}`;

/** A claimed row's new columns: running under the next claim version, this session's lease. */
const MOVED = sql("a task, claimed")`status = 'running', version = version + 1, claim_version = version + 1,
           executor_node = ${p.text("node")}, executor_boot = ${p.text("boot")}, lease_expires_at = ${p.now} + ${p.int("leaseMs")},
           deadline = CASE WHEN timeout_ms IS NULL THEN NULL ELSE ${p.now} + timeout_ms END, started_at = ${p.now},
           output = NULL, output_bytes = NULL`;

/**
 * SQLite's pick: one more than asked for (`picks`), so a row past `max` says a fitting task was
 * left ready without another statement. INDEXED BY pins the partial index of queued tasks in claim
 * order: the walk stops at the first fitting rows and never visits a claimed or finished one.
 */
export const PICK = sql("a claim's pick")`SELECT seq, version ${FITS}
    AND (not_before IS NULL OR not_before <= ${p.now})
  ORDER BY priority DESC, seq
  ${p.limit("picks")}`;

/** SQLite moves each pick; inside the write lock nobody can move it between the pick and this. */
const MOVE = sql("a picked task, claimed")`
  UPDATE tasks SET ${MOVED}
   WHERE seq = ${p.int("seq")} AND status = 'queued' AND version = ${p.int("version")}
  RETURNING ${TASK_COLUMNS}`;

/** SQLite: how soon the next fitting task is ready, asked only when no fitting task was left ready. */
const REST = sql("what a claim left")`SELECT ${NEXT_IN} AS rest_next_in`;

/**
 * PostgreSQL's claim as CTEs (pick, up, more, rest) and the source of its log lines: up to `max`
 * rows picked by claim_pick (which also says whether the batch left a fitting ready task behind)
 * and moved; only when none was left is the soonest not_before of the fitting tasks read. `gate`,
 * when given, is a condition the pick needs (a finish that frees the slot took effect).
 */
export function claimCtes(max: Slot, gate?: string): { ctes: Statement; logSource: Statement } {
  const ctes = sql("a claim's CTEs")`pick AS (
    SELECT * FROM claim_pick(${p.now}, ${p.texts("rooms")}, ${p.text("node")}, ${p.texts("actions")}, ${p.texts("labels")}, CAST(${max} AS int))${
      gate === undefined ? "" : ` WHERE ${gate}`
    }),
  up AS (
    UPDATE tasks t SET ${MOVED}
      FROM pick WHERE t.run_id = pick.run_id AND t.task_id = pick.task_id
    RETURNING ${TASK_COLUMNS.split(", ")
      .map((c) => `t.${c}`)
      .join(", ")}),
  more AS (SELECT coalesce(bool_or(pick.more), false) AS rest_ready FROM pick),
  rest AS (
    SELECT more.rest_ready, CASE WHEN more.rest_ready THEN NULL ELSE ${NEXT_IN} END AS rest_next_in
      FROM more)`;
  const logSource = sql(
    "a claim's log lines",
  )`SELECT room_id, 2 AS ord, 'task.running' AS kind, run_id, task_id, NULL::bigint AS term, ${p.text("actor")} AS actor,
           jsonb_build_object('attempt', attempt, 'version', version) AS data FROM up`;
  return { ctes, logSource };
}

const PG_CLAIM = claimCtes(p.int("max"));

/**
 * The claim's first statement. PostgreSQL: the whole claim, moved and logged (`logged`); a node
 * that claimed nothing still gets one row (what was left, task columns null). SQLite: the pick.
 */
export const CLAIM = sql("a node's claim")`${p.only({
  sqlite: PICK,
  postgres: sql("a node's claim, moved and logged")`WITH ${PG_CLAIM.ctes},
  src AS (${PG_CLAIM.logSource}),
  ${LOG_CTES}
  SELECT rest.rest_ready, rest.rest_next_in, true AS logged, up.* FROM rest LEFT JOIN up ON true`,
})}`;

/** The named values of the claim's statements. */
export const claimValues = (offer: NodeOffer, max: number): Record<string, unknown> => ({
  rooms: offer.roomIds,
  node: offer.session.nodeId,
  boot: offer.session.bootId,
  actions: offer.actions,
  labels: offer.labels,
  leaseMs: Math.ceil(offer.leaseMs),
  actor: sessionKey(offer.session),
  max,
  picks: max + 1,
});

/** A claim carried out, its log lines and change notes still to write (`recordClaim`). */
export interface Claim {
  batch: ClaimBatch;
  /** Rooms of the claimed tasks. */
  rooms: Set<string>;
  /** Log lines not written by the statement (SQLite), by room. */
  lines: { roomId: string; line: LogLine }[];
}

const numberOrNull = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v));

/** The claimed tasks of moved rows (those with a run_id), and their rooms. */
export function claimedOf(
  moved: readonly Row[],
  offer: NodeOffer,
  m: Pick<Mappers, "toTask">,
): { claimed: ClaimedTask[]; rooms: Set<string> } {
  const claimed: ClaimedTask[] = [];
  const rooms = new Set<string>();
  for (const r of moved) {
    if (r.run_id === null || r.run_id === undefined) continue;
    const task = m.toTask(r);
    rooms.add(String(r.room_id));
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
  return { claimed, rooms };
}

/** What a PostgreSQL claim statement said was left, read from its first row. */
export function restOf(head: Row | undefined): { more: boolean; nextReadyInMs: number | null } {
  const more = Number(head?.rest_ready ?? 0) > 0;
  const next = more ? null : numberOrNull(head?.rest_next_in);
  return { more, nextReadyInMs: next === null ? null : Math.max(0, next) };
}

/**
 * A claim after its first statement's rows (CLAIM's, or a finish-and-claim's): PostgreSQL's rows
 * are moved and logged already (`logged`), with what was left; SQLite's are the picks, moved here.
 */
export function* claimAfter(
  first: readonly Row[],
  offer: NodeOffer,
  max: number,
  values: Record<string, unknown>,
): Script<Claim> {
  const m = yield* mappers();
  const head = first[0];
  if (head?.logged === true) {
    const { claimed, rooms } = claimedOf(first, offer, m);
    return { batch: { claimed, ...restOf(head) }, rooms, lines: [] };
  }
  const moved: Row[] = [];
  for (const pick of first.slice(0, max)) {
    const r = yield* row(MOVE, { ...values, seq: pick.seq, version: pick.version });
    if (r === undefined)
      throw new Error(`claim task: picked task ${String(pick.seq)} moved inside the write lock`);
    moved.push(r);
  }
  const { claimed, rooms } = claimedOf(moved, offer, m);
  const more = first.length > max;
  // A node with ready tasks left claims again at once; when it would wait is asked only otherwise.
  const next = more ? null : numberOrNull((yield* row(REST, values))?.rest_next_in);
  const lines = claimed.map(({ task }, i) => ({
    roomId: String(moved[i]!.room_id),
    line: {
      kind: "task.running",
      runId: task.runId,
      taskId: task.taskId,
      actor: sessionKey(offer.session),
      data: { attempt: task.attempt, version: task.version },
    },
  }));
  return {
    batch: { claimed, more, nextReadyInMs: next === null ? null : Math.max(0, next) },
    rooms,
    lines,
  };
}

/** The node named in a claim's change notes: `CLAIM_LEFT_MORE` before it when ready tasks were left. */
export const claimerOf = (offer: NodeOffer, more: boolean): string =>
  `${more ? CLAIM_LEFT_MORE : ""}${offer.session.nodeId}`;

/**
 * A claim's log lines (those its statement did not write) and change notes. The claimer is named,
 * so the leader knows the node it woke has acted (and whether it goes on by itself). A finish names
 * it in its task's room (`finishedIn`) even when the claim took nothing there: a node that stops
 * serving itself must say so, or the leader would count its free slots as taken and wake nobody.
 */
export function* recordClaim(claim: Claim, offer: NodeOffer, finishedIn?: string): Script<void> {
  for (const { roomId, line } of claim.lines) yield* log(roomId, line);
  const claimer = claimerOf(offer, claim.batch.more);
  const rooms = new Set(claim.rooms);
  if (finishedIn !== undefined) rooms.add(finishedIn);
  for (const room of rooms) yield* touch("tasks", room, [claimer]);
}

/** Up to `max` claims in one write, each picked and moved as one claim would be. */
export function* claimTasks(offer: NodeOffer, max: number): Script<ClaimBatch> {
  const values = claimValues(offer, max);
  const claim = yield* claimAfter(yield* rows(CLAIM, values), offer, max, values);
  yield* recordClaim(claim, offer);
  return claim.batch;
}

export function* claimTask(offer: NodeOffer): Script<ClaimedTask | null> {
  return (yield* claimTasks(offer, 1)).claimed[0] ?? null;
}
