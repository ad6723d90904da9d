/** Pruning on PostgreSQL: one fenced transaction deletes one small batch of each kind. */
import type { LeaderFence, PruneLimits, PruneResult } from "../../ports/store.js";
import { noneDeleted } from "../../ports/store.js";
import type { Db } from "./db.js";
import { NOW, sessionKey } from "./sql.js";
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
// whole history. The deletes take no event-log lock: they remove rows older than any reader's
// position and draw no seq.
const MAX_SEQ = "9223372036854775807";

export async function pruneBatch(db: Db, fence: LeaderFence, limits: PruneLimits): Promise<PruneResult> {
  checkPruneLimits(limits);
  return db.tx("prune", async (tx) => {
    await db.lockFence(tx, "prune", fence);
    const room = fence.roomId;
    const { rows: nowRows } = await tx.query<{ now: string }>(`SELECT ${NOW} AS now`, [tx.clockParam]);
    const now = Number(nowRows[0]?.now);
    const cutoff = now - limits.olderThanMs;
    const result: PruneResult = noneDeleted();

    const { rows: pruned } = await tx.query<{ run_id: string; definition_id: string }>(
      `SELECT r.run_id, r.definition_id FROM runs r
        WHERE r.room_id = $1 AND r.status IN ${TERMINAL_RUN_LIST} AND r.updated_at < $2 AND NOT ${KEPT_FIRST_RUN}
        LIMIT $3 FOR UPDATE SKIP LOCKED`,
      [room, cutoff, limits.runs],
    );
    if (pruned.length > 0) {
      const runIds = pruned.map((r) => r.run_id);
      result.tasks =
        (await tx.query("DELETE FROM tasks WHERE run_id = ANY($1::text[])", [runIds])).rowCount ?? 0;
      result.runs =
        (await tx.query("DELETE FROM runs WHERE run_id = ANY($1::text[])", [runIds])).rowCount ?? 0;
      // A firing's key names its upstream run: once that run is gone nothing can fire for it again.
      await tx.query("DELETE FROM after_firings WHERE room_id = $1 AND upstream_run_id = ANY($2::text[])", [
        room,
        runIds,
      ]);
      result.definitions =
        (
          await tx.query(
            `DELETE FROM definitions d WHERE d.room_id = $1 AND d.dag_id = ANY($2::text[]) AND ${ORPHAN_DEFINITION}`,
            [room, [...new Set(pruned.map((r) => r.definition_id))]],
          )
        ).rowCount ?? 0;
    }

    result.inbox =
      (
        await tx.query(
          `DELETE FROM processed_events WHERE event_id IN (
             SELECT event_id FROM processed_events
              WHERE room_id = $1 AND origin_server_ts < $2 AND status = 'replied' AND received_at < $2 LIMIT $3)`,
          [room, cutoff, limits.rows],
        )
      ).rowCount ?? 0;

    result.outbox =
      (
        await tx.query(
          `DELETE FROM outbox WHERE seq IN (
             SELECT o.seq FROM outbox o
              WHERE o.room_id = $1 AND o.status IN ('sent','superseded','failed')
                AND o.created_at < $2 AND o.updated_at < $2
                AND o.seq < coalesce((SELECT seq FROM outbox WHERE room_id = $1 AND created_at >= $2
                                       ORDER BY seq LIMIT 1), $4::bigint)
                AND ${PRUNABLE_OUTBOX}
              ORDER BY o.seq LIMIT $3)`,
          [room, cutoff, limits.rows, MAX_SEQ],
        )
      ).rowCount ?? 0;

    // The room's own events and those of runs already pruned (a finished run's events are no
    // younger than its last update); a run still kept keeps its whole history.
    result.events =
      (
        await tx.query(
          `DELETE FROM events WHERE room_id = $1 AND seq IN (
             SELECT e.seq FROM events e
              WHERE e.room_id = $1 AND e.at < $2
                AND e.seq < coalesce((SELECT seq FROM events WHERE room_id = $1 AND at >= $2
                                       ORDER BY seq LIMIT 1), $4::bigint)
                AND (e.run_id IS NULL OR NOT EXISTS (SELECT 1 FROM runs r WHERE r.run_id = e.run_id))
                -- Who changed the room's policy, and who agreed, is kept (issue 24): a few lines per room.
                AND e.kind NOT LIKE 'policy.%'
              ORDER BY e.seq LIMIT $3)`,
          [room, cutoff, limits.rows, MAX_SEQ],
        )
      ).rowCount ?? 0;

    result.nodes =
      (
        await tx.query(
          "DELETE FROM nodes WHERE node_id IN (SELECT node_id FROM nodes WHERE heartbeat_at < $1 LIMIT $2)",
          [now - limits.nodesOlderThanMs, limits.rows],
        )
      ).rowCount ?? 0;

    result.keys =
      (
        await tx.query(
          `DELETE FROM idempotency_keys WHERE (scope, key) IN (
             SELECT scope, key FROM idempotency_keys WHERE created_at < $1 ORDER BY created_at LIMIT $2)`,
          [now - limits.keysOlderThanMs, limits.rows],
        )
      ).rowCount ?? 0;

    if (!nothingPruned(result)) {
      tx.log(room, {
        kind: "retention.pruned",
        term: fence.term,
        actor: sessionKey(fence.session),
        data: { ...result },
      });
    }
    return result;
  });
}
