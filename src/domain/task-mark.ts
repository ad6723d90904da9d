/**
 * An operator's mark on a task (docs/architecture.md §3, "Mark"): `mark <run> <task> succeeded|skipped
 * [reason]` ends a task that failed, timed out, was denied, or still waits (blocked, queued, an open
 * gate) as the operator says, so that what needs it may go on. Pure: the store reads the run's tasks
 * in its fenced transaction, asks decideMark, and writes the moves it names with guarded UPDATEs.
 *
 * - Only a task of a `running` run is marked: a run that ended has fired its `after` triggers and
 *   said its final word, which a mark would make untrue; a pending one runs nothing yet; a canceling
 *   one is ending.
 * - A running (or canceling) task is refused: its process would go on; cancel it first.
 * - Which statuses may be marked, and to what, is the task table's (`canTransitionTask(from, to,
 *   "leader")`, the `mark` rows of task-states.ts): blocked, queued, failed, timed_out.
 * - For its dependents a mark means what the status means to the scheduler (scheduling.ts): a task
 *   marked succeeded lets them be queued; one marked skipped skips them, as any skipped need does
 *   (SKIPPING_TASK_STATUSES), so a mark never makes `skipped` mean something new. A failed or
 *   timed-out task marked succeeded has had its dependents skipped already: those the scheduler
 *   skipped (no error of their own, no gate state: a gate that timed out skipped itself) and whose
 *   needs are no longer bad are `revive`d (skipped → blocked), transitively, and the scheduler
 *   decides them again; one that has another bad need stays skipped.
 */
import type { RunStatus, TaskStatus } from "./model.js";
import type { GateFace } from "./gates.js";
import { SKIPPING_TASK_STATUSES, canTransitionTask } from "./task-states.js";

export const MARK_TARGETS = ["succeeded", "skipped"] as const;
export type MarkTarget = (typeof MARK_TARGETS)[number];

export function isMarkTarget(value: unknown): value is MarkTarget {
  return typeof value === "string" && (MARK_TARGETS as readonly string[]).includes(value);
}

/** The longest reason kept (the task's words on the card and in the log). */
export const MAX_MARK_REASON = 500;

/** Who marked, from which face, and why: what the log line and the task's words keep. */
export interface MarkInput {
  to: MarkTarget;
  by: string;
  face: GateFace;
  reason: string | null;
}

/** What decideMark reads of each task of the run. */
export interface MarkTask {
  taskId: string;
  status: TaskStatus;
  needs: readonly string[];
  /** The task's own words (an action's failure, a mark); null for a task the scheduler skipped. */
  error: string | null;
  /** Whether it is an approval gate that opened (a gate that timed out skipped itself). */
  gateOpened: boolean;
}

export type MarkVerdict =
  /** The move, and the dependents skipped → blocked with it, in the run's task order. */
  | { kind: "marked"; from: TaskStatus; to: MarkTarget; revive: string[] }
  /** Its process runs: a mark would not stop it. */
  | { kind: "running"; status: TaskStatus }
  /** Not a status the table lets a mark move (succeeded, canceled, skipped, or already that). */
  | { kind: "wrong-status"; status: TaskStatus }
  /** The run is not running: ended, pending, or canceling. */
  | { kind: "run-not-running"; runStatus: RunStatus };

/** The mark's verdict for task `taskId` of a run in `runStatus` whose tasks are `tasks`. */
export function decideMark(
  runStatus: RunStatus,
  tasks: readonly MarkTask[],
  taskId: string,
  to: MarkTarget,
): MarkVerdict | null {
  const task = tasks.find((t) => t.taskId === taskId);
  if (task === undefined) return null;
  if (runStatus !== "running") return { kind: "run-not-running", runStatus };
  if (task.status === "running" || task.status === "canceling")
    return { kind: "running", status: task.status };
  if (!canTransitionTask(task.status, to, "leader")) return { kind: "wrong-status", status: task.status };
  const revive =
    to === "succeeded" && SKIPPING_TASK_STATUSES.has(task.status) ? revived(tasks, task.taskId) : [];
  return { kind: "marked", from: task.status, to, revive };
}

/**
 * The skipped dependents of `marked` (now succeeded) that nothing else holds skipped: a worklist
 * over reverse edges, each task looked at again when one of its needs is revived, so the answer is
 * the same whatever the task order.
 */
function revived(tasks: readonly MarkTask[], marked: string): string[] {
  const status = new Map<string, TaskStatus>(tasks.map((t) => [t.taskId, t.status]));
  status.set(marked, "succeeded");
  const dependents = new Map<string, MarkTask[]>();
  for (const t of tasks) for (const n of t.needs) dependents.set(n, [...(dependents.get(n) ?? []), t]);
  const back = new Set<string>();
  const work = [marked];
  for (let next = work.pop(); next !== undefined; next = work.pop()) {
    for (const d of dependents.get(next) ?? []) {
      if (back.has(d.taskId) || !skippedByScheduler(d)) continue;
      if (d.needs.some((n) => SKIPPING_TASK_STATUSES.has(status.get(n) ?? "blocked"))) continue;
      back.add(d.taskId);
      status.set(d.taskId, "blocked");
      work.push(d.taskId);
    }
  }
  return tasks.filter((t) => back.has(t.taskId)).map((t) => t.taskId);
}

function skippedByScheduler(t: MarkTask): boolean {
  return t.status === "skipped" && t.error === null && !t.gateOpened;
}

const hhmm = (at: number): string => new Date(at).toISOString().slice(11, 16);

const MARK_PREFIX = "marked ";

/**
 * The task's words once marked (kept as its `error`, as the reaper's words of a lost node are, so
 * every face shows them): `marked succeeded by @alice (chat 19:20 UTC): flaky network`.
 */
export function markWords(input: MarkInput, at: number): string {
  const why = input.reason === null ? "" : `: ${input.reason}`;
  return `${MARK_PREFIX}${input.to} by ${input.by} (${input.face} ${hhmm(at)} UTC)${why}`;
}

/** Whether a task's words are a mark's (markWords), so faces show them as its decision, not a failure. */
export function isMarkWords(status: TaskStatus, error: string | null): boolean {
  return (
    error !== null &&
    (status === "succeeded" || status === "skipped") &&
    (error.startsWith(`${MARK_PREFIX}succeeded by `) || error.startsWith(`${MARK_PREFIX}skipped by `))
  );
}

/**
 * What a handled mark keeps on its command's inbox row, so its answer is rebuilt the same after a
 * restart: the verdict's kind, where, who and why, and the status it found or left.
 */
export type MarkRecord = {
  kind: MarkVerdict["kind"];
  runId: string;
  dagId: string;
  taskId: string;
  to: MarkTarget;
  by: string;
  reason: string | null;
  /** The task's status before the mark (marked), or the one that refused it. */
  status: TaskStatus;
  /** The run's status when it was refused for it. */
  runStatus?: RunStatus;
  /** The dependents it let go on (skipped → blocked). */
  revived: string[];
};

export function markRecord(
  verdict: MarkVerdict,
  input: MarkInput,
  run: { runId: string; dagId: string },
  taskId: string,
  found: TaskStatus,
): MarkRecord {
  return {
    kind: verdict.kind,
    runId: run.runId,
    dagId: run.dagId,
    taskId,
    to: input.to,
    by: input.by,
    reason: input.reason,
    status: verdict.kind === "marked" ? verdict.from : found,
    ...(verdict.kind === "run-not-running" ? { runStatus: verdict.runStatus } : {}),
    revived: verdict.kind === "marked" ? verdict.revive : [],
  };
}
