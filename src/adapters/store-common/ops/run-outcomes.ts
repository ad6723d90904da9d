/**
 * Run outcomes (docs/architecture.md §3, "Run"): a running run whose tasks have all ended succeeds
 * or fails, a canceling one is canceled. The domain decides each run's outcome (deriveRunOutcome in
 * src/domain/run-status.ts) from the statuses this reads; the store writes the decided status as a
 * value, guarded by the status it read. Written once for both stores.
 */
import type { RunStatus, TaskStatus } from "../../../domain/model.js";
import { deriveRunOutcome } from "../../../domain/run-status.js";
import type { LeaderFence, RunOutcome } from "../../../ports/store.js";
import { sessionKey } from "../records.js";
import type { Script } from "../script.js";
import { log, p, rows, sql, touch } from "../script.js";
import { fenceConflict, FENCE_HOLDS, fenceValues, holdFence } from "./fence.js";

/** Nothing of run `r` is left open; the partial index of open tasks answers it cheaply. */
const NOTHING_OPEN = sql("nothing of the run is left open")`NOT EXISTS (SELECT 1 FROM tasks t
   WHERE t.run_id = r.run_id AND t.status IN ('blocked','queued','running','canceling'))`;

const NO_TEXT = "CAST(NULL AS TEXT)";

/**
 * Whether the fence holds, and the room's running or canceling runs with nothing left open: the look
 * a leader makes on every tick, which almost always finds no run. It reads no task row of a run that
 * still has one open (the NOT EXISTS stops at the first), so its cost does not grow with the size of
 * the runs going on. Tagged rows, the fence's first: SQLite planned a join of the two as a co-routine
 * that cost three times as much; sorted here, not by an ORDER BY, whose sorter cost SQLite ten times
 * the look itself (0.076 ms against 0.008 ms on a mid-run snapshot).
 */
const LOOK = sql("the runs that may have ended, fenced")`
  SELECT 'fence' AS k, count(*) AS held, ${NO_TEXT} AS run_id, ${NO_TEXT} AS dag_id, ${NO_TEXT} AS status,
         CAST(NULL AS BIGINT) AS created_at
    FROM room_leases WHERE ${FENCE_HOLDS}
  UNION ALL
  SELECT 'run', 0, r.run_id, r.dag_id, r.status, r.created_at FROM runs r
   WHERE r.room_id = ${p.text("roomId")} AND r.status IN ('running','canceling') AND ${NOTHING_OPEN}`;

/** The distinct statuses of the tasks of the runs the look found: what the domain decides from. */
const STATUSES = sql("the statuses of the ended runs' tasks")`
  SELECT DISTINCT run_id, status FROM tasks WHERE run_id${p.inList("runIds")}`;

// Guarded by the status read and by nothing being open again (a retried task), so a run changes
// only as the domain decided from what was read.
const END = sql("runs, to their outcome")`
  UPDATE runs SET status = ${p.text("to")}, updated_at = ${p.now}
   WHERE run_id${p.inList("runIds")} AND status = ${p.text("from")}
     AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.run_id = runs.run_id
                      AND t.status IN ('blocked','queued','running','canceling'))
  RETURNING run_id`;

/** A run whose outcome the domain decided, as read. */
type Decided = RunOutcome;

/** The runs whose status the domain would change now, oldest first; null when the fence no longer holds. */
function* decided(fence: LeaderFence): Script<Decided[] | null> {
  const found = yield* rows<{
    k: "fence" | "run";
    held: number | string;
    run_id: string;
    dag_id: string;
    status: RunStatus;
    created_at: number | string | null;
  }>(LOOK, fenceValues(fence));
  if (Number(found.find((r) => r.k === "fence")?.held ?? 0) === 0) return null;
  const runs = new Map<string, { dagId: string; status: RunStatus; tasks: TaskStatus[] }>();
  // Oldest first, as a run's outcome is written.
  const ended = found
    .filter((r) => r.k === "run")
    .sort((a, b) => Number(a.created_at) - Number(b.created_at) || (a.run_id < b.run_id ? -1 : 1));
  for (const r of ended) runs.set(r.run_id, { dagId: r.dag_id, status: r.status, tasks: [] });
  if (runs.size === 0) return [];
  const statuses = yield* rows<{ run_id: string; status: TaskStatus }>(STATUSES, {
    runIds: [...runs.keys()],
  });
  for (const t of statuses) runs.get(t.run_id)?.tasks.push(t.status);
  const out: Decided[] = [];
  for (const [runId, r] of runs) {
    const to = deriveRunOutcome(r.status, r.tasks);
    if (to !== r.status) out.push({ runId, dagId: r.dagId, from: r.status, to });
  }
  return out;
}

/**
 * The leader's cheap look, without a lock or a write: whether any run's outcome is due. A leader
 * derives outcomes on every tick and almost always finds nothing, so that costs this one read.
 */
export function* runOutcomesDue(fence: LeaderFence): Script<boolean> {
  const due = yield* decided(fence);
  if (due === null) throw yield* fenceConflict("derive run outcomes", fence);
  return due.length > 0;
}

/** Ends each run whose tasks have all ended, as the domain decides; the runs that changed, oldest first. */
export function* deriveRunOutcomes(fence: LeaderFence): Script<RunOutcome[]> {
  const operation = "derive run outcomes";
  yield* holdFence(operation, fence);
  const due = yield* decided(fence);
  if (due === null) throw yield* fenceConflict(operation, fence);
  const changed = new Set<string>();
  for (const [from, to] of [...new Set(due.map((d) => `${d.from}>${d.to}`))].map((k) => k.split(">"))) {
    const runIds = due.filter((d) => d.from === from && d.to === to).map((d) => d.runId);
    for (const r of yield* rows<{ run_id: string }>(END, { to, runIds, from })) changed.add(r.run_id);
  }
  const outcomes = due.filter((d) => changed.has(d.runId));
  const actor = sessionKey(fence.session);
  for (const o of outcomes)
    yield* log(fence.roomId, {
      kind: `run.${o.to}`,
      runId: o.runId,
      term: fence.term,
      actor,
      data: { from: o.from },
    });
  if (outcomes.length > 0) yield* touch("runs", fence.roomId);
  return outcomes;
}
