/** The counters of the side-effect chaos scenario (test/support/chaos-records.ts) on made-up records: each finds what it should. */
import { describe, expect, it } from "vitest";
import type { LogEvent } from "../../src/ports/store.js";
import type { AttemptInterval } from "../support/chaos-records.js";
import {
  afterClaimLost,
  claimLostAt,
  keyOverlaps,
  maxAtOnce,
  overlappingAttempts,
} from "../support/chaos-records.js";

const at = (task: string, attempt: number, start: number, end: number, pid = attempt): AttemptInterval => ({
  run: "r",
  task,
  attempt,
  pid,
  start,
  end,
});

let seq = 0;
const ev = (
  kind: string,
  task: string,
  t: number,
  actor: string,
  term: number | null,
  attempt?: number,
): LogEvent => ({
  seq: ++seq,
  roomId: "room",
  at: t,
  kind,
  runId: "r",
  taskId: task,
  term,
  actor,
  data: attempt === undefined ? {} : { attempt },
});

describe("chaos record counters", () => {
  it("find two attempts of one task that ran together, and not ones that only touch", () => {
    expect(overlappingAttempts([at("a", 1, 0, 100), at("a", 2, 100, 200), at("b", 1, 0, 300)])).toEqual([]);
    expect(overlappingAttempts([at("a", 1, 0, 150), at("a", 2, 100, 200)])).toHaveLength(1);
    expect(overlappingAttempts([at("a", 1, 0, Number.POSITIVE_INFINITY), at("a", 2, 500, 600)])).toHaveLength(
      1,
    );
  });

  it("count the most actions at once and overlaps within a key", () => {
    const xs = [at("a", 1, 0, 100), at("b", 1, 50, 150), at("c", 1, 99, 200), at("d", 1, 150, 160)];
    expect(maxAtOnce(xs)).toBe(3);
    const key = (i: AttemptInterval) => (i.task === "a" || i.task === "c" ? "k" : null);
    expect(keyOverlaps(xs, key)).toHaveLength(1);
    expect(keyOverlaps(xs, (i) => (i.task === "a" || i.task === "d" ? "k" : null))).toEqual([]);
  });

  it("date a lost claim by the leader's write or the next claim, not by the executor's own finish or a cancel", () => {
    const events = [
      ev("task.running", "a", 0, "n1/1", null, 1),
      ev("task.canceling", "a", 50, "n2/1", 3),
      ev("task.queued", "a", 1_000, "n2/1", 3),
      ev("task.running", "a", 1_100, "n3/1", null, 2),
      ev("task.succeeded", "a", 2_000, "n3/1", null),
      ev("task.running", "b", 0, "n1/1", null, 1),
      ev("task.running", "b", 900, "n2/1", null, 2),
    ];
    const lost = claimLostAt(events);
    expect([...lost.entries()]).toEqual([
      ["r/a#1", 1_000],
      ["r/b#1", 900],
    ]);
    const found = afterClaimLost(
      [at("a", 1, 10, 990), at("a", 2, 1_200, 1_900), at("b", 1, 950, 960, 7), at("b", 1, 10, 905, 8)],
      lost,
    );
    expect(found.started).toHaveLength(1);
    expect(found.running).toEqual(["b#1 ran 5 ms past the loss of its claim"]);
  });
});
