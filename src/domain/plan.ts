/** The plan of a DAG: its tasks in topological levels, the order a run can at best proceed in. */
import type { ParsedDag } from "./model.js";

/**
 * Level 0 holds the tasks with no needs; every other task sits one level above the deepest task
 * it needs. Within a level, tasks keep the document's order, so the plan is deterministic.
 * Expects a DAG from parseDag; throws if given a graph with a cycle or an unknown need.
 */
export function planLevels(dag: ParsedDag): string[][] {
  const indexOf = new Map(dag.tasks.map((task, i) => [task.id, i]));
  const level = new Array<number>(dag.tasks.length).fill(-1);
  const waiting = dag.tasks.map((task) => task.needs.length);
  const neededBy: number[][] = dag.tasks.map(() => []);
  dag.tasks.forEach((task, i) => {
    for (const need of task.needs) {
      const j = indexOf.get(need);
      if (j === undefined) throw new Error(`planLevels: task "${task.id}" needs unknown task "${need}"`);
      neededBy[j]!.push(i);
    }
  });
  // Kahn's algorithm: a task's level is final once every task it needs has one.
  const ready = dag.tasks.flatMap((task, i) => (task.needs.length === 0 ? [i] : []));
  for (const i of ready) level[i] = 0;
  for (let head = 0; head < ready.length; head++) {
    const i = ready[head]!;
    for (const k of neededBy[i]!) {
      level[k] = Math.max(level[k]!, level[i]! + 1);
      if (--waiting[k]! === 0) ready.push(k);
    }
  }
  if (ready.length !== dag.tasks.length) throw new Error("planLevels: the DAG has a cycle");
  const levels: string[][] = [];
  dag.tasks.forEach((task, i) => {
    const l = level[i]!;
    while (levels.length <= l) levels.push([]);
    levels[l]!.push(task.id);
  });
  return levels;
}
