// An operator's mark (src/domain/task-mark.ts, docs/architecture.md §3 "Mark"): which tasks may be
// marked, and which skipped dependents a mark lets go on, checked against the scheduler's own rule.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { TaskStatus } from "../../src/domain/model.js";
import { TASK_STATUSES } from "../../src/domain/model.js";
import { decideSchedule } from "../../src/domain/scheduling.js";
import type { MarkTask } from "../../src/domain/task-mark.js";
import { decideMark, isMarkWords, markWords } from "../../src/domain/task-mark.js";

const task = (
  taskId: string,
  status: TaskStatus,
  needs: string[] = [],
  error: string | null = null,
): MarkTask => ({
  taskId,
  status,
  needs,
  error,
  gateOpened: false,
});

describe("decideMark", () => {
  it("marks a task that waits or ended badly, to succeeded or skipped, and nothing else", () => {
    const markable: TaskStatus[] = ["blocked", "queued", "failed", "timed_out"];
    for (const status of TASK_STATUSES)
      for (const to of ["succeeded", "skipped"] as const) {
        const verdict = decideMark("running", [task("a", status)], "a", to);
        if (markable.includes(status))
          expect(verdict).toEqual({ kind: "marked", from: status, to, revive: [] });
        else if (status === "running" || status === "canceling")
          expect(verdict).toEqual({ kind: "running", status });
        else expect(verdict).toEqual({ kind: "wrong-status", status });
      }
  });

  it("refuses every task of a run that is not running", () => {
    for (const runStatus of [
      "pending",
      "succeeded",
      "failed",
      "canceling",
      "canceled",
      "rejected",
      "expired",
    ] as const)
      expect(decideMark(runStatus, [task("a", "failed")], "a", "succeeded")).toEqual({
        kind: "run-not-running",
        runStatus,
      });
  });

  it("answers null for a task the run does not have", () => {
    expect(decideMark("running", [task("a", "failed")], "b", "succeeded")).toBeNull();
  });

  it("lets go on the dependents skipped behind a failed task marked succeeded, and only those", () => {
    const tasks = [
      task("build", "failed", [], "exit 1"),
      task("other", "failed", [], "exit 2"),
      task("test", "skipped", ["build"]),
      task("deploy", "skipped", ["test"]),
      // Held by another failure: stays skipped.
      task("both", "skipped", ["build", "other"]),
      // Skipped by its own mark: its own end.
      task("docs", "skipped", ["build"], "marked skipped by @bob (chat 10:00 UTC)"),
      task("after-docs", "skipped", ["docs"]),
    ];
    expect(decideMark("running", tasks, "build", "succeeded")).toEqual({
      kind: "marked",
      from: "failed",
      to: "succeeded",
      revive: ["test", "deploy"],
    });
    // Marked skipped, it skips its dependents as any skipped need does: nothing comes back.
    expect(decideMark("running", tasks, "build", "skipped")).toMatchObject({ revive: [] });
  });

  it("never revives a gate that timed out and skipped itself", () => {
    const tasks = [task("a", "timed_out"), { ...task("g", "skipped", ["a"]), gateOpened: true }];
    expect(decideMark("running", tasks, "a", "succeeded")).toMatchObject({ revive: [] });
  });

  it("revives exactly the tasks the scheduler would not skip again (property)", () => {
    // A random run in a chain-free order: task i needs some of tasks 0..i-1; each ended badly or skipped.
    const arb = fc
      .array(
        fc.record({
          bad: fc.constantFrom<TaskStatus>("failed", "timed_out", "succeeded"),
          needs: fc.array(fc.nat(), { maxLength: 3 }),
        }),
        { minLength: 1, maxLength: 9 },
      )
      .map((rows) =>
        rows.map((r, i) => ({
          taskId: `t${i}`,
          needs: i === 0 ? [] : [...new Set(r.needs.map((n) => `t${n % i}`))],
          bad: r.bad,
        })),
      );
    fc.assert(
      fc.property(arb, fc.nat(), (rows, pick) => {
        // Roots keep their end; a task with a bad need is skipped, as the scheduler leaves it.
        const status = new Map<string, TaskStatus>();
        for (const r of rows) {
          const needsBad = r.needs.some((n) => status.get(n) !== "succeeded");
          status.set(r.taskId, r.needs.length > 0 && needsBad ? "skipped" : r.bad);
        }
        const tasks = rows.map((r) => task(r.taskId, status.get(r.taskId)!, r.needs));
        const failed = tasks.filter((t) => t.status === "failed" || t.status === "timed_out");
        if (failed.length === 0) return;
        const marked = failed[pick % failed.length]!;
        const verdict = decideMark("running", tasks, marked.taskId, "succeeded");
        expect(verdict?.kind).toBe("marked");
        const revive = new Set(verdict?.kind === "marked" ? verdict.revive : []);
        // After the mark and the revivals, one scheduler step skips none of the revived tasks again,
        // and leaves skipped none whose needs it would queue.
        const after = tasks.map((t) => ({
          runId: "r",
          taskId: t.taskId,
          status: (t.taskId === marked.taskId
            ? "succeeded"
            : revive.has(t.taskId)
              ? "blocked"
              : t.status) as TaskStatus,
          needs: t.needs,
          priority: 0,
          seq: Number(t.taskId.slice(1)),
          concurrencyKey: null,
        }));
        const decision = decideSchedule(
          { runs: [{ runId: "r", status: "running", maxParallel: null }], tasks: after },
          { globalCap: null },
        );
        expect(decision.toSkip.filter((s) => revive.has(s.taskId))).toEqual([]);
        const byId = new Map(after.map((t) => [t.taskId, t.status]));
        for (const t of after)
          if (
            t.status === "skipped" &&
            t.needs.every((n) => byId.get(n) === "succeeded" || byId.get(n) === "blocked")
          )
            expect.fail(`${t.taskId} stays skipped though no need of it is bad`);
      }),
    );
  });
});

describe("markWords", () => {
  it("names the mark, who, the face, when and why, and is told from a failure's words", () => {
    const at = Date.UTC(2026, 10, 28, 19, 20);
    const words = markWords({ to: "succeeded", by: "@alice:hs", face: "chat", reason: "flaky network" }, at);
    expect(words).toBe("marked succeeded by @alice:hs (chat 19:20 UTC): flaky network");
    expect(isMarkWords("succeeded", words)).toBe(true);
    expect(
      isMarkWords("skipped", markWords({ to: "skipped", by: "local:op", face: "cli", reason: null }, at)),
    ).toBe(true);
    expect(isMarkWords("failed", words)).toBe(false);
    expect(isMarkWords("succeeded", "exit 1")).toBe(false);
  });
});
