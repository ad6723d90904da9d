/**
 * What a picture of a run shows: one box per task, or, for large DAGs, one box per group of tasks
 * whose detail would only be noise. Pure: the graph renderer adapter draws it.
 *
 * Grouping, in this order, never hiding a task that needs eyes (running, canceling, failed,
 * timed out) unless a group already shows more than EYES_PER_GROUP of them:
 * 0. a matrix task's instances (matrix.ts) become one box, `deploy × 6`, however few they are;
 * 1. wide fan-outs: more than FAN_LIMIT tasks with the same needs and the same dependents
 *    become one box;
 * 2. long chains: CHAIN_MIN or more tasks in a row, each the only dependent of the one before and
 *    the only need of the one after, become one box;
 * 3. if more than MAX_BOXES boxes remain, or more edges than the picture budget allows
 *    (graph-budget.ts) even without the edges a longer path implies, the remaining single tasks of
 *    each plan level become one box per level.
 * What is still over the picture budget after that is reduced by graph-budget.ts (implied edges
 * left out, then bands of levels), so no DAG costs more than the budget to draw.
 * A quotient of a DAG by these groups stays acyclic: a matrix task's instances and fan-out members
 * share needs and dependents,
 * a chain has one way in and one way out, and a level's tasks have no edges among themselves.
 */
import type { TaskSpec, TaskStatus } from "./model.js";
import { TASK_STATUSES } from "./model.js";
import { countStatuses, outcomeCounts } from "./run-counts.js";
export type { GraphBox, GraphReduction, RunGraph } from "./run-graph-shapes.js";
import type { GraphBox, GraphReduction, RunGraph } from "./run-graph-shapes.js";
import { fitToBudget, overBudget, PICTURE_BUDGET, withoutImpliedEdges } from "./graph-budget.js";
import { parseInstanceId } from "./matrix.js";

export const FAN_LIMIT = 8;
export const CHAIN_MIN = 4;
export const MAX_BOXES = 150;
export const EYES_PER_GROUP = 5;

/** Statuses a person should see one by one. */
export const EYES_STATUSES: ReadonlySet<TaskStatus> = new Set<TaskStatus>([
  "running",
  "canceling",
  "failed",
  "timed_out",
]);

export interface GraphTaskInput {
  id: string;
  action: string;
  needs: readonly string[];
  status: TaskStatus;
  /** Why it waits, other than for its needs (the edges show those): domain/wait-reasons.ts. */
  wait?: string;
  /** An approval gate (gates.ts): drawn in a shape of its own. */
  gate?: true;
  /** A fan-out not expanded yet (fan-out.ts): the list output it fans out over, named in its caption. */
  forEach?: string;
  /** Its run condition (run-when.ts) when not the default: the box and the edges into it say it. */
  when?: TaskSpec["when"];
}

export interface RunGraphInput {
  dagId: string;
  /** Short run id for the title; null for a DAG file that has not run. */
  runLabel: string | null;
  /** The run's status word ("failed", "running"); null for a DAG file. */
  runStatusWord: string | null;
  /** What started the run when another run did ("after build.3 succeeded", after.ts triggerWords). */
  startedBy?: string;
  tasks: readonly GraphTaskInput[];
  /** One line on why the run's tasks wait (wait-reasons.ts waitsLine); absent or "" when none do. */
  waits?: string;
}

/** Which member status a group shows as its own when a single colour is needed. */
export const URGENCY: readonly TaskStatus[] = [
  "failed",
  "timed_out",
  "running",
  "canceling",
  "canceled",
  "queued",
  "skipped",
  "blocked",
  "succeeded",
];

export function buildRunGraph(input: RunGraphInput): RunGraph {
  const tasks = input.tasks;
  const index = new Map(tasks.map((t, i) => [t.id, i]));
  const given = tasks.map((t) =>
    t.needs.map((n) => index.get(n)).filter((n): n is number => n !== undefined),
  );
  // Too many needs to draw: leave out those a longer path implies, before grouping (graph-budget.ts),
  // so a dense DAG groups as the chains and fan-outs it really is.
  const dense = given.reduce((sum, ns) => sum + ns.length, 0) > PICTURE_BUDGET.maxEdges;
  const needs = dense ? withoutImpliedNeeds(given) : given;
  const thinned = dense && needs.some((ns, i) => ns.length < given[i]!.length);
  const dependents: number[][] = tasks.map(() => []);
  needs.forEach((ns, i) => ns.forEach((n) => dependents[n]!.push(i)));
  const eyes = tasks.map((t) => EYES_STATUSES.has(t.status));

  // group[i] = group number of task i, or -1 for a box of its own.
  const group = new Array<number>(tasks.length).fill(-1);
  let groups = 0;
  const assign = (members: number[]): void => {
    for (const m of members) group[m] = groups;
    groups += 1;
  };

  // 0. A matrix task's instances: one box named after the task, as every other face groups them.
  const matrixOf = new Map<number, { task: string; instances: number }>();
  const instances = new Map<string, number[]>();
  tasks.forEach((t, i) => {
    const task = parseInstanceId(t.id)?.task;
    if (task === undefined) return;
    const members = instances.get(task);
    if (members === undefined) instances.set(task, [i]);
    else members.push(i);
  });
  for (const [task, members] of instances) {
    const folded = foldable(members, tasks);
    if (folded.length < 2) continue;
    matrixOf.set(groups, { task, instances: members.length });
    assign(folded);
  }

  // 1. Wide fan-outs: same needs, same dependents.
  const classes = new Map<string, number[]>();
  tasks.forEach((_, i) => {
    const key = `${[...needs[i]!].sort((a, b) => a - b).join(",")}|${[...dependents[i]!].sort((a, b) => a - b).join(",")}`;
    const members = classes.get(key);
    if (members === undefined) classes.set(key, [i]);
    else members.push(i);
  });
  for (const members of classes.values()) {
    // A matrix task's instances are in a box already.
    const free = members.filter((m) => group[m] === -1);
    if (free.length <= FAN_LIMIT) continue;
    const folded = foldable(free, tasks);
    if (folded.length >= 2) assign(folded);
  }

  // 2. Long chains of single tasks.
  const linkable = (i: number): boolean => group[i] === -1 && !eyes[i];
  const inChain = new Array<boolean>(tasks.length).fill(false);
  for (let i = 0; i < tasks.length; i++) {
    if (inChain[i] || !linkable(i)) continue;
    // Start only where the chain cannot be extended backwards.
    const prev = needs[i]!.length === 1 ? needs[i]![0]! : -1;
    if (prev !== -1 && linkable(prev) && dependents[prev]!.length === 1) continue;
    const chain = [i];
    let at = i;
    while (dependents[at]!.length === 1) {
      const next = dependents[at]![0]!;
      if (!linkable(next) || needs[next]!.length !== 1) break;
      chain.push(next);
      at = next;
    }
    for (const c of chain) inChain[c] = true;
    if (chain.length >= CHAIN_MIN) assign(chain);
  }

  // 3. Too many boxes (or edges) still: fold the single tasks of each level.
  const boxCount = (): number => groups + group.filter((g) => g === -1).length;
  const foldLevels = (): void => {
    const levels = levelsOf(needs);
    const byLevel = new Map<number, number[]>();
    tasks.forEach((_, i) => {
      if (group[i] !== -1) return;
      const members = byLevel.get(levels[i]!);
      if (members === undefined) byLevel.set(levels[i]!, [i]);
      else members.push(i);
    });
    for (const members of byLevel.values()) {
      if (members.length < 2) continue;
      const folded = foldable(members, tasks);
      if (folded.length >= 2) assign(folded);
    }
  };
  const folded = boxCount() > MAX_BOXES;
  if (folded) foldLevels();
  let graph = assemble(input, needs, group, groups, matrixOf, thinned ? "implied-edges" : null);
  if (!folded && overBudget(graph, PICTURE_BUDGET)) {
    // Leaving implied edges out keeps every task in sight; fold levels only when that is not enough.
    const reduced = fitToBudget(graph, PICTURE_BUDGET, URGENCY);
    if (reduced.reduction === "implied-edges") return reduced;
    foldLevels();
    graph = assemble(input, needs, group, groups, matrixOf, graph.reduction ?? null);
  }
  return fitToBudget(graph, PICTURE_BUDGET, URGENCY);
}

/** Each task's needs without those another of its needs already waits for (graph-budget.ts). */
function withoutImpliedNeeds(needs: readonly number[][]): number[][] {
  const dependents: number[][] = needs.map(() => []);
  needs.forEach((ns, i) => ns.forEach((n) => dependents[n]!.push(i)));
  const kept = withoutImpliedEdges(dependents);
  const keep = new Set(kept.flatMap((out, n) => out.map((i) => n * needs.length + i)));
  return needs.map((ns, i) => ns.filter((n) => keep.has(n * needs.length + i)));
}

/**
 * The members that go into a group: all but EYES_PER_GROUP tasks that need eyes, failures before
 * running ones (a failure folded behind a running task would hide what went wrong).
 */
function foldable(members: readonly number[], tasks: readonly GraphTaskInput[]): number[] {
  const shown = new Set(
    members
      .filter((m) => EYES_STATUSES.has(tasks[m]!.status))
      .sort((a, b) => URGENCY.indexOf(tasks[a]!.status) - URGENCY.indexOf(tasks[b]!.status) || a - b)
      .slice(0, EYES_PER_GROUP),
  );
  return members.filter((m) => !shown.has(m));
}

/**
 * Longest-path depth of each task (or box) from the roots, iteratively (a 1,000-task chain is
 * fine); `needs[i]` are the indices i needs. The picture's grid layout places boxes by it too.
 */
export function levelsOf(needs: readonly number[][]): number[] {
  const level = new Array<number>(needs.length).fill(-1);
  const stack: number[] = [];
  for (let start = 0; start < needs.length; start++) {
    if (level[start] !== -1) continue;
    stack.push(start);
    while (stack.length > 0) {
      const at = stack[stack.length - 1]!;
      const pending = needs[at]!.filter((n) => level[n] === -1);
      if (pending.length > 0) {
        stack.push(...pending);
        continue;
      }
      stack.pop();
      level[at] = needs[at]!.reduce((max, n) => Math.max(max, level[n]! + 1), 0);
    }
  }
  return level;
}

function assemble(
  input: RunGraphInput,
  needs: readonly number[][],
  group: readonly number[],
  groups: number,
  matrixOf: ReadonlyMap<number, { task: string; instances: number }>,
  reduction: GraphReduction,
): RunGraph {
  const tasks = input.tasks;
  const members: number[][] = Array.from({ length: groups }, () => []);
  tasks.forEach((_, i) => {
    if (group[i] !== -1) members[group[i]!]!.push(i);
  });
  const keyOf = (i: number): string => (group[i] === -1 ? `t:${tasks[i]!.id}` : `g:${group[i]}`);

  const boxes: GraphBox[] = [];
  const placed = new Set<number>();
  tasks.forEach((task, i) => {
    if (group[i] === -1) {
      boxes.push({
        key: keyOf(i),
        kind: "task",
        title: task.id,
        caption:
          task.gate === true
            ? "approval gate"
            : task.forEach !== undefined
              ? `${task.id} × for each ${task.forEach}`
              : task.action,
        status: task.status,
        taskIds: [task.id],
        counts: countStatuses([task.status]),
        ...(task.wait === undefined ? {} : { wait: task.wait }),
        ...(task.gate === true ? { gate: true as const } : {}),
        ...(task.when === undefined ? {} : { when: task.when }),
      });
      return;
    }
    const g = group[i]!;
    if (placed.has(g)) return;
    placed.add(g);
    const ids = members[g]!.map((m) => tasks[m]!.id);
    const counts = countStatuses(members[g]!.map((m) => tasks[m]!.status));
    const first = ids[0]!;
    const last = ids[ids.length - 1]!;
    const matrix = matrixOf.get(g);
    // A matrix box is named by its task; instances that need eyes stand beside it (foldable).
    const caption =
      matrix === undefined
        ? `${ids.length} tasks`
        : ids.length === matrix.instances
          ? `${matrix.task} × ${matrix.instances}`
          : `${matrix.task} × ${matrix.instances} (${ids.length} here)`;
    boxes.push({
      key: `g:${g}`,
      kind: "group",
      title: ids.length === 2 ? `${first}, ${last}` : `${first} … ${last}`,
      caption,
      status: URGENCY.find((s) => counts[s] > 0) ?? "blocked",
      taskIds: ids,
      counts,
    });
  });

  const seen = new Set<string>();
  const edges: [string, string][] = [];
  needs.forEach((ns, i) => {
    for (const n of ns) {
      const from = keyOf(n);
      const to = keyOf(i);
      const key = `${from}\u0000${to}`;
      if (from === to || seen.has(key)) continue;
      seen.add(key);
      edges.push([from, to]);
    }
  });

  const statuses = tasks.map((t) => t.status);
  const present = countStatuses(statuses);
  const head = [input.dagId];
  if (input.runLabel !== null) head.push(`run ${input.runLabel}`);
  if (input.runStatusWord !== null) head.push(input.runStatusWord);
  if (input.startedBy !== undefined && input.startedBy !== "") head.push(input.startedBy);
  return {
    title: head.join(" · "),
    counts: input.runStatusWord === null ? `${tasks.length} tasks, not run` : outcomeCounts(statuses),
    legend: TASK_STATUSES.filter((s) => present[s] > 0),
    boxes,
    edges,
    grouped: groups > 0,
    ...(reduction === null ? {} : { reduction }),
    ...(input.waits === undefined || input.waits === "" ? {} : { waits: input.waits }),
  };
}
