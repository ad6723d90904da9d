/**
 * A room's cap on active tasks and its load (docs/architecture.md §9, "Stores"): set by a fenced
 * command, initialised once from a node's config, read with the room's active tasks and held keys.
 * Written once for both stores.
 */
import type { CommandContext, RoomLoad } from "../../../ports/store.js";
import { checkRoom, checkRoomCap, DEFAULT_ROOM_CAP } from "../checks.js";
import { sessionKey } from "../records.js";
import type { Script } from "../script.js";
import { log, p, row, rows, run, sql, touch } from "../script.js";
import { holdFence } from "./fence.js";
import { markAnswered } from "./inbox-handled.js";

const CAP = sql("a room's cap")`SELECT cap FROM room_caps WHERE room_id = ${p.text("roomId")}`;

// Locked on PostgreSQL: two changes of one room's cap apply one after the other, each naming the previous.
const CAP_LOCKED = sql("a room's cap, locked")`
  SELECT cap FROM room_caps WHERE room_id = ${p.text("roomId")}${p.only({ postgres: " FOR UPDATE" })}`;

const SET = sql("a room's cap, set")`
  INSERT INTO room_caps (room_id, cap) VALUES (${p.text("roomId")}, ${p.int("cap")})
  ON CONFLICT (room_id) DO UPDATE SET cap = excluded.cap`;

const INIT = sql("a room's first cap")`
  INSERT INTO room_caps (room_id, cap) VALUES (${p.text("roomId")}, ${p.int("cap")})
  ON CONFLICT (room_id) DO NOTHING`;

/**
 * The room's active tasks (queued, running, canceling) as two halves that each name a partial
 * index's own predicate (SQLite: tasks_claim, tasks_executor; PostgreSQL: tasks_open answers both),
 * so the active tasks are read through those indexes and never by a scan of every task ever run.
 * SQLite uses a partial index only for a query that repeats its predicate (docs/query-plans.md).
 */
export const ROOM_ACTIVE = sql("the room's active tasks")`
  SELECT t.seq, t.run_id, t.task_id, t.concurrency_key FROM tasks t
   WHERE t.status = 'queued' AND t.room_id = ${p.text("roomId")}
  UNION ALL
  SELECT t.seq, t.run_id, t.task_id, t.concurrency_key FROM tasks t
   WHERE t.status IN ('running','canceling') AND t.room_id = ${p.text("roomId")}`;

/**
 * The room's cap (null when never set), active count and held keys in one statement (one round
 * trip) of tagged rows: one 'cap' row, then one 'key' row per held key. The active tasks are read
 * once (`a`); joining them as three derived tables cost SQLite six times as much (0.144 ms against
 * 0.024 ms on a mid-run snapshot), and the leader asks on every scheduling step.
 */
export const ROOM_LOAD = sql("a room's cap, active tasks and held keys")`
  WITH a AS MATERIALIZED (${ROOM_ACTIVE})
  SELECT 'cap' AS k, (SELECT cap FROM room_caps WHERE room_id = ${p.text("roomId")}) AS cap,
         (SELECT count(*) FROM a) AS active, NULL AS concurrency_key, NULL AS dag_id, NULL AS task_id,
         NULL AS seq
  UNION ALL
  SELECT 'key', NULL, NULL, a.concurrency_key, r.dag_id, a.task_id, a.seq
    FROM a JOIN runs r ON r.run_id = a.run_id
   WHERE a.concurrency_key IS NOT NULL`;

/** The room's cap: DEFAULT_ROOM_CAP until one is set. */
export function* roomCap(roomId: string): Script<number> {
  const r = yield* row<{ cap: number }>(CAP, { roomId });
  return r === undefined ? DEFAULT_ROOM_CAP : Number(r.cap);
}

export function* getRoomCap(roomId: string): Script<number> {
  return yield* roomCap(roomId);
}

export function* roomLoad(roomId: string): Script<RoomLoad> {
  const found = yield* rows<{
    k: "cap" | "key";
    cap: number | null;
    active: number | string | null;
    concurrency_key: string | null;
    dag_id: string | null;
    task_id: string | null;
    seq: number | string | null;
  }>(ROOM_LOAD, { roomId });
  const head = found.find((r) => r.k === "cap");
  return {
    cap: head?.cap === null || head?.cap === undefined ? DEFAULT_ROOM_CAP : Number(head.cap),
    active: Number(head?.active ?? 0),
    // Held keys in seq order (the order the caps admitted them).
    keys: found
      .filter((r) => r.k === "key" && r.concurrency_key !== null)
      .sort((x, y) => Number(x.seq) - Number(y.seq))
      .map((k) => ({ key: k.concurrency_key ?? "", dagId: k.dag_id ?? "", taskId: k.task_id ?? "" })),
  };
}

/** Sets the room's cap; with a command's context, fenced and marking its inbox row handled. */
export function* setRoomCap(
  roomId: string,
  cap: number,
  ctx?: CommandContext<{ previous: number }>,
): Script<{ previous: number }> {
  const operation = "set room cap";
  checkRoomCap(cap);
  const fence = ctx?.fence;
  if (ctx !== undefined) {
    yield* holdFence(operation, ctx.fence);
    checkRoom(operation, ctx, roomId);
  }
  const old = yield* row<{ cap: number }>(CAP_LOCKED, { roomId });
  const previous = old === undefined ? DEFAULT_ROOM_CAP : Number(old.cap);
  yield* run(SET, { roomId, cap });
  yield* log(roomId, {
    kind: "cap.set",
    term: fence?.term ?? null,
    actor: fence === undefined ? null : sessionKey(fence.session),
    data: { cap },
  });
  if (ctx !== undefined) yield* markAnswered(ctx, { previous });
  yield* touch("cap", roomId);
  return { previous };
}

/** Sets the room's cap only where none was ever set (a node's configured cap at start). */
export function* initRoomCap(roomId: string, cap: number): Script<boolean> {
  checkRoomCap(cap);
  const inserted = (yield* run(INIT, { roomId, cap })) === 1;
  if (inserted) {
    yield* log(roomId, { kind: "cap.set", term: null, actor: null, data: { cap, initial: true } });
    yield* touch("cap", roomId);
  }
  return inserted;
}
