/**
 * The scheduler's decisions for one room, as a pure function of a snapshot (docs/architecture.md §4 step 4):
 * which blocked tasks become queued and which become skipped. The store adapters implement the same
 * rules in SQL; this is the reference they are property-tested against.
 *
 * Semantics:
 * - Only tasks of `running` runs move. Pending runs wait for confirmation; a canceling run's blocked
 *   tasks are canceled by the cancel handler, not skipped or queued.
 * - Skip and ready follow each task's run condition (run-when.ts, judgeWhen): by default a blocked
 *   task with some `needs` task failed, timed_out, canceled or skipped becomes skipped, and one whose
 *   needs all succeeded is ready; a conditional task (`when` = failed, denied, done) waits until
 *   every need ended, then is ready or skipped by its condition. The decision is closed under
 *   dependency: a task skipped in this same decision counts as skipped for the tasks behind it, so
 *   one call reaches the fixed point. A need missing from the snapshot never ends, so its task stays
 *   blocked (parseDag rejects unknown needs; this is defence only).
 * - Caps count *active* tasks: queued + running + canceling, of any run in the room. Queued counts
 *   because the scheduler is the only writer that admits work (one leader, term-fenced), so the caps
 *   hold without workers coordinating: a claim is a plain CAS on one row, and a retry (running →
 *   queued) keeps the slot it had.
 *   - global cap: active tasks in the room ≤ `globalCap` (null = no limit; 0 pauses the room);
 *   - per-run cap: active tasks of a run ≤ its `maxParallel` (null = no limit);
 *   - `concurrencyKey`: at most one active task per key in the room, others wait behind it.
 *   A cap lowered below the current count stops admissions until enough tasks finish; it never
 *   touches queued or running tasks (there is no move back to blocked).
 * - Order: ready tasks are admitted greedily in pick order — priority descending, then `seq`
 *   ascending (creation order: first in, first out), then run id and task id for determinism. A task
 *   held back by its run's cap or its key does not hold back later tasks of other runs or keys; the
 *   global cap stops admission outright.
 * - Gates (gates.ts): a ready approval gate is opened (`toOpen`) instead of queued; it stays blocked
 *   while open, holds no slot and no key, and is never queued. Its skip follows the rule above.
 * - Fan-outs (fan-out.ts): a ready template is expanded (`toExpand`) instead of queued: the store
 *   replaces it by its instances in the same write. An instance counts against its fan-out's own
 *   limit (`fanOutLimit`: active instances of one fan-out of one run), beside the run's and the
 *   room's. With fail_fast, once an instance of a fan-out ended failed or timed_out, its instances
 *   that have not started are skipped: blocked ones with the skips above, queued ones (`toStop`).
 */
import type { RunStatus, TaskStatus } from "./model.js";
import type { RunWhen, WhenVerdict } from "./run-when.js";
import { judgeWhen } from "./run-when.js";
import { ACTIVE_TASK_STATUSES } from "./task-states.js";

export interface TaskRef {
  runId: string;
  taskId: string;
}

export interface ScheduleTask {
  runId: string;
  taskId: string;
  status: TaskStatus;
  /** Task ids of the same run. */
  needs: readonly string[];
  priority: number;
  /** Creation order in the room (e.g. the row id): lower was published first. */
  seq: number;
  concurrencyKey: string | null;
  /** An approval gate: absent or false for a task that runs an action. */
  isGate?: boolean;
  /** The gate has opened (its state is set); it waits for people, not for the scheduler. */
  gateOpen?: boolean;
  /** Its run condition (run-when.ts); absent means "succeeded". */
  when?: RunWhen;
  /** A fan-out's template (for_each): expanded when its needs succeeded, never queued. */
  isFanOut?: boolean;
  /** An instance of a fan-out: its fan-out's id (the template's), else absent or null. */
  fanOut?: string | null;
  /** An instance's fan-out's max_parallel; null or absent: no limit of its own. */
  fanOutLimit?: number | null;
  /** An instance's fan-out's fail_fast. */
  failFast?: boolean;
}

export interface ScheduleRun {
  runId: string;
  status: RunStatus;
  /** Per-run cap on active tasks; null means only the global cap applies. */
  maxParallel: number | null;
}

/** The room's non-terminal runs and all their tasks. Runs absent here are treated as not running. */
export interface ScheduleSnapshot {
  runs: readonly ScheduleRun[];
  tasks: readonly ScheduleTask[];
}

export interface ScheduleCaps {
  /** Room-wide cap on active tasks (`!dag cap <n>`); null means no limit, 0 admits nothing. */
  globalCap: number | null;
}

export interface ScheduleDecision {
  /** In pick order: the order to admit them in. */
  toQueue: TaskRef[];
  /** In seq order. */
  toSkip: TaskRef[];
  /** Approval gates whose condition is met (their needs all succeeded, by default) and that are not open yet, in seq order. */
  toOpen: TaskRef[];
  /** Fan-out templates whose needs all succeeded, to replace by their instances, in seq order. */
  toExpand: TaskRef[];
  /** Queued instances of a fail_fast fan-out one of whose instances failed: to skip, in seq order. */
  toStop: TaskRef[];
}

/** Whether an instance's end stops its fail_fast fan-out's instances that have not started. */
export function stopsFanOut(t: Pick<ScheduleTask, "fanOut" | "failFast" | "status">): boolean {
  return (
    t.fanOut !== undefined &&
    t.fanOut !== null &&
    t.failFast === true &&
    (t.status === "failed" || t.status === "timed_out")
  );
}

/** Total order in which ready tasks are admitted: priority desc, seq asc, then run id, task id. */
export function comparePickOrder(a: ScheduleTask, b: ScheduleTask): number {
  if (a.priority !== b.priority) return b.priority - a.priority;
  if (a.seq !== b.seq) return a.seq - b.seq;
  if (a.runId !== b.runId) return a.runId < b.runId ? -1 : 1;
  if (a.taskId !== b.taskId) return a.taskId < b.taskId ? -1 : 1;
  return 0;
}

function compareSeq(a: ScheduleTask, b: ScheduleTask): number {
  if (a.seq !== b.seq) return a.seq - b.seq;
  if (a.runId !== b.runId) return a.runId < b.runId ? -1 : 1;
  return a.taskId < b.taskId ? -1 : a.taskId > b.taskId ? 1 : 0;
}

// A separator that cannot occur in ids ([A-Za-z0-9_.-]), so (run, task) pairs never collide.
const key = (runId: string, taskId: string): string => `${runId}\u0000${taskId}`;

export function decideSchedule(snapshot: ScheduleSnapshot, caps: ScheduleCaps): ScheduleDecision {
  const runs = new Map(snapshot.runs.map((r) => [r.runId, r]));
  const byKey = new Map<string, ScheduleTask>();
  for (const t of snapshot.tasks) byKey.set(key(t.runId, t.taskId), t);
  const isMovable = (t: ScheduleTask): boolean =>
    t.status === "blocked" && runs.get(t.runId)?.status === "running";

  // Skips first, to the fixed point: a skip only ever enables more skips or lets a conditional
  // task (run-when.ts) whose needs have now all ended be judged, never queues an ordinary one. A
  // worklist over reverse edges keeps a long chain linear instead of one pass per link.
  const dependents = new Map<string, ScheduleTask[]>();
  for (const t of snapshot.tasks) {
    for (const n of t.needs) {
      const k = key(t.runId, n);
      const list = dependents.get(k);
      if (list === undefined) dependents.set(k, [t]);
      else list.push(t);
    }
  }
  const skipped = new Set<string>();
  const verdict = (t: ScheduleTask): WhenVerdict =>
    judgeWhen(
      t.when,
      t.needs.map((n) => {
        const need = byKey.get(key(t.runId, n));
        if (need === undefined) return { status: undefined };
        return {
          status: skipped.has(key(t.runId, n)) ? "skipped" : need.status,
          isGate: need.isGate === true,
        };
      }),
    );
  const work: ScheduleTask[] = [];
  const skip = (t: ScheduleTask): void => {
    skipped.add(key(t.runId, t.taskId));
    work.push(t);
  };
  for (const t of snapshot.tasks) if (isMovable(t) && verdict(t) === "skip") skip(t);
  // fail_fast: the fan-outs one of whose instances failed; their blocked instances are skipped
  // (and what needs them, through the worklist), their queued ones stopped.
  const stopped = new Set(snapshot.tasks.filter(stopsFanOut).map((t) => key(t.runId, t.fanOut!)));
  const inStopped = (t: ScheduleTask): boolean =>
    t.fanOut !== undefined && t.fanOut !== null && stopped.has(key(t.runId, t.fanOut));
  if (stopped.size > 0)
    for (const t of snapshot.tasks)
      if (inStopped(t) && isMovable(t) && !skipped.has(key(t.runId, t.taskId))) skip(t);
  for (let next = work.pop(); next !== undefined; next = work.pop()) {
    for (const d of dependents.get(key(next.runId, next.taskId)) ?? []) {
      if (skipped.has(key(d.runId, d.taskId)) || !isMovable(d)) continue;
      if (verdict(d) === "skip") skip(d);
    }
  }

  const active = snapshot.tasks.filter((t) => ACTIVE_TASK_STATUSES.has(t.status));

  const satisfied = snapshot.tasks.filter(
    (t) => isMovable(t) && !skipped.has(key(t.runId, t.taskId)) && verdict(t) === "run",
  );
  const toOpen = satisfied
    .filter((t) => t.isGate === true && t.gateOpen !== true)
    .sort(compareSeq)
    .map((t) => ({ runId: t.runId, taskId: t.taskId }));
  const toExpand = satisfied
    .filter((t) => t.isFanOut === true)
    .sort(compareSeq)
    .map((t) => ({ runId: t.runId, taskId: t.taskId }));
  const ready = satisfied.filter((t) => t.isGate !== true && t.isFanOut !== true).sort(comparePickOrder);

  const toQueue = admit(ready, active, (runId) => runs.get(runId)?.maxParallel ?? null, caps);

  const toSkip = snapshot.tasks
    .filter((t) => skipped.has(key(t.runId, t.taskId)))
    .sort(compareSeq)
    .map((t) => ({ runId: t.runId, taskId: t.taskId }));
  const toStop = snapshot.tasks
    .filter((t) => t.status === "queued" && inStopped(t) && runs.get(t.runId)?.status === "running")
    .sort(compareSeq)
    .map((t) => ({ runId: t.runId, taskId: t.taskId }));
  return { toQueue, toSkip, toOpen, toExpand, toStop };
}

/**
 * Admission, shared by decideSchedule and the leader's view (schedule-view.ts): `ready` in pick
 * order, each admitted unless its run is at its max_parallel, its fan-out at its own, or its key is
 * held, until the room's cap is reached; `active` (queued, running, canceling) counts against the caps.
 */
export function admit(
  ready: Iterable<ScheduleTask>,
  active: ReadonlyArray<Pick<ScheduleTask, "runId" | "concurrencyKey" | "fanOut">>,
  maxParallelOf: (runId: string) => number | null,
  caps: ScheduleCaps,
): TaskRef[] {
  let globalActive = active.length;
  const runActive = new Map<string, number>();
  const fanOutActive = new Map<string, number>();
  const keysHeld = new Set<string>();
  for (const a of active) {
    runActive.set(a.runId, (runActive.get(a.runId) ?? 0) + 1);
    if (a.concurrencyKey !== null) keysHeld.add(a.concurrencyKey);
    if (a.fanOut !== undefined && a.fanOut !== null) {
      const g = key(a.runId, a.fanOut);
      fanOutActive.set(g, (fanOutActive.get(g) ?? 0) + 1);
    }
  }
  const toQueue: TaskRef[] = [];
  for (const t of ready) {
    if (caps.globalCap !== null && globalActive >= caps.globalCap) break;
    const maxParallel = maxParallelOf(t.runId);
    const inRun = runActive.get(t.runId) ?? 0;
    if (maxParallel !== null && inRun >= maxParallel) continue;
    if (t.concurrencyKey !== null && keysHeld.has(t.concurrencyKey)) continue;
    const group = t.fanOut === undefined || t.fanOut === null ? null : key(t.runId, t.fanOut);
    const inGroup = group === null ? 0 : (fanOutActive.get(group) ?? 0);
    if (group !== null && t.fanOutLimit != null && inGroup >= t.fanOutLimit) continue;
    toQueue.push({ runId: t.runId, taskId: t.taskId });
    globalActive += 1;
    runActive.set(t.runId, inRun + 1);
    if (group !== null) fanOutActive.set(group, inGroup + 1);
    if (t.concurrencyKey !== null) keysHeld.add(t.concurrencyKey);
  }
  return toQueue;
}
