// The task state machine against docs/architecture.md §3, written out here independently of the table.
import { describe, expect, it } from "vitest";
import { TASK_STATUSES } from "../../src/domain/model.js";
import type { TaskStatus } from "../../src/domain/model.js";
import type { TaskActor } from "../../src/domain/task-states.js";
import {
  TASK_ACTORS,
  TASK_TRANSITIONS,
  TERMINAL_TASK_STATUSES,
  canTransitionTask,
  canceledFrom,
  isTaskStatus,
  isTerminalTask,
  taskTargets,
  taskTransitionRows,
} from "../../src/domain/task-states.js";

// from → to → who, transcribed from the design's table, one line per (from, to, actor).
const LEGAL: ReadonlyArray<readonly [TaskStatus, TaskStatus, TaskActor]> = [
  ["blocked", "queued", "scheduler"],
  ["blocked", "skipped", "scheduler"],
  ["blocked", "canceled", "leader"],
  // An approval gate (gates.ts) ends from blocked: decided by a command, or timed out by the reaper.
  ["blocked", "succeeded", "leader"],
  ["blocked", "failed", "leader"],
  ["blocked", "timed_out", "reaper"],
  ["blocked", "skipped", "reaper"],
  ["queued", "canceled", "leader"],
  // fail_fast (fan-out.ts): a fan-out's queued instances skipped once one of them failed.
  ["queued", "skipped", "scheduler"],
  ["queued", "running", "worker"],
  ["queued", "timed_out", "reaper"],
  ["running", "succeeded", "worker"],
  ["running", "failed", "worker"],
  ["canceling", "succeeded", "worker"],
  ["canceling", "failed", "worker"],
  ["canceling", "timed_out", "worker"],
  ["running", "queued", "worker"],
  ["running", "queued", "reaper"],
  ["running", "failed", "reaper"],
  ["running", "timed_out", "reaper"],
  ["running", "timed_out", "worker"],
  ["running", "canceling", "leader"],
  ["canceling", "canceled", "worker"],
  ["canceling", "canceled", "reaper"],
  // An operator's mark (task-mark.ts): a task that waits or ended badly, ended as the operator says.
  ["blocked", "skipped", "leader"],
  ["queued", "succeeded", "leader"],
  ["queued", "skipped", "leader"],
  ["failed", "succeeded", "leader"],
  ["failed", "skipped", "leader"],
  ["timed_out", "succeeded", "leader"],
  ["timed_out", "skipped", "leader"],
  // What a mark lets go on: a dependent the scheduler skipped is decided again.
  ["skipped", "blocked", "leader"],
];
const legalKey = (from: string, to: string, actor: string): string => `${from}>${to}>${actor}`;
const legalSet = new Set(LEGAL.map(([f, t, a]) => legalKey(f, t, a)));

describe("task transitions", () => {
  it.each(LEGAL)("%s → %s is legal for %s", (from, to, actor) => {
    expect(canTransitionTask(from, to, actor)).toBe(true);
    expect(taskTargets(from, actor)).toContain(to);
    expect(taskTransitionRows(from, to).length).toBeGreaterThan(0);
  });

  it("rejects every other (from, to, actor) combination", () => {
    let rejected = 0;
    for (const from of TASK_STATUSES) {
      for (const to of TASK_STATUSES) {
        for (const actor of TASK_ACTORS) {
          const expected = legalSet.has(legalKey(from, to, actor));
          expect(canTransitionTask(from, to, actor), legalKey(from, to, actor)).toBe(expected);
          if (!expected) rejected += 1;
        }
      }
    }
    expect(rejected).toBe(TASK_STATUSES.length * TASK_STATUSES.length * TASK_ACTORS.length - legalSet.size);
  });

  it("has no table row that the design does not list, and every row has a condition", () => {
    for (const row of TASK_TRANSITIONS) {
      expect(row.who.length).toBeGreaterThan(0);
      expect(row.condition.length).toBeGreaterThan(0);
      for (const actor of row.who) expect(legalSet.has(legalKey(row.from, row.to, actor))).toBe(true);
    }
  });

  it("leaves a terminal state only by the leader's mark, and a task may never stay put", () => {
    expect([...TERMINAL_TASK_STATUSES].sort()).toEqual(
      ["canceled", "failed", "skipped", "succeeded", "timed_out"].sort(),
    );
    for (const from of TASK_STATUSES) {
      expect(isTerminalTask(from)).toBe(TERMINAL_TASK_STATUSES.has(from));
      if (isTerminalTask(from)) {
        for (const actor of ["scheduler", "reaper", "worker"] as const)
          expect(taskTargets(from, actor)).toEqual([]);
        for (const row of TASK_TRANSITIONS.filter((t) => t.from === from))
          expect(row.condition).toMatch(/^mark/);
      } else expect(taskTargets(from).length).toBeGreaterThan(0);
      for (const actor of TASK_ACTORS) expect(canTransitionTask(from, from, actor)).toBe(false);
    }
  });

  it("lists targets per actor and for all actors", () => {
    expect(taskTargets("running", "worker").sort()).toEqual(["failed", "queued", "succeeded", "timed_out"]);
    expect(taskTargets("running", "reaper").sort()).toEqual(["failed", "queued", "timed_out"]);
    expect(taskTargets("running", "scheduler")).toEqual([]);
    expect(taskTargets("blocked").sort()).toEqual([
      "canceled",
      "failed",
      "queued",
      "skipped",
      "succeeded",
      "timed_out",
    ]);
    expect(taskTargets("canceling").sort()).toEqual(["canceled", "failed", "succeeded", "timed_out"]);
  });

  it("recognises status names", () => {
    expect(isTaskStatus("queued")).toBe(true);
    expect(isTaskStatus("Queued")).toBe(false);
    expect(isTaskStatus("__proto__")).toBe(false);
    expect(isTaskStatus(3)).toBe(false);
  });
});

describe("canceledFrom: the tasks a run's cancel ends or stops", () => {
  it("ends the tasks that never started and stops the running ones, as the design's table says", () => {
    expect(canceledFrom("canceled")).toEqual(["blocked", "queued"]);
    expect(canceledFrom("canceling")).toEqual(["running"]);
  });
});
