/**
 * The worker's side on PostgreSQL that is not written once in store-common/ops: the batch of many
 * finishes as ONE statement (finishes.ts), built from the finish's
 * and the claim's fragments (store-common/ops/finish.ts, claims.ts) so it moves, fences and logs
 * each finish exactly as a finish alone does.
 */
import type { TaskStatus } from "../../domain/model.js";
import type { ClaimBatch, NodeOffer } from "../../ports/store.js";
import { checkClaim } from "../store-common/checks.js";
import { LOG_CTES } from "../store-common/postgres-text.js";
import { claimCtes, claimedOf, claimValues, restOf, claimerOf } from "../store-common/ops/claims.js";
import type { FinishOrder, FinishSlots } from "../store-common/ops/finish.js";
import { finishLogSource, finishMiss, finishMove } from "../store-common/ops/finish.js";
import { tokenHeldBy } from "../store-common/ops/task-token.js";
import type { Statement } from "../store-common/script.js";
import { p, sql } from "../store-common/script.js";
import type { Db } from "./db.js";
import { cleanText } from "./sql.js";
import { toTask } from "./rows.js";
import { queryOf, readScript } from "./script-driver.js";

/**
 * Many finishes as ONE statement: the `b` rows are the finishes, from one array per value of a
 * finish (finish_rows, migration 16), each fenced by its own token exactly as a finish alone is
 * (tokenHeldBy over the row's columns) and moved by the same UPDATE with its own answers (read at
 * the row's ordinal, b_i); a refused one moves nothing and the others go on. The statement's one
 * commit and its log lock are shared.
 */
const answerAt = (name: string, element: string) =>
  sql("a batch's answer at the row's ordinal")`(${p.array(name, element)})[b_i]`;

const MANY: FinishSlots = {
  held: tokenHeldBy({
    runId: "b_run",
    taskId: "b_task",
    version: "b_version",
    node: "b_node",
    boot: "b_boot",
  }),
  from: `
    FROM b`,
  outcome: "b_outcome",
  exitCode: "b_exit",
  output: "b_output",
  error: "b_error",
  bytes: "b_bytes",
  values: "b_values",
  actor: "b_actor",
  left: answerAt("lefts", "text"),
  spent: answerAt("spents", "text"),
  canceling: answerAt("cancelings", "text"),
  waitMs: answerAt("waits", "bigint"),
  returning: ", b_i, b_outcome, b_exit, b_error, b_actor, b_wants",
};

/** finish_rows' arrays: each named value of a finish (FinishOrder.values) across the batch. */
const COLUMNS: [array: string, value: string, element: string][] = [
  ["runs", "runId", "text"],
  ["tasks", "taskId", "text"],
  ["versions", "version", "int"],
  ["nodes", "node", "text"],
  ["boots", "boot", "text"],
  ["outcomes", "outcome", "text"],
  ["exits", "exitCode", "int"],
  ["outputs", "output", "text"],
  ["errors", "error", "text"],
  ["actors", "actor", "text"],
  ["byteses", "bytes", "bigint"],
  ["outputValues", "values", "jsonb"],
];
const ANSWERS: [array: string, value: string][] = [
  ["lefts", "left"],
  ["spents", "spent"],
  ["cancelings", "canceling"],
  ["waits", "waitMs"],
];

const MANY_ROWS: Statement = {
  name: "a batch's finishes",
  parts: [
    "b AS (\n    SELECT * FROM finish_rows(",
    ...COLUMNS.flatMap(([array, , element]) => [p.array(array, element), ", "]),
    p.array("wants", "int"),
    "))",
  ],
};

export const FINISH_MANY = sql("many finishes")`WITH ${MANY_ROWS},
  fin AS (${finishMove(MANY)}),
  src AS (${finishLogSource(MANY)}),
  ${LOG_CTES}
  SELECT b_i AS i, status, room_id FROM fin`;

/**
 * Many finishes and one claim for those of them that held and asked for one (all with one offer),
 * as ONE statement: the claim takes at most the sum of their asks (its `max`).
 */
const MANY_CLAIM = claimCtes(
  sql(
    "the asks of the finishes that held",
  )`least(${p.int("max")}, (SELECT coalesce(sum(b_wants), 0) FROM fin))`,
);
export const FINISH_MANY_CLAIM = sql("many finishes and a claim")`WITH ${MANY_ROWS},
  fin AS (${finishMove(MANY)}),
  ${MANY_CLAIM.ctes},
  src AS (${finishLogSource(MANY)}
          UNION ALL
          ${MANY_CLAIM.logSource}),
  ${LOG_CTES}
  SELECT (SELECT json_agg(json_build_array(b_i, status, room_id)) FROM fin) AS fins,
         rest.rest_ready, rest.rest_next_in, up.*
    FROM rest LEFT JOIN up ON true`;

/** The batch's named values: finish_rows' arrays, the claims asked for, the answers. */
function batchValues(orders: readonly FinishOrder[]): Record<string, unknown> {
  const values: Record<string, unknown> = {};
  // Text from a process may hold U+0000 or lone surrogates, which PostgreSQL refuses (cleanText).
  const clean = (v: unknown): unknown => (typeof v === "string" ? cleanText(v) : v);
  for (const [array, value, element] of COLUMNS)
    values[array] = orders.map((o) => (element === "text" ? clean(o.values[value]) : o.values[value]));
  values.wants = orders.map((o) => o.claim);
  for (const [array, value] of ANSWERS) values[array] = orders.map((o) => o.values[value]);
  return values;
}

/** What became of one finish of a batch: its task's status, or the error it alone gets. */
export type FinishAnswer =
  { ok: true; status: TaskStatus; batch: ClaimBatch | null } | { ok: false; error: Error };

/** The finish's change notes, after the commit. */
function finished(db: Db, status: TaskStatus, roomId: string): void {
  db.committed("tasks", roomId);
  // A retry is claimable once its backoff passes, with no scheduling step: the leader must look.
  if (status === "queued") db.committed("ready", roomId);
  else db.committed("done", roomId);
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
  const values = batchValues(orders);
  const held = new Map<number, { status: TaskStatus; room: string }>();
  let claimed: ClaimBatch | null = null;
  if (offer === null) {
    const q = queryOf(FINISH_MANY, values, db.clockParam());
    const rows = await db.one("finish task", q.sql, q.values);
    for (const r of rows) held.set(Number(r.i), { status: r.status as TaskStatus, room: String(r.room_id) });
  } else {
    const wants = orders.reduce((n, o) => n + o.claim, 0);
    checkClaim(offer, wants);
    const q = queryOf(FINISH_MANY_CLAIM, { ...values, ...claimValues(offer, wants) }, db.clockParam());
    const rows = await db.one("finish task", q.sql, q.values);
    const fins = (rows[0]?.fins ?? []) as [number, TaskStatus, string][];
    for (const [i, status, room] of fins) held.set(Number(i), { status, room });
    const { claimed: tasks, rooms } = claimedOf(rows, offer, { toTask });
    claimed = { claimed: tasks, ...restOf(rows[0]) };
    // A finish names the claimer in its task's room even when the claim took nothing there
    // (store-common/ops/claims.ts, recordClaim).
    orders.forEach((o, k) => {
      const h = held.get(k + 1);
      if (o.claim > 0 && h !== undefined) rooms.add(h.room);
    });
    const claimer = claimerOf(offer, claimed.more);
    for (const room of rooms) db.committed("tasks", room, [claimer]);
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
        a ?? {
          ok: false,
          error: await readScript(db, "finish task", () =>
            finishMiss(orders[k]!.token, orders[k]!.result),
          ).catch((e: unknown) => (e instanceof Error ? e : new Error(String(e)))),
        },
    ),
  );
}
