// The run state machine against docs/architecture.md §3, and the run outcome derived from the task set.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { RUN_STATUSES, TASK_STATUSES } from "../../src/domain/model.js";
import type { RunStatus, TaskStatus } from "../../src/domain/model.js";
import type { RunActor } from "../../src/domain/run-states.js";
import {
  RUN_ACTORS,
  RUN_TRANSITIONS,
  TERMINAL_RUN_STATUSES,
  canTransitionRun,
  decisionTarget,
  decisionVerdict,
  isRunStatus,
  isTerminalRun,
  runTargets,
} from "../../src/domain/run-states.js";
import { deriveRunOutcome, summarizeTasks } from "../../src/domain/run-status.js";

const LEGAL: ReadonlyArray<readonly [RunStatus, RunStatus, RunActor]> = [
  ["pending", "running", "leader"],
  ["pending", "rejected", "leader"],
  ["pending", "expired", "reaper"],
  ["running", "succeeded", "leader"],
  ["running", "failed", "leader"],
  ["running", "canceling", "leader"],
  ["pending", "canceled", "leader"],
  ["running", "canceled", "leader"],
  ["canceling", "canceled", "leader"],
];
const legalKey = (from: string, to: string, actor: string): string => `${from}>${to}>${actor}`;
const legalSet = new Set(LEGAL.map(([f, t, a]) => legalKey(f, t, a)));

describe("run transitions", () => {
  it.each(LEGAL)("%s → %s is legal for %s", (from, to, actor) => {
    expect(canTransitionRun(from, to, actor)).toBe(true);
    expect(runTargets(from, actor)).toContain(to);
  });

  it("rejects every other (from, to, actor) combination", () => {
    let rejected = 0;
    for (const from of RUN_STATUSES) {
      for (const to of RUN_STATUSES) {
        for (const actor of RUN_ACTORS) {
          const expected = legalSet.has(legalKey(from, to, actor));
          expect(canTransitionRun(from, to, actor), legalKey(from, to, actor)).toBe(expected);
          if (!expected) rejected += 1;
        }
      }
    }
    expect(rejected).toBe(RUN_STATUSES.length ** 2 * RUN_ACTORS.length - LEGAL.length);
    for (const row of RUN_TRANSITIONS) {
      for (const actor of row.who) expect(legalSet.has(legalKey(row.from, row.to, actor))).toBe(true);
    }
  });

  it("never leaves a terminal state", () => {
    expect([...TERMINAL_RUN_STATUSES].sort()).toEqual([
      "canceled",
      "expired",
      "failed",
      "rejected",
      "succeeded",
    ]);
    for (const from of RUN_STATUSES) {
      expect(isTerminalRun(from)).toBe(TERMINAL_RUN_STATUSES.has(from));
      if (isTerminalRun(from)) expect(runTargets(from)).toEqual([]);
      else expect(runTargets(from).length).toBeGreaterThan(0);
    }
    expect(isRunStatus("pending")).toBe(true);
    expect(isRunStatus("constructor")).toBe(false);
  });
});

describe("deriveRunOutcome", () => {
  const cases: ReadonlyArray<readonly [RunStatus, TaskStatus[], RunStatus]> = [
    ["running", ["succeeded", "succeeded"], "succeeded"],
    ["running", ["succeeded", "failed"], "failed"],
    // Only a gate that timed out with on_timeout = "skip" leaves skipped tasks without a failure.
    ["running", ["succeeded", "skipped"], "succeeded"],
    ["running", ["timed_out"], "failed"],
    ["running", ["canceled", "succeeded"], "failed"],
    ["running", ["succeeded", "running"], "running"],
    ["running", ["failed", "blocked"], "running"],
    ["running", ["queued"], "running"],
    ["running", ["canceling", "succeeded"], "running"],
    ["running", [], "succeeded"],
    ["canceling", ["canceled", "succeeded", "failed"], "canceled"],
    ["canceling", ["canceled", "canceling"], "canceling"],
    ["canceling", ["canceled", "running"], "canceling"],
    ["canceling", ["canceled", "queued"], "canceling"],
    ["canceling", ["blocked"], "canceling"],
    ["canceling", ["succeeded", "succeeded"], "canceled"],
    ["pending", ["succeeded"], "pending"],
    ["pending", ["blocked", "blocked"], "pending"],
    ["succeeded", ["failed"], "succeeded"],
    ["failed", ["succeeded"], "failed"],
    ["canceled", ["running"], "canceled"],
    ["rejected", ["blocked"], "rejected"],
    ["expired", ["blocked"], "expired"],
  ];
  it.each(cases)("%s with %j → %s", (current, tasks, expected) => {
    expect(deriveRunOutcome(current, tasks)).toBe(expected);
  });

  it("only ever proposes a legal leader move, and only when every task is terminal", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...RUN_STATUSES),
        fc.array(fc.constantFrom(...TASK_STATUSES), { maxLength: 12 }),
        (current, tasks) => {
          const next = deriveRunOutcome(current, tasks);
          if (next === current) return;
          expect(canTransitionRun(current, next, "leader")).toBe(true);
          expect(summarizeTasks(tasks).done).toBe(tasks.length);
        },
      ),
    );
  });
});

describe("summarizeTasks", () => {
  it("counts every status and the done share", () => {
    const s = summarizeTasks([
      "succeeded",
      "running",
      "blocked",
      "failed",
      "queued",
      "succeeded",
      "canceling",
    ]);
    expect(s.total).toBe(7);
    expect(s.done).toBe(3);
    expect(s.active).toBe(3);
    expect(s.percent).toBe(42);
    expect(s.byStatus.succeeded).toBe(2);
    expect(s.byStatus.skipped).toBe(0);
    expect(Object.keys(s.byStatus).sort()).toEqual([...TASK_STATUSES].sort());
  });

  it("is 100 % only when everything is done", () => {
    expect(summarizeTasks([]).percent).toBe(100);
    expect(summarizeTasks(["succeeded", "skipped"]).percent).toBe(100);
    const many: TaskStatus[] = [...Array<TaskStatus>(999).fill("succeeded"), "running"];
    expect(summarizeTasks(many).percent).toBe(99);
  });
});

describe("decisionTarget: where a decision the verdict applies moves a run", () => {
  it("confirm → running, reject → rejected; cancel → canceling while a task is live, else canceled", () => {
    expect(decisionTarget("confirm", "pending", 0)).toBe("running");
    expect(decisionTarget("reject", "pending", 0)).toBe("rejected");
    expect(decisionTarget("cancel", "running", 2)).toBe("canceling");
    expect(decisionTarget("cancel", "running", 0)).toBe("canceled");
    expect(decisionTarget("cancel", "pending", 0)).toBe("canceled");
  });

  it("refuses a move the table does not allow: a pending run cannot wait for a live task", () => {
    expect(() => decisionTarget("cancel", "pending", 1)).toThrow(/pending to canceling/);
    expect(() => decisionTarget("confirm", "running", 0)).toThrow(/running to running/);
  });

  it("every status a verdict applies a decision to has a legal target", () => {
    for (const decision of ["confirm", "reject", "cancel"] as const)
      for (const from of RUN_STATUSES)
        if (decisionVerdict(decision, from) === "apply") {
          const live = from === "running" ? [0, 1] : [0];
          for (const n of live)
            expect(canTransitionRun(from, decisionTarget(decision, from, n), "leader")).toBe(true);
        }
  });
});
