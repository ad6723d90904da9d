// The decisions the stores apply (finish, reap, queue timeout): each answer is a legal move of the
// task table, for every status, attempt count, outcome and time.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { taskRetryWaitMs } from "../../src/domain/backoff.js";
import { TASK_STATUSES } from "../../src/domain/model.js";
import {
  TASK_OUTCOMES,
  canTransitionTask,
  checkTaskOutcome,
  decideFinish,
  finishAnswers,
  MAX_LOST_RERUNS,
  decideReap,
  queueTimedOut,
} from "../../src/domain/task-states.js";

const held = fc.constantFrom("running" as const, "canceling" as const);
const attempts = fc
  .tuple(fc.integer({ min: 1, max: 5 }), fc.integer({ min: 0, max: 5 }))
  .map(([attempt, more]) => ({ attempt, maxAttempts: attempt + more }));

describe("decideFinish", () => {
  it("is always a legal worker move, or a refusal of 'canceled' for a task nobody canceled", () => {
    fc.assert(
      fc.property(held, attempts, fc.constantFrom(...TASK_OUTCOMES), (status, a, outcome) => {
        const d = decideFinish({ status, ...a, retryBackoffMs: 1000 }, outcome);
        if (d.kind === "refused") expect([outcome, status]).toEqual(["canceled", "running"]);
        else expect(canTransitionTask(status, d.to, "worker")).toBe(true);
      }),
    );
  });

  it("retries a running task's failure or timeout while attempts are left, after the backoff", () => {
    const task = { status: "running" as const, attempt: 2, maxAttempts: 3, retryBackoffMs: 500 };
    expect(decideFinish(task, "failed")).toEqual({ kind: "retry", to: "queued", waitMs: 1000 });
    expect(decideFinish(task, "timed_out")).toEqual({ kind: "retry", to: "queued", waitMs: 1000 });
    expect(decideFinish(task, "succeeded")).toEqual({ kind: "end", to: "succeeded" });
    expect(decideFinish({ ...task, attempt: 3 }, "failed")).toEqual({ kind: "end", to: "failed" });
    // A canceled run's task that failed anyway is not retried.
    expect(decideFinish({ ...task, status: "canceling" }, "failed")).toEqual({ kind: "end", to: "failed" });
  });

  it("refuses an outcome a worker cannot report before anything is decided", () => {
    for (const bad of ["running", "queued", "canceling", "", null, 3])
      expect(() => checkTaskOutcome("finish task", bad)).toThrow(RangeError);
    expect(checkTaskOutcome("finish task", "timed_out")).toBe("timed_out");
  });
});

describe("finishAnswers", () => {
  it("answers each case of the row exactly as decideFinish decides it on that row", () => {
    fc.assert(
      fc.property(
        held,
        attempts,
        fc.integer({ min: 0, max: 10_000_000 }),
        fc.constantFrom(...TASK_OUTCOMES),
        (status, a, retryBackoffMs, outcome) => {
          const answers = finishAnswers(outcome, { attempt: a.attempt, retryBackoffMs });
          // The case a store's statement picks for this row.
          const picked =
            status === "canceling"
              ? answers.canceling
              : a.attempt < a.maxAttempts
                ? answers.left
                : answers.spent;
          expect(picked).toEqual(decideFinish({ status, ...a, retryBackoffMs }, outcome));
        },
      ),
    );
  });

  it("gives a failure with attempts left the domain's retry wait for the claimed attempt", () => {
    const answers = finishAnswers("failed", { attempt: 3, retryBackoffMs: 250 });
    expect(answers.left).toEqual({ kind: "retry", to: "queued", waitMs: taskRetryWaitMs(250, 3) });
    expect(answers.spent).toEqual({ kind: "end", to: "failed" });
    expect(finishAnswers("canceled", { attempt: 1, retryBackoffMs: 250 }).left.kind).toBe("refused");
  });
});

describe("decideReap", () => {
  it("is null or a legal reaper move, for any task status and time", () => {
    const maybe = fc.option(fc.integer({ min: 0, max: 100 }), { nil: null });
    fc.assert(
      fc.property(
        fc.constantFrom(...TASK_STATUSES),
        attempts,
        maybe,
        maybe,
        fc.integer({ min: 0, max: 100 }),
        fc.integer({ min: 0, max: 4 }),
        fc.boolean(),
        (status, a, leaseExpiresAt, deadline, now, lostReruns, rerunIfLost) => {
          const lost = { executorNode: "n2", lostReruns, rerunIfLost };
          const d = decideReap({ status, ...a, retryBackoffMs: 10, leaseExpiresAt, deadline, ...lost }, now);
          if (d !== null) expect(canTransitionTask(status, d.to, "reaper")).toBe(true);
          const overdue =
            (leaseExpiresAt !== null && leaseExpiresAt <= now) ||
            (status === "running" && deadline !== null && deadline <= now);
          if (status === "running" || status === "canceling") expect(d !== null).toBe(overdue);
          else expect(d).toBeNull();
        },
      ),
    );
  });

  it("past a deadline: requeues with the retry wait while attempts are left, then timed_out", () => {
    const base = {
      status: "running" as const,
      retryBackoffMs: 1000,
      leaseExpiresAt: null,
      deadline: 55,
      executorNode: "n2",
      lostReruns: 0,
      rerunIfLost: true,
    };
    expect(decideReap({ ...base, attempt: 2, maxAttempts: 3 }, 60)).toEqual({
      to: "queued",
      reason: "deadline passed",
      waitMs: taskRetryWaitMs(1000, 2),
      lostNode: false,
      lostRerun: false,
    });
    expect(decideReap({ ...base, attempt: 3, maxAttempts: 3, leaseExpiresAt: 50 }, 60)).toEqual({
      to: "timed_out",
      reason: "deadline passed",
      lostNode: false,
    });
    expect(decideReap({ ...base, attempt: 1, maxAttempts: 1 }, 54)).toBeNull();
  });

  it("a lost node: runs again without spending a retry, MAX_LOST_RERUNS times; then as a retry; never when rerun_if_lost = false", () => {
    const base = {
      status: "running" as const,
      retryBackoffMs: 1000,
      leaseExpiresAt: 50,
      deadline: null,
      executorNode: "n2",
      rerunIfLost: true,
    };
    // retries = 0: the first lost attempts run again at once, no retry spent.
    expect(decideReap({ ...base, attempt: 1, maxAttempts: 1, lostReruns: 0 }, 60)).toEqual({
      to: "queued",
      reason: "node n2 was lost; running again",
      waitMs: 0,
      lostNode: true,
      lostRerun: true,
    });
    expect(MAX_LOST_RERUNS).toBe(2);
    expect(decideReap({ ...base, attempt: 2, maxAttempts: 2, lostReruns: 1 }, 60)).toMatchObject({
      to: "queued",
      reason: "node n2 was lost (the 2nd lost attempt of this task); running again",
      lostRerun: true,
    });
    // Bounded: past MAX_LOST_RERUNS a lost attempt is a retry, or the end.
    expect(decideReap({ ...base, attempt: 3, maxAttempts: 3, lostReruns: 2 }, 60)).toEqual({
      to: "failed",
      reason: "node n2 was lost (the 3rd lost attempt of this task); not run again",
      lostNode: true,
    });
    expect(decideReap({ ...base, attempt: 3, maxAttempts: 4, lostReruns: 2 }, 60)).toEqual({
      to: "queued",
      reason: "node n2 was lost (the 3rd lost attempt of this task); running again as one of its retries",
      waitMs: taskRetryWaitMs(1000, 3),
      lostNode: true,
      lostRerun: false,
    });
    // Never twice: failed at once, even with retries left.
    expect(
      decideReap({ ...base, attempt: 1, maxAttempts: 3, lostReruns: 0, rerunIfLost: false }, 60),
    ).toEqual({
      to: "failed",
      reason: "node n2 was lost; not run again: rerun_if_lost = false",
      lostNode: true,
    });
    expect(decideReap({ ...base, attempt: 1, maxAttempts: 1, lostReruns: 0 }, 49)).toBeNull();
  });

  it("cancels a canceling task only once its executor's lease expired", () => {
    const t = {
      status: "canceling" as const,
      attempt: 1,
      maxAttempts: 1,
      retryBackoffMs: 1,
      deadline: 0,
      executorNode: null,
      lostReruns: 0,
      rerunIfLost: true,
    };
    expect(decideReap({ ...t, leaseExpiresAt: 100 }, 99)).toBeNull();
    expect(decideReap({ ...t, leaseExpiresAt: 100 }, 100)).toEqual({
      to: "canceled",
      reason: "lease expired",
    });
  });
});

describe("queueTimedOut", () => {
  it("only a queued task with a queue timeout, once it has waited that long", () => {
    const t = { status: "queued" as const, queuedAt: 100, queueTimeoutMs: 50 };
    expect(queueTimedOut(t, 149)).toBe(false);
    expect(queueTimedOut(t, 150)).toBe(true);
    expect(queueTimedOut({ ...t, queueTimeoutMs: null }, 10_000)).toBe(false);
    expect(queueTimedOut({ ...t, status: "running" }, 10_000)).toBe(false);
    expect(canTransitionTask("queued", "timed_out", "reaper")).toBe(true);
  });
});
