// Property tests of the graph checks and the plan: a random DAG is either rejected with a cycle or
// unknown-need message that is true of the graph, or its plan respects every dependency.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { formatIssue, parseDag } from "../../src/domain/dag.js";
import { planLevels } from "../../src/domain/plan.js";

interface RandomTask {
  id: string;
  needs: string[];
}

/** Tasks t0..tn-1 whose needs are mostly earlier tasks, sometimes any task, itself, or an unknown one. */
const anyGraph = fc.integer({ min: 1, max: 25 }).chain((n) => {
  const pool = [...Array.from({ length: n }, (_, i) => `t${i}`), "ghost", "missing"];
  return fc.tuple(
    ...Array.from({ length: n }, (_, i) => {
      const earlier = pool.slice(0, i);
      const need =
        earlier.length === 0
          ? fc.constantFrom(...pool)
          : fc.oneof(
              { arbitrary: fc.constantFrom(...earlier), weight: 12 },
              { arbitrary: fc.constantFrom(...pool), weight: 1 },
            );
      return fc.uniqueArray(need, { maxLength: 4 }).map((needs): RandomTask => ({ id: `t${i}`, needs }));
    }),
  );
});

/** Acyclic by construction (needs point to earlier tasks), then shuffled into any document order. */
const acyclicGraph = fc
  .integer({ min: 1, max: 40 })
  .chain((n) =>
    fc
      .tuple(
        ...Array.from({ length: n }, (_, i) =>
          fc
            .uniqueArray(fc.nat({ max: Math.max(0, i - 1) }), { maxLength: i === 0 ? 0 : 5 })
            .map((needs): RandomTask => ({ id: `t${i}`, needs: needs.map((j) => `t${j}`) })),
        ),
      )
      .chain((tasks) => fc.shuffledSubarray(tasks, { minLength: tasks.length, maxLength: tasks.length })),
  );

function toJson(tasks: RandomTask[]): string {
  return JSON.stringify({ id: "g", tasks: tasks.map((t) => ({ id: t.id, action: "echo", needs: t.needs })) });
}

/** An independent reference: does following needs from some task lead back to it? */
function hasCycle(tasks: RandomTask[]): boolean {
  const needs = new Map(tasks.map((t) => [t.id, t.needs]));
  const state = new Map<string, "open" | "done">();
  const visit = (id: string): boolean => {
    if (state.get(id) === "open") return true;
    if (state.get(id) === "done" || !needs.has(id)) return false;
    state.set(id, "open");
    const found = (needs.get(id) ?? []).some(visit);
    state.set(id, "done");
    return found;
  };
  return tasks.some((t) => visit(t.id));
}

function expectPlanRespectsNeeds(tasks: RandomTask[], levels: string[][]): void {
  const levelOf = new Map<string, number>();
  levels.forEach((ids, level) => ids.forEach((id) => levelOf.set(id, level)));
  expect(levels.flat().sort()).toEqual(tasks.map((t) => t.id).sort());
  for (const ids of levels) expect(ids.length).toBeGreaterThan(0);
  for (const task of tasks) {
    const level = levelOf.get(task.id)!;
    for (const need of task.needs) expect(level).toBeGreaterThan(levelOf.get(need)!);
    // Tight: a task sits right above its deepest need, so the plan is as short as it can be.
    const deepest = Math.max(-1, ...task.needs.map((need) => levelOf.get(need)!));
    expect(level).toBe(deepest + 1);
  }
  // Document order within a level.
  const order = new Map(tasks.map((t, i) => [t.id, i]));
  for (const ids of levels) {
    const positions = ids.map((id) => order.get(id)!);
    expect(positions).toEqual([...positions].sort((a, b) => a - b));
  }
}

describe("graph checks and plan, on random DAGs", () => {
  it("rejects exactly the graphs with a cycle or an unknown need, and plans the rest", () => {
    fc.assert(
      fc.property(anyGraph, (tasks) => {
        const ids = new Set(tasks.map((t) => t.id));
        const unknown = tasks.some((t) => t.needs.some((need) => !ids.has(need)));
        const cyclic = hasCycle(tasks);
        const result = parseDag(toJson(tasks), "json");
        expect(result.ok, result.ok ? "" : result.issues.map(formatIssue).join("\n")).toBe(
          !unknown && !cyclic,
        );
        if (result.ok) {
          expectPlanRespectsNeeds(tasks, planLevels(result.dag));
          return;
        }
        const needsOf = new Map(tasks.map((t) => [t.id, t.needs]));
        for (const issue of result.issues) {
          expect(issue.message).toMatch(/^(dependency cycle: |unknown task "|task "[^"]+" needs itself$)/);
          const cycle = /^dependency cycle: (.*)$/.exec(issue.message);
          if (cycle) {
            // The printed path is a real cycle: each task needs the next, and it ends where it began.
            const path = cycle[1]!.split(" -> ");
            expect(path[0]).toBe(path[path.length - 1]);
            expect(new Set(path).size).toBe(path.length - 1);
            for (let k = 0; k + 1 < path.length; k++) expect(needsOf.get(path[k]!)).toContain(path[k + 1]);
            expect(issue.path).toMatch(/^tasks\[\d+\]\.needs\[\d+\]$/);
          }
        }
        if (cyclic) {
          expect(result.issues.some((i) => /^dependency cycle|needs itself$/.test(i.message))).toBe(true);
        }
        if (unknown) expect(result.issues.some((i) => i.message.startsWith("unknown task"))).toBe(true);
      }),
      { numRuns: 500 },
    );
  });

  it("accepts every acyclic graph in any document order, with a plan that respects every need", () => {
    fc.assert(
      fc.property(acyclicGraph, (tasks) => {
        const result = parseDag(toJson(tasks), "json");
        if (!result.ok) throw new Error(result.issues.map(formatIssue).join("\n"));
        expectPlanRespectsNeeds(tasks, planLevels(result.dag));
      }),
      { numRuns: 300 },
    );
  });

  it("handles a chain of 1,000 tasks, with a cycle closed at its end, without exhausting the stack", () => {
    const chain = Array.from({ length: 1000 }, (_, i) => ({
      id: `t${i}`,
      needs: i === 0 ? [] : [`t${i - 1}`],
    }));
    const result = parseDag(toJson(chain), "json");
    expect(result.ok && planLevels(result.dag).length).toBe(1000);
    chain[0]!.needs = ["t999"];
    const cyclic = parseDag(toJson(chain), "json");
    expect(cyclic.ok).toBe(false);
    if (!cyclic.ok) {
      expect(cyclic.issues).toHaveLength(1);
      expect(cyclic.issues[0]!.path).toBe("tasks[0].needs[0]");
      expect(cyclic.issues[0]!.message).toMatch(/^dependency cycle: t0 -> t999 -> t998 -> .* -> t1 -> t0$/);
    }
  });
});
