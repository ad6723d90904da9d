/** DAG shapes with task states for the renderer's tests and bench: chains, fan-outs, layered graphs. */
import type { TaskStatus } from "../../src/domain/model.js";
import type { GraphTaskInput } from "../../src/domain/run-graph.js";

/** prepare → n shards → merge → publish; shard states cycle through `states`. */
export function fanOut(n: number, states: readonly TaskStatus[] = ["succeeded"]): GraphTaskInput[] {
  const tasks: GraphTaskInput[] = [{ id: "prepare", action: "fetch", needs: [], status: "succeeded" }];
  for (let i = 0; i < n; i++) {
    tasks.push({
      id: `shard_${String(i).padStart(4, "0")}`,
      action: "process",
      needs: ["prepare"],
      status: states[i % states.length]!,
    });
  }
  tasks.push({ id: "merge", action: "merge", needs: tasks.slice(1).map((t) => t.id), status: "blocked" });
  tasks.push({ id: "publish", action: "upload", needs: ["merge"], status: "blocked" });
  return tasks;
}

/** step_0 → step_1 → …; the first half succeeded, then one failure, then skipped. */
export function chain(n: number): GraphTaskInput[] {
  const half = Math.floor(n / 2);
  return Array.from({ length: n }, (_, i) => ({
    id: `step_${i}`,
    action: "echo",
    needs: i === 0 ? [] : [`step_${i - 1}`],
    status: i < half ? "succeeded" : i === half ? "failed" : "skipped",
  }));
}

/**
 * `width` tasks per level, each needing two random tasks of the level before (a fixed seed): no
 * fan-out classes and no chains, the worst case for grouping. Three levels done, one running with a
 * tenth failed, the rest waiting.
 */
export function layered(n: number, width: number, seed = 1): GraphTaskInput[] {
  let s = seed;
  const random = (): number => (s = (s * 1103515245 + 12345) % 2147483648) / 2147483648;
  const tasks: GraphTaskInput[] = [];
  for (let i = 0; i < n; i++) {
    const level = Math.floor(i / width);
    const needs: string[] = [];
    if (level > 0) {
      for (let k = 0; k < 2; k++) {
        const j = (level - 1) * width + Math.floor(random() * width);
        if (!needs.includes(`t${j}`)) needs.push(`t${j}`);
      }
    }
    const status: TaskStatus =
      level < 3 ? "succeeded" : level === 3 ? (random() < 0.1 ? "failed" : "running") : "blocked";
    tasks.push({ id: `t${i}`, action: "work", needs, status });
  }
  return tasks;
}

/**
 * The densest picture a publish can ask for: `n` pending tasks, each needing every task before it (141 tasks make 9,870
 * needs, about what a 64 KiB document holds).
 */
export function complete(n: number, status: TaskStatus = "blocked"): GraphTaskInput[] {
  return Array.from({ length: n }, (_, i) => ({
    id: `t${i}`,
    action: "work",
    needs: Array.from({ length: i }, (_, j) => `t${j}`),
    status,
  }));
}

/**
 * Two levels: `roots` tasks, then `sinks` tasks each needing a different random half of the roots.
 * No need is implied by another and no two sinks share their needs: only folding helps.
 */
export function bipartite(roots: number, sinks: number, seed = 1): GraphTaskInput[] {
  let s = seed;
  const random = (): number => (s = (s * 1103515245 + 12345) % 2147483648) / 2147483648;
  const tasks: GraphTaskInput[] = Array.from({ length: roots }, (_, i) => ({
    id: `r${i}`,
    action: "work",
    needs: [],
    status: "succeeded" as TaskStatus,
  }));
  for (let i = 0; i < sinks; i++) {
    const needs = tasks
      .slice(0, roots)
      .filter(() => random() < 0.5)
      .map((t) => t.id);
    tasks.push({ id: `s${i}`, action: "work", needs, status: "blocked" });
  }
  return tasks;
}
