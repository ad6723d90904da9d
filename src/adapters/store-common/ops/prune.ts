/**
 * Pruning, written once for both stores: one fenced transaction deletes one small batch of each
 * kind (docs/architecture.md §8, "Retention"). Old rows sit at the front of each table's seq order,
 * so the scans start there and stop at the first row that is too young (the bound): a pass with
 * nothing to prune reads a few rows, not the whole history. The deletes draw no seq.
 */
import type { LeaderFence, PruneLimits, PruneResult } from "../../../ports/store.js";
import { noneDeleted } from "../../../ports/store.js";
import { sessionKey } from "../records.js";
import {
  KEPT_FIRST_RUN,
  nothingPruned,
  ORPHAN_DEFINITION,
  PRUNABLE_OUTBOX,
  TERMINAL_RUN_LIST,
} from "../retention.js";
import type { Script } from "../script.js";
import { log, now, p, rows, run, sql } from "../script.js";
import { holdFence } from "./fence.js";

/** Past every seq: the bound when no row is young enough to stop a scan. */
const MAX_SEQ = Number.MAX_SAFE_INTEGER;

const OLD_RUNS = sql("ended runs old enough to prune")`
  SELECT r.run_id, r.definition_id FROM runs r
   WHERE r.room_id = ${p.text("roomId")} AND r.status IN ${TERMINAL_RUN_LIST} AND r.updated_at < ${p.int("cutoff")}
     AND NOT ${KEPT_FIRST_RUN}
   ${p.limit("runs")}${p.only({ postgres: " FOR UPDATE SKIP LOCKED" })}`;

const TASKS = sql("the tasks of pruned runs")`DELETE FROM tasks WHERE run_id${p.inList("runIds")}`;
const RUNS = sql("pruned runs")`DELETE FROM runs WHERE run_id${p.inList("runIds")}`;

// A firing's key names its upstream run: once that run is gone nothing can fire for it again.
const FIRINGS = sql("the after firings of pruned runs")`
  DELETE FROM after_firings WHERE room_id = ${p.text("roomId")} AND upstream_run_id${p.inList("runIds")}`;

const DEFINITIONS = sql("definitions left without runs")`
  DELETE FROM definitions AS d WHERE d.room_id = ${p.text("roomId")} AND d.dag_id${p.inList("dagIds")}
     AND ${ORPHAN_DEFINITION}`;

const INBOX = sql("old replied inbox rows")`
  DELETE FROM processed_events WHERE event_id IN (
    SELECT event_id FROM processed_events
     WHERE room_id = ${p.text("roomId")} AND origin_server_ts < ${p.int("cutoff")} AND status = 'replied'
       AND received_at < ${p.int("cutoff")} ${p.limit("rows")})`;

const OUTBOX = sql("old sent outbox rows")`
  DELETE FROM outbox WHERE seq IN (
    SELECT o.seq FROM outbox o
     WHERE o.room_id = ${p.text("roomId")} AND o.status IN ('sent','superseded','failed')
       AND o.created_at < ${p.int("cutoff")} AND o.updated_at < ${p.int("cutoff")}
       AND o.seq < coalesce((SELECT seq FROM outbox WHERE room_id = ${p.text("roomId")} AND created_at >= ${p.int("cutoff")}
                             ORDER BY seq LIMIT 1), ${p.int("maxSeq")})
       AND ${PRUNABLE_OUTBOX}
     ORDER BY o.seq ${p.limit("rows")})`;

// The room's own events and those of runs already pruned (a finished run's events are no younger
// than its last update); a run still kept keeps its whole history. Who changed the room's policy,
// and who agreed, is kept: a few lines per room. SQLite keeps the newest event of all: its next seq
// is the largest + 1 (no AUTOINCREMENT).
const EVENTS = sql("old events")`
  DELETE FROM events WHERE room_id = ${p.text("roomId")} AND seq IN (
    SELECT e.seq FROM events e
     WHERE e.room_id = ${p.text("roomId")} AND e.at < ${p.int("cutoff")}
       AND e.seq < coalesce((SELECT seq FROM events WHERE room_id = ${p.text("roomId")} AND at >= ${p.int("cutoff")}
                             ORDER BY seq LIMIT 1), ${p.int("maxSeq")})
       AND (e.run_id IS NULL OR NOT EXISTS (SELECT 1 FROM runs r WHERE r.run_id = e.run_id))
       AND e.kind NOT LIKE 'policy.%'${p.only({ sqlite: "\n       AND e.seq < (SELECT MAX(seq) FROM events)" })}
     ORDER BY e.seq ${p.limit("rows")})`;

const NODES = sql("nodes long silent")`
  DELETE FROM nodes WHERE node_id IN (SELECT node_id FROM nodes WHERE heartbeat_at < ${p.int("before")} ${p.limit("rows")})`;

const KEYS = sql("old idempotency keys")`
  DELETE FROM idempotency_keys WHERE (scope, key) IN (
    SELECT scope, key FROM idempotency_keys WHERE created_at < ${p.int("before")} ORDER BY created_at ${p.limit("rows")})`;

/** The limits are checked first (checkPruneLimits), before the transaction. */
export function* pruneBatch(fence: LeaderFence, limits: PruneLimits): Script<PruneResult> {
  yield* holdFence("prune", fence);
  const roomId = fence.roomId;
  const at = yield* now();
  const cutoff = at - limits.olderThanMs;
  const result: PruneResult = noneDeleted();

  const pruned = yield* rows<{ run_id: string; definition_id: string }>(OLD_RUNS, {
    roomId,
    cutoff,
    runs: limits.runs,
  });
  if (pruned.length > 0) {
    const runIds = pruned.map((r) => r.run_id);
    result.tasks = yield* run(TASKS, { runIds });
    result.runs = yield* run(RUNS, { runIds });
    yield* run(FIRINGS, { roomId, runIds });
    result.definitions = yield* run(DEFINITIONS, {
      roomId,
      dagIds: [...new Set(pruned.map((r) => r.definition_id))],
    });
  }
  const batch = { roomId, cutoff, rows: limits.rows, maxSeq: MAX_SEQ };
  result.inbox = yield* run(INBOX, batch);
  result.outbox = yield* run(OUTBOX, batch);
  result.events = yield* run(EVENTS, batch);
  result.nodes = yield* run(NODES, { before: at - limits.nodesOlderThanMs, rows: limits.rows });
  result.keys = yield* run(KEYS, { before: at - limits.keysOlderThanMs, rows: limits.rows });

  if (!nothingPruned(result))
    yield* log(roomId, {
      kind: "retention.pruned",
      term: fence.term,
      actor: sessionKey(fence.session),
      data: { ...result },
    });
  return result;
}
