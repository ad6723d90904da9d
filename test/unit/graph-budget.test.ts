// The picture budget (src/domain/graph-budget.ts): whatever the DAG, what reaches the
// layout is at most PICTURE_BUDGET.maxBoxes boxes and maxEdges edges, reduced without lying about
// who waits for whom (every need stays a path in the picture), and a graph within the budget is
// drawn as built.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { TaskStatus } from "../../src/domain/model.js";
import { TASK_STATUSES } from "../../src/domain/model.js";
import type { GraphBox, GraphTaskInput, RunGraph } from "../../src/domain/run-graph.js";
import { buildRunGraph, URGENCY } from "../../src/domain/run-graph.js";
import { fitToBudget, PICTURE_BUDGET, withoutImpliedEdges } from "../../src/domain/graph-budget.js";
import { countStatuses } from "../../src/domain/run-counts.js";
import { bipartite, complete, fanOut, layered } from "../support/graph-shapes.js";

const graphOf = (tasks: GraphTaskInput[]): RunGraph =>
  buildRunGraph({ dagId: "d", runLabel: "12345678", runStatusWord: "pending", tasks });

function expectWithinBudget(graph: RunGraph): void {
  expect(graph.boxes.length).toBeLessThanOrEqual(PICTURE_BUDGET.maxBoxes);
  expect(graph.edges.length).toBeLessThanOrEqual(PICTURE_BUDGET.maxEdges);
}

/** Every task in one box, and every need a path from its box to its task's box (or inside one). */
function expectPathsKept(tasks: readonly GraphTaskInput[], graph: RunGraph): void {
  const boxOf = new Map<string, string>();
  for (const box of graph.boxes) for (const id of box.taskIds) boxOf.set(id, box.key);
  expect(boxOf.size).toBe(tasks.length);
  const out = new Map<string, string[]>();
  for (const [a, b] of graph.edges) out.set(a, [...(out.get(a) ?? []), b]);
  const reachable = (from: string, to: string): boolean => {
    const seen = new Set([from]);
    const stack = [from];
    while (stack.length > 0) {
      const at = stack.pop()!;
      if (at === to) return true;
      for (const next of out.get(at) ?? []) if (!seen.has(next) && seen.add(next)) stack.push(next);
    }
    return false;
  };
  for (const t of tasks)
    for (const n of t.needs) expect(reachable(boxOf.get(n)!, boxOf.get(t.id)!), `${n} -> ${t.id}`).toBe(true);
}

describe("withoutImpliedEdges", () => {
  it("leaves out an edge a longer path implies and keeps the rest", () => {
    // 0 → 1 → 2, 0 → 2 (implied), 0 → 3, 3 → 2 (its own path).
    expect(withoutImpliedEdges([[1, 2, 3], [2], [], [2]])).toEqual([[1, 3], [2], [], [2]]);
  });

  it("keeps every edge of a graph without implied ones", () => {
    expect(withoutImpliedEdges([[2, 3], [2, 3], [], []])).toEqual([[2, 3], [2, 3], [], []]);
  });
});

describe("the picture budget", () => {
  it("draws a 141-task DAG with 9,870 needs within the budget, as the chain it is", () => {
    const tasks = complete(141);
    expect(tasks.reduce((n, t) => n + t.needs.length, 0)).toBe(9870);
    const graph = graphOf(tasks);
    expectWithinBudget(graph);
    expectPathsKept(tasks, graph);
    expect(graph.reduction).toBe("implied-edges");
    // Each task needs all before it: reduced, a chain, which folds into one box of 141 tasks.
    expect(graph.boxes.map((b) => b.taskIds.length)).toEqual([141]);
  });

  it("keeps running and failed tasks of a dense DAG in sight", () => {
    const tasks = complete(141).map((t, i) => ({
      ...t,
      status: (i < 60 ? "succeeded" : i === 60 ? "running" : "blocked") as TaskStatus,
    }));
    const graph = graphOf(tasks);
    expectWithinBudget(graph);
    expectPathsKept(tasks, graph);
    expect(graph.boxes.find((b) => b.key === "t:t60")?.status).toBe("running");
  });

  it("folds levels when no need is implied but there are too many", () => {
    const tasks = bipartite(70, 71);
    expect(tasks.reduce((n, t) => n + t.needs.length, 0)).toBeGreaterThan(PICTURE_BUDGET.maxEdges);
    const graph = graphOf(tasks);
    expectWithinBudget(graph);
    expectPathsKept(tasks, graph);
    expect(graph.boxes.length).toBeLessThan(10);
  });

  it("folds boxes into bands of levels as the last resort, a chain of at most `bands` boxes", () => {
    // 300 single boxes in 60 levels of 5, each needing every box of the level before.
    const box = (i: number): GraphBox => ({
      key: `t:b${i}`,
      kind: "task",
      title: `b${i}`,
      caption: "work",
      status: i === 7 ? "failed" : "succeeded",
      taskIds: [`b${i}`],
      counts: countStatuses([i === 7 ? "failed" : "succeeded"]),
    });
    const boxes = Array.from({ length: 300 }, (_, i) => box(i));
    const edges: [string, string][] = [];
    for (let i = 5; i < 300; i++) {
      const level = Math.floor(i / 5);
      for (let j = (level - 1) * 5; j < level * 5; j++) edges.push([`t:b${j}`, `t:b${i}`]);
    }
    const graph = fitToBudget(
      { title: "d", counts: "", legend: [...TASK_STATUSES], boxes, edges, grouped: false },
      PICTURE_BUDGET,
      URGENCY,
    );
    expect(graph.reduction).toBe("bands");
    expect(graph.boxes.length).toBe(PICTURE_BUDGET.bands);
    expect(graph.edges.length).toBe(PICTURE_BUDGET.bands - 1);
    expect(graph.boxes.flatMap((b) => b.taskIds).length).toBe(300);
    // The band holding the failure shows it as its colour.
    expect(graph.boxes.find((b) => b.taskIds.includes("b7"))?.status).toBe("failed");
  });

  it("leaves a graph within the budget as built", () => {
    for (const tasks of [fanOut(40, ["succeeded", "failed"]), layered(1000, 50)]) {
      const graph = graphOf(tasks);
      expect(graph.reduction).toBeUndefined();
      expect(fitToBudget(graph, PICTURE_BUDGET, URGENCY)).toBe(graph);
    }
  });

  it("holds for any DAG and state mix, however dense", () => {
    const arbitraryDag = fc
      .record({
        size: fc.integer({ min: 1, max: 600 }),
        density: fc.double({ min: 0, max: 1, noNaN: true }),
        seed: fc.integer({ min: 1, max: 1_000_000 }),
        statuses: fc.array(fc.constantFrom(...TASK_STATUSES), { minLength: 1, maxLength: 9 }),
      })
      .map(({ size, density, seed, statuses }) => {
        let s = seed;
        const random = (): number => (s = (s * 1103515245 + 12345) % 2147483648) / 2147483648;
        return Array.from({ length: size }, (_, i): GraphTaskInput => {
          // Needs point backwards (a DAG), up to 30 of them, mostly near.
          const needs = new Set<string>();
          const wanted = Math.floor(random() * density * Math.min(i, 30));
          for (let k = 0; k < wanted; k++)
            needs.add(`t${Math.max(0, i - 1 - Math.floor(random() * Math.min(i, 60)))}`);
          return { id: `t${i}`, action: "a", needs: [...needs], status: statuses[i % statuses.length]! };
        });
      });
    fc.assert(
      fc.property(arbitraryDag, (tasks) => {
        const graph = graphOf(tasks);
        expectWithinBudget(graph);
        expectPathsKept(tasks, graph);
      }),
      { numRuns: 60 },
    );
  });
});
