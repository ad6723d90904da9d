/**
 * PostgreSQL text that statements written once embed in their PostgreSQL-only parts (`p.only`), and
 * that the PostgreSQL adapter uses itself: the store's clock, the event-log lock, and the event-log
 * CTEs of a one-statement write (SQLite has no data-modifying CTEs; its scripts log with a step).
 */

/**
 * The store's clock in epoch ms. `$1` of every statement that reads time is the test clock's value
 * or NULL; NULL means now(), the transaction's start time: one instant for every row a transaction
 * writes, and never later than the moment a lock wait ended, so each expiry check errs toward
 * "not yet expired" while the row lock keeps the decision safe.
 */
export const NOW = "coalesce($1::bigint, floor(extract(epoch FROM now()) * 1000)::bigint)";

/** The advisory lock key of a room's event log: writers hold it shared, readers exclusive. */
export const LOG_LOCK = (room: string): string => `hashtext('dagbot.events'), hashtext(${room})`;

/**
 * The event-log CTEs for a single-statement write whose CTE `src` yields one row per log line with
 * columns room_id, ord, kind, run_id, task_id, term, actor, data. `log_lock` reads `src`, so the
 * room's log lock is taken after the write has locked its rows (the log lock is always the last
 * lock a transaction takes), and seq is drawn per inserted row after that lock, in `ord` order.
 */
export const LOG_CTES = `
  log_lock AS (
    SELECT room_id, pg_advisory_xact_lock_shared(${LOG_LOCK("room_id")}) AS locked
      FROM (SELECT DISTINCT room_id FROM src) r),
  log_ins AS (
    INSERT INTO events (room_id, at, kind, run_id, task_id, term, actor, data)
    SELECT src.room_id, ${NOW}, src.kind, src.run_id, src.task_id, src.term, src.actor, src.data
      FROM src JOIN log_lock USING (room_id)
     ORDER BY src.ord
    RETURNING 1)`;
