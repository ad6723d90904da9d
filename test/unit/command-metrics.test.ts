/** /metrics counts each handled command under its own verb, approve and deny included. */
import { describe, expect, it } from "vitest";
import { commandLabels } from "../../src/adapters/http/metrics.js";

describe("command labels", () => {
  it("names approve and deny, as the store records a gate decision, by their own verb", () => {
    const base = { op: "gate", runId: "r", dagId: "d", taskId: "t", by: "@a:x" };
    expect(commandLabels({ ...base, decision: "approve", kind: "recorded" })).toEqual({
      verb: "approve",
      outcome: "gate-recorded",
    });
    expect(commandLabels({ ...base, decision: "deny", kind: "denied" })).toEqual({
      verb: "deny",
      outcome: "gate-denied",
    });
  });

  it("keeps the other labels: a confirm's decision, a cap, an unknown result", () => {
    expect(commandLabels({ op: "confirm", kind: "done" })).toEqual({
      verb: "confirm",
      outcome: "decision-done",
    });
    expect(commandLabels({ op: "cap", kind: "set" })).toEqual({ verb: "cap", outcome: "cap" });
    expect(commandLabels({ op: "gate", kind: "x" }).verb).toBe("other");
  });
});
