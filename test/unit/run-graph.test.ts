// The picture model of a run (src/domain/run-graph.ts) and its honest counts (run-counts.ts): one box
// per task for small DAGs, groups for wide fan-outs, long chains and crowded levels, never hiding a
// failure, and a quotient graph that stays a DAG.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { TaskStatus } from "../../src/domain/model.js";
import { TASK_STATUSES } from "../../src/domain/model.js";
import { outcomeCounts, succeededPercent } from "../../src/domain/run-counts.js";
import type { GraphTaskInput, RunGraph } from "../../src/domain/run-graph.js";
import { buildRunGraph, EYES_PER_GROUP, FAN_LIMIT, MAX_BOXES } from "../../src/domain/run-graph.js";
import { chain, fanOut, layered } from "../support/graph-shapes.js";

const graphOf = (tasks: GraphTaskInput[], status = "running"): RunGraph =>
  buildRunGraph({ dagId: "d", runLabel: "12345678", runStatusWord: status, tasks });

/** Every task in exactly one box; every need an edge between boxes or inside one; no cycle. */
function expectFaithful(tasks: readonly GraphTaskInput[], graph: RunGraph): void {
  const boxOf = new Map<string, string>();
  for (const box of graph.boxes) {
    for (const id of box.taskIds) {
      expect(boxOf.has(id), `${id} in two boxes`).toBe(false);
      boxOf.set(id, box.key);
    }
    const counted = TASK_STATUSES.reduce((sum, s) => sum + box.counts[s], 0);
    expect(counted).toBe(box.taskIds.length);
  }
  expect(boxOf.size).toBe(tasks.length);
  const edges = new Set(graph.edges.map(([a, b]) => `${a}>${b}`));
  for (const t of tasks) {
    for (const n of t.needs) {
      const from = boxOf.get(n)!;
      const to = boxOf.get(t.id)!;
      if (from !== to) expect(edges.has(`${from}>${to}`), `${n} -> ${t.id}`).toBe(true);
    }
  }
  // Acyclic: Kahn's algorithm consumes every box.
  const indegree = new Map(graph.boxes.map((b) => [b.key, 0]));
  for (const [, b] of graph.edges) indegree.set(b, indegree.get(b)! + 1);
  const ready = [...indegree].filter(([, d]) => d === 0).map(([k]) => k);
  let seen = 0;
  while (ready.length > 0) {
    const k = ready.pop()!;
    seen++;
    for (const [a, b] of graph.edges) {
      if (a !== k) continue;
      indegree.set(b, indegree.get(b)! - 1);
      if (indegree.get(b) === 0) ready.push(b);
    }
  }
  expect(seen).toBe(graph.boxes.length);
}

describe("buildRunGraph", () => {
  it("draws a small DAG as one box per task in its own state, with its needs as edges", () => {
    const tasks: GraphTaskInput[] = [
      { id: "a", action: "echo", needs: [], status: "succeeded" },
      { id: "b", action: "echo", needs: ["a"], status: "failed" },
      { id: "c", action: "echo", needs: ["a"], status: "running" },
      { id: "d", action: "echo", needs: ["b", "c"], status: "skipped" },
    ];
    const graph = graphOf(tasks, "failed");
    expect(graph.boxes.map((b) => [b.kind, b.title, b.status])).toEqual([
      ["task", "a", "succeeded"],
      ["task", "b", "failed"],
      ["task", "c", "running"],
      ["task", "d", "skipped"],
    ]);
    expect(graph.edges).toEqual([
      ["t:a", "t:b"],
      ["t:a", "t:c"],
      ["t:b", "t:d"],
      ["t:c", "t:d"],
    ]);
    expect(graph.title).toBe("d · run 12345678 · failed");
    expect(graph.counts).toBe("1/4 succeeded · 1 failed · 1 skipped · 1 running");
    expect(graph.legend).toEqual(["running", "succeeded", "failed", "skipped"]);
    expect(graph.grouped).toBe(false);
  });

  it("keeps a fan-out of FAN_LIMIT tasks as single boxes and groups one more", () => {
    expect(graphOf(fanOut(FAN_LIMIT)).boxes).toHaveLength(FAN_LIMIT + 3);
    const wide = graphOf(fanOut(FAN_LIMIT + 1));
    expect(wide.boxes).toHaveLength(4);
    expect(wide.boxes[1]).toMatchObject({ kind: "group", caption: `${FAN_LIMIT + 1} tasks` });
    expect(wide.grouped).toBe(true);
  });

  it("shows failures of a group on their own, failures before running tasks", () => {
    const states: TaskStatus[] = ["succeeded", "running", "succeeded", "running", "running", "failed"];
    const tasks = fanOut(60, states);
    const graph = graphOf(tasks);
    expectFaithful(tasks, graph);
    const singles = graph.boxes.filter((b) => b.kind === "task" && b.title.startsWith("shard"));
    expect(singles).toHaveLength(EYES_PER_GROUP);
    // 10 failed shards: the first five shown are all failures.
    expect(singles.map((b) => b.status)).toEqual(Array(EYES_PER_GROUP).fill("failed"));
    const group = graph.boxes.find((b) => b.kind === "group")!;
    expect(group.counts.failed).toBe(5);
    expect(group.status).toBe("failed");
  });

  it("folds a 1,000-task chain around its failure into a handful of boxes", () => {
    const tasks = chain(1000);
    const graph = graphOf(tasks);
    expectFaithful(tasks, graph);
    expect(graph.boxes.map((b) => [b.kind, b.taskIds.length, b.status])).toEqual([
      ["group", 500, "succeeded"],
      ["task", 1, "failed"],
      ["group", 499, "skipped"],
    ]);
  });

  it("keeps chains shorter than four", () => {
    expect(graphOf(chain(3)).boxes.every((b) => b.kind === "task")).toBe(true);
  });

  it("folds crowded levels when fan-outs and chains are not enough", () => {
    const tasks = layered(1000, 50);
    const graph = graphOf(tasks);
    expectFaithful(tasks, graph);
    expect(graph.boxes.length).toBeLessThanOrEqual(MAX_BOXES);
    expect(graph.boxes.filter((b) => b.kind === "task" && b.status === "failed").length).toBeGreaterThan(0);
  });

  it("is faithful for any DAG and state mix", () => {
    const arbitraryDag = fc
      .array(
        fc.record({
          needs: fc.array(fc.nat(), { maxLength: 3 }),
          status: fc.constantFrom(...TASK_STATUSES),
        }),
        { minLength: 1, maxLength: 400 },
      )
      .map((rows) =>
        rows.map((row, i): GraphTaskInput => ({
          id: `t${i}`,
          action: "a",
          // Needs only point backwards, so the input is a DAG.
          needs: i === 0 ? [] : [...new Set(row.needs.map((n) => `t${n % i}`))],
          status: row.status,
        })),
      );
    fc.assert(
      fc.property(arbitraryDag, (tasks) => {
        expectFaithful(tasks, graphOf(tasks));
      }),
      { numRuns: 150 },
    );
  });
});

describe("outcomeCounts", () => {
  it("says what happened, not how much ended", () => {
    const statuses: TaskStatus[] = ["succeeded", "succeeded", "failed", "skipped", "skipped"];
    expect(outcomeCounts(statuses)).toBe("2/5 succeeded · 1 failed · 2 skipped");
    expect(outcomeCounts(["succeeded", "succeeded"])).toBe("2/2 succeeded");
    expect(outcomeCounts(["timed_out", "canceled", "blocked", "queued"])).toBe(
      "0/4 succeeded · 1 timed out · 1 canceled · 1 queued · 1 waiting",
    );
    expect(outcomeCounts([])).toBe("0/0 succeeded");
  });

  it("adds up to the total and is full only when every task succeeded, for every mix", () => {
    fc.assert(
      fc.property(
        fc.array(fc.constantFrom(...TASK_STATUSES), { minLength: 1, maxLength: 50 }),
        (statuses) => {
          const text = outcomeCounts(statuses);
          const [head, ...rest] = text.split(" · ");
          const ok = statuses.filter((s) => s === "succeeded").length;
          expect(head).toBe(`${ok}/${statuses.length} succeeded`);
          const others = rest.reduce((sum, part) => sum + Number(part.split(" ")[0]), 0);
          expect(ok + others).toBe(statuses.length);
          expect(succeededPercent(statuses) === 100).toBe(ok === statuses.length);
        },
      ),
    );
  });
});

describe("a task with a run condition in the picture", () => {
  it("carries its condition on its box; the DOT says it on the box and draws the edges into it dotted", async () => {
    const { toDot } = await import("../../src/adapters/graph/dot.js");
    const graph = buildRunGraph({
      dagId: "d",
      runLabel: null,
      runStatusWord: "running",
      tasks: [
        { id: "build", action: "echo", needs: [], status: "failed" },
        { id: "cleanup", action: "echo", needs: ["build"], status: "queued", when: "failed" },
        { id: "next", action: "echo", needs: ["build"], status: "skipped" },
      ],
    });
    expect(graph.boxes.find((b) => b.title === "cleanup")?.when).toBe("failed");
    expect(graph.boxes.find((b) => b.title === "next")?.when).toBeUndefined();
    const dot = toDot(graph);
    expect(dot).toContain("when failed");
    expect(dot).toMatch(/"t:build" -> "t:cleanup" \[style=dotted\]/);
    expect(dot).not.toMatch(/"t:build" -> "t:next" \[[^\]]*dotted/);
  });
});
