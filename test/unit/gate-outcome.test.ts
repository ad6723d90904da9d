// A gate decision's answer is built once (domain/gates.ts gateDecisionRecord): the answer the leader
// gives at once and the one it gives again from the inbox row after a restart (a row an older release's store kept) are the same.
import { describe, expect, it } from "vitest";
import { gateOutcomeFromStored, gateOutcomeOf } from "../../src/app/commands/gate-decisions.js";
import { readOldResult } from "../../src/app/commands/old-results.js";
import type { GateState, GateVerdict } from "../../src/domain/gates.js";
import { gateDecisionRecord } from "../../src/domain/gates.js";

const state = { approvals: [], values: { ticket: "OPS-1" } } as unknown as GateState;
const verdicts: GateVerdict[] = [
  { kind: "recorded", state, missing: 1 },
  { kind: "approved", state },
  { kind: "denied", state },
  { kind: "already", state },
  { kind: "closed", state: null },
  { kind: "closed", state: null, message: "its deadline passed" },
  { kind: "not-open" },
  { kind: "form", message: "ticket is empty" },
];
const run = { runId: "r-1", dagId: "deploy", publishEventId: "$publish" };

describe("a gate decision's answer", () => {
  it("is the same at once and read back from what the store kept, for every verdict", () => {
    for (const verdict of verdicts) {
      const input = { decision: "approve" as const, by: "@ann:x", face: "matrix", values: {}, reason: null };
      // As a 0.3.x store kept it on the inbox row, as JSON.
      const json = JSON.parse(
        JSON.stringify({ op: "gate", ...gateDecisionRecord(verdict, input, run, "go") }),
      );
      const stored = readOldResult(json as Record<string, unknown>);
      if (stored?.op !== "gate") throw new Error("not a gate result");
      const replayed = gateOutcomeFromStored(stored, run.publishEventId);
      expect(gateOutcomeOf("approve", verdict, run, "go", "@ann:x")).toEqual(replayed);
      expect(replayed).toMatchObject({ kind: "gate", result: verdict.kind, gate: "go", dagId: "deploy" });
    }
    const approved = gateOutcomeOf("approve", { kind: "approved", state }, run, "go", "@ann:x");
    expect(approved).toMatchObject({ values: { ticket: "OPS-1" } });
    expect(
      gateOutcomeOf("approve", { kind: "recorded", state, missing: 2 }, run, "go", "@a:x"),
    ).toMatchObject({
      missing: 2,
    });
  });
});
