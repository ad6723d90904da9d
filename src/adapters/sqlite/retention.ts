/** Pruning on SQLite: one fenced BEGIN IMMEDIATE transaction deletes one small batch of each kind. */
import type { LeaderFence, PruneLimits, PruneResult } from "../../ports/store.js";
import { noneDeleted } from "../../ports/store.js";
import type { SqliteConnection } from "./connection.js";
import { LIMIT } from "./connection.js";
import { sessionKey } from "./connection.js";
import {
  checkPruneLimits,
  KEPT_FIRST_RUN,
  nothingPruned,
  ORPHAN_DEFINITION,
  PRUNABLE_OUTBOX,
  TERMINAL_RUN_LIST,
} from "../store-common/retention.js";

// Old rows sit at the front of each table's seq order, so the scans below start there and stop at
// the first row that is too young (`bound`): a pass with nothing to prune reads a few rows, not the
// whole history.
const MAX_SEQ = Number.MAX_SAFE_INTEGER;

export function pruneBatch(
  c: SqliteConnection,
  fence: LeaderFence,
  limits: PruneLimits,
): Promise<PruneResult> {
  checkPruneLimits(limits);
  return c.write("prune", (tx) => {
    c.checkFence("prune", fence, tx.now);
    const room = fence.roomId;
    const cutoff = tx.now - limits.olderThanMs;
    const result: PruneResult = noneDeleted();

    const pruned = c.all<{ run_id: string; definition_id: string }>(
      `SELECT r.run_id, r.definition_id FROM runs r
        WHERE r.room_id = ? AND r.status IN ${TERMINAL_RUN_LIST} AND r.updated_at < ? AND NOT ${KEPT_FIRST_RUN}
        ${LIMIT}`,
      room,
      cutoff,
      limits.runs,
    );
    if (pruned.length > 0) {
      const ids = JSON.stringify(pruned.map((r) => r.run_id));
      result.tasks = c.run("DELETE FROM tasks WHERE run_id IN (SELECT value FROM json_each(?))", ids);
      result.runs = c.run("DELETE FROM runs WHERE run_id IN (SELECT value FROM json_each(?))", ids);
      // A firing's key names its upstream run: once that run is gone nothing can fire for it again.
      c.run(
        "DELETE FROM after_firings WHERE room_id = ? AND upstream_run_id IN (SELECT value FROM json_each(?))",
        room,
        ids,
      );
      result.definitions = c.run(
        `DELETE FROM definitions AS d
          WHERE d.room_id = ? AND d.dag_id IN (SELECT value FROM json_each(?)) AND ${ORPHAN_DEFINITION}`,
        room,
        JSON.stringify([...new Set(pruned.map((r) => r.definition_id))]),
      );
    }

    result.inbox = c.run(
      `DELETE FROM processed_events WHERE event_id IN (
         SELECT event_id FROM processed_events
          WHERE room_id = ? AND origin_server_ts < ? AND status = 'replied' AND received_at < ? ${LIMIT})`,
      room,
      cutoff,
      cutoff,
      limits.rows,
    );

    const outboxBound =
      c.get<{ seq: number }>(
        "SELECT seq FROM outbox WHERE room_id = ? AND created_at >= ? ORDER BY seq LIMIT 1",
        room,
        cutoff,
      )?.seq ?? MAX_SEQ;
    result.outbox = c.run(
      `DELETE FROM outbox WHERE seq IN (
         SELECT o.seq FROM outbox o
          WHERE o.room_id = ? AND o.seq < ? AND o.status IN ('sent','superseded','failed')
            AND o.created_at < ? AND o.updated_at < ? AND ${PRUNABLE_OUTBOX}
          ORDER BY o.seq ${LIMIT})`,
      room,
      outboxBound,
      cutoff,
      cutoff,
      limits.rows,
    );

    // The room's own events and those of runs already pruned (a finished run's events are no
    // younger than its last update); a run still kept keeps its whole history.
    const eventBound =
      c.get<{ seq: number }>(
        "SELECT seq FROM events WHERE room_id = ? AND at >= ? ORDER BY seq LIMIT 1",
        room,
        cutoff,
      )?.seq ?? MAX_SEQ;
    result.events = c.run(
      `DELETE FROM events WHERE seq IN (
         SELECT e.seq FROM events e
          WHERE e.room_id = ? AND e.seq < ? AND e.at < ?
            AND (e.run_id IS NULL OR NOT EXISTS (SELECT 1 FROM runs r WHERE r.run_id = e.run_id))
            -- Who changed the room's policy, and who agreed, is kept (issue 24): a few lines per room.
            AND e.kind NOT LIKE 'policy.%'
            -- The newest event stays: the next seq is the largest + 1 (no AUTOINCREMENT, migration 7).
            AND e.seq < (SELECT MAX(seq) FROM events)
          ORDER BY e.seq ${LIMIT})`,
      room,
      eventBound,
      cutoff,
      limits.rows,
    );

    result.nodes = c.run(
      `DELETE FROM nodes WHERE node_id IN (SELECT node_id FROM nodes WHERE heartbeat_at < ? ${LIMIT})`,
      tx.now - limits.nodesOlderThanMs,
      limits.rows,
    );

    result.keys = c.run(
      `DELETE FROM idempotency_keys WHERE rowid IN (
         SELECT rowid FROM idempotency_keys WHERE created_at < ? ORDER BY created_at ${LIMIT})`,
      tx.now - limits.keysOlderThanMs,
      limits.rows,
    );

    if (!nothingPruned(result)) {
      tx.log({
        roomId: room,
        kind: "retention.pruned",
        term: fence.term,
        actor: sessionKey(fence.session),
        data: { ...result },
      });
    }
    return result;
  });
}
