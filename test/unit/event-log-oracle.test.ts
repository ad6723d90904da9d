// The contract suite's event-log oracle finds what it is there to find.
import { describe, expect, it } from "vitest";
import type { LogEvent } from "../../src/ports/store.js";
import { illegalMoves } from "../contracts/event-log-oracle.js";

let seq = 0;
const line = (kind: string, extra: Partial<LogEvent> = {}): LogEvent => ({
  seq: ++seq,
  roomId: "!r",
  at: 0,
  kind,
  runId: "run",
  taskId: kind.startsWith("task.") ? "a" : null,
  term: 1,
  actor: "leader/1",
  data: {},
  ...extra,
});
const worker = { term: null, actor: "w/1" };

describe("illegalMoves", () => {
  it("passes a run's whole legal life, retry included", () => {
    const log = [
      line("lease.acquired", { runId: null }),
      line("run.created", { data: { status: "running" } }),
      line("task.queued"),
      line("task.running", worker),
      line("task.queued", worker),
      line("task.running", worker),
      line("task.succeeded", worker),
      line("run.succeeded"),
    ];
    expect(illegalMoves(log)).toEqual([]);
  });

  it("names a skipped state, a worker doing the leader's move, and a run move without a term", () => {
    const log = [
      line("run.created", { data: { status: "running" } }),
      line("task.running", worker),
      line("task.canceling", worker),
      line("run.canceled", { term: null }),
    ];
    const problems = illegalMoves(log);
    expect(problems).toHaveLength(3);
    expect(problems[0]).toMatch(/task blocked → running by a worker is not in TASK_TRANSITIONS/);
    expect(problems[1]).toMatch(/task running → canceling by a worker/);
    expect(problems[2]).toMatch(/without a leader term/);
  });

  it("skips runs whose creation was pruned from the log", () => {
    expect(illegalMoves([line("task.succeeded", worker), line("run.failed")])).toEqual([]);
  });
});
