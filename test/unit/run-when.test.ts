// Run conditions (src/domain/run-when.ts): every condition against every way one need may stand,
// written out as a table, then needs in pairs: a conditional task waits while any need has not ended.
import { describe, expect, it } from "vitest";
import type { TaskStatus } from "../../src/domain/model.js";
import { TASK_STATUSES } from "../../src/domain/model.js";
import type { RunWhen, WhenVerdict } from "../../src/domain/run-when.js";
import {
  isConditional,
  judgeWhen,
  RUN_WHENS,
  whenNotMetWords,
  whenWords,
} from "../../src/domain/run-when.js";

// One need: its status, then the verdict of each condition for an action need and for a gate need.
// Columns: succeeded, failed, denied, done. A gate ends failed only by a deny.
type Row = readonly [TaskStatus, Record<RunWhen, WhenVerdict>, Record<RunWhen, WhenVerdict>];
const W = "wait" as const;
const R = "run" as const;
const S = "skip" as const;
const v = (succeeded: WhenVerdict, failed: WhenVerdict, denied: WhenVerdict, done: WhenVerdict) => ({
  succeeded,
  failed,
  denied,
  done,
});
const TABLE: readonly Row[] = [
  ["blocked", v(W, W, W, W), v(W, W, W, W)],
  ["queued", v(W, W, W, W), v(W, W, W, W)],
  ["running", v(W, W, W, W), v(W, W, W, W)],
  ["canceling", v(W, W, W, W), v(W, W, W, W)],
  ["succeeded", v(R, S, S, R), v(R, S, S, R)],
  ["failed", v(S, R, S, R), v(S, S, R, R)],
  ["timed_out", v(S, R, S, R), v(S, R, S, R)],
  ["canceled", v(S, S, S, R), v(S, S, S, R)],
  ["skipped", v(S, S, S, R), v(S, S, S, R)],
];

describe("judgeWhen", () => {
  it("covers every status", () => {
    expect(TABLE.map((r) => r[0]).sort()).toEqual([...TASK_STATUSES].sort());
  });

  it.each(TABLE)(
    "one need %s: each condition's verdict, for an action need and a gate need",
    (status, action, gate) => {
      for (const when of RUN_WHENS) {
        expect(judgeWhen(when, [{ status, isGate: false }]), `${when}, action ${status}`).toBe(action[when]);
        expect(judgeWhen(when, [{ status, isGate: true }]), `${when}, gate ${status}`).toBe(gate[when]);
      }
    },
  );

  it("a conditional task waits while any need has not ended, whatever the others ended as", () => {
    for (const when of ["failed", "denied", "done"] as const)
      for (const open of ["blocked", "queued", "running", "canceling"] as const)
        for (const ended of ["succeeded", "failed", "timed_out", "skipped"] as const)
          expect(
            judgeWhen(when, [
              { status: ended, isGate: true },
              { status: open, isGate: false },
            ]),
            `${when}: ${ended} and ${open}`,
          ).toBe("wait");
  });

  it("one need that meets the condition is enough; a need unknown to the caller never ends", () => {
    const build = { status: "succeeded" as const };
    expect(judgeWhen("failed", [build, { status: "failed" }])).toBe("run");
    expect(judgeWhen("denied", [build, { status: "failed", isGate: true }])).toBe("run");
    expect(judgeWhen("failed", [build, { status: "failed", isGate: true }])).toBe("skip");
    for (const when of RUN_WHENS) expect(judgeWhen(when, [build, { status: undefined }])).toBe("wait");
    // The default skips as soon as one need ended badly, without waiting for the others.
    expect(judgeWhen(undefined, [{ status: "running" }, { status: "failed" }])).toBe("skip");
    expect(judgeWhen("failed", [{ status: "running" }, { status: "failed" }])).toBe("wait");
  });

  it("says itself in words, and only failed, denied and done are conditions", () => {
    expect(RUN_WHENS.filter((w) => isConditional(w))).toEqual(["failed", "denied", "done"]);
    expect(isConditional(undefined)).toBe(false);
    expect(isConditional(null)).toBe(false);
    expect(whenWords("failed")).toBe("runs if one failed");
    expect(whenNotMetWords("denied")).toBe(
      'its condition when = "denied" was not met: no approval it needs was denied',
    );
  });
});
