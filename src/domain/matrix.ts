/**
 * A task's `matrix` (docs/dag-format.md, "Matrix"): lists of values per axis, expanded when the DAG
 * is parsed into one ordinary task per combination, `deploy[region=eu,tier=web]`, whose arguments
 * say `{matrix.AXIS}` for its values. After expansion an instance is a task like any other (the store
 * and the scheduler never see a matrix); the faces group instances back by their ids, which no
 * document task id can look like (ids hold no `[`).
 */
import type { TaskStatus } from "./model.js";
import type { TaskSummary } from "./run-status.js";
import { summarizeTasks } from "./run-status.js";
import { COUNT_ORDER, TASK_STATUS_WORD } from "./run-counts.js";

export const MATRIX_LIMITS = {
  /** Instances one matrix task expands into: a run's card, picture and claims stay readable and cheap. */
  maxInstances: 256,
  maxAxes: 8,
  /** Values of one axis (each axis is also bounded by maxInstances through the product). */
  maxValues: 256,
  /** A value is part of the instance's id, so it is an id's characters and at most an id's length. */
  maxValueLength: 64,
  /** An instance id: the task id, the axes' names and values; commands and paths name it whole. */
  maxInstanceIdLength: 256,
} as const;

/** A matrix value: the characters of an id (it is part of one), never a reference, space or quote. */
export const MATRIX_VALUE = /^[A-Za-z0-9_.-]{1,64}$/;

/** `{matrix.AXIS}` in a matrix task's argument: put in when the DAG is parsed (references.ts). */
export const MATRIX_REFERENCE = /\{matrix\.([A-Za-z_][A-Za-z0-9_]*)\}/g;

const AXIS = "[A-Za-z_][A-Za-z0-9_]{0,63}";
const VALUE = "[A-Za-z0-9_.-]{1,64}";
const PAIR = `${AXIS}=${VALUE}`;
const INSTANCE_ID = new RegExp(`^([A-Za-z0-9_.-]{1,64})\\[(${PAIR}(?:,${PAIR})*)\\]$`);

/** Axis name → its values, in the order the document wrote them. */
export type Matrix = Readonly<Record<string, readonly string[]>>;

/** One combination: [axis, value] pairs in axis order. */
export type Combination = ReadonlyArray<readonly [string, string]>;

/** How many instances a matrix expands into: the product of its axes' lengths (0 for an empty axis). */
export function instanceCount(matrix: Matrix): number {
  return Object.values(matrix).reduce((n, values) => n * values.length, 1);
}

/**
 * Every combination, the first axis varying slowest: `{region = [eu, us], tier = [web, db]}` gives
 * eu/web, eu/db, us/web, us/db, the order the document reads in.
 */
export function combinations(matrix: Matrix): Combination[] {
  let out: Array<Array<readonly [string, string]>> = [[]];
  for (const [axis, values] of Object.entries(matrix)) {
    out = out.flatMap((prefix) => values.map((v) => [...prefix, [axis, v] as const]));
  }
  return out;
}

/** `deploy[region=eu,tier=web]`. */
export function instanceId(taskId: string, combination: Combination): string {
  return `${taskId}[${combination.map(([axis, value]) => `${axis}=${value}`).join(",")}]`;
}

/** The task and values an instance id names, or null for an id that is not an instance's. */
export function parseInstanceId(id: string): { task: string; values: Array<[string, string]> } | null {
  if (id.length > MATRIX_LIMITS.maxInstanceIdLength) return null;
  const m = INSTANCE_ID.exec(id);
  if (m === null) return null;
  const values = (m[2] ?? "").split(",").map((pair): [string, string] => {
    const eq = pair.indexOf("=");
    return [pair.slice(0, eq), pair.slice(eq + 1)];
  });
  return { task: m[1] ?? "", values };
}

/** The group a task belongs to on every face: its matrix task's id, or its own. */
export function groupOf(taskId: string): string {
  return parseInstanceId(taskId)?.task ?? taskId;
}

/** The parameter-free text of a matrix task's argument with its combination put in (one pass). */
export function putMatrixValues(value: string, combination: Combination): string {
  const values = new Map(combination);
  return value.replace(MATRIX_REFERENCE, (whole, axis: string) => values.get(axis) ?? whole);
}

/** The axis names a string refers to as `{matrix.AXIS}`. */
export function matrixReferences(text: string): string[] {
  return [...text.matchAll(MATRIX_REFERENCE)].map((m) => m[1] ?? "");
}

/**
 * For each task of a parsed DAG, the index of the document task it came from: instances of one
 * matrix task sit together, in the document's order, so an issue found on an instance is placed
 * at `tasks[N]` of the document the author wrote.
 */
export function documentIndexes(taskIds: readonly string[]): number[] {
  let index = -1;
  let previous: string | null = null;
  return taskIds.map((id) => {
    const group = parseInstanceId(id)?.task ?? null;
    if (group === null || group !== previous) index++;
    previous = group;
    return index;
  });
}

/** One matrix task on a face: its instances, and their counts as a run's (run-status.ts). */
export interface MatrixGroup {
  task: string;
  instances: string[];
  summary: TaskSummary;
}

/**
 * The matrix tasks among a run's tasks, in the order their first instance comes; a run without a
 * matrix has none, and its faces look exactly as before.
 */
export function matrixGroups(tasks: ReadonlyArray<{ taskId: string; status: TaskStatus }>): MatrixGroup[] {
  const groups = new Map<string, { instances: string[]; statuses: TaskStatus[] }>();
  for (const t of tasks) {
    const parsed = parseInstanceId(t.taskId);
    if (parsed === null) continue;
    let group = groups.get(parsed.task);
    if (group === undefined) groups.set(parsed.task, (group = { instances: [], statuses: [] }));
    group.instances.push(t.taskId);
    group.statuses.push(t.status);
  }
  return [...groups].map(([task, g]) => ({
    task,
    instances: g.instances,
    summary: summarizeTasks(g.statuses),
  }));
}

/** The order a group's counts are said in: what ended well, what needs eyes, what is yet to happen. */
const GROUP_COUNT_ORDER: readonly TaskStatus[] = ["succeeded", ...COUNT_ORDER];

/** A group's non-zero counts in the order every face says them: `[["succeeded", 4], ["failed", 1]]`. */
export function groupCounts(byStatus: Readonly<Record<TaskStatus, number>>): Array<[TaskStatus, number]> {
  return GROUP_COUNT_ORDER.filter((s) => (byStatus[s] ?? 0) > 0).map((s) => [s, byStatus[s]]);
}

/** A group in plain words, for the CLI: `deploy × 6: 4 succeeded, 1 failed, 1 running`. */
export function groupWords(group: { task: string; summary: TaskSummary }): string {
  const counts = groupCounts(group.summary.byStatus).map(([s, n]) => `${n} ${TASK_STATUS_WORD[s]}`);
  return `${group.task} × ${group.summary.total}: ${counts.join(", ")}`;
}
