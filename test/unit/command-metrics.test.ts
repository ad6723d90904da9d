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

  it("counts the outcome a row keeps now under the labels the store's own result had", () => {
    const run = { runId: "r", dagId: "d.2", definition: "d" };
    const kept = (o: Record<string, unknown>) => commandLabels({ dagbotOutcome: o });
    expect(kept({ kind: "decision", verb: "confirm", result: "done", run })).toEqual(
      commandLabels({ op: "confirm", kind: "done" }),
    );
    expect(kept({ kind: "gate", verb: "deny", result: "denied" })).toEqual({
      verb: "deny",
      outcome: "gate-denied",
    });
    expect(kept({ kind: "schedule-changed", action: "pause", result: "done" })).toEqual(
      commandLabels({ op: "schedule", action: "pause", kind: "done" }),
    );
    expect(kept({ kind: "published", run })).toEqual(
      commandLabels({ op: "publish", verb: "run", kind: "created" }),
    );
    expect(kept({ kind: "retried", run })).toEqual(
      commandLabels({ op: "publish", verb: "retry", kind: "created" }),
    );
    expect(kept({ kind: "published", run: { runId: "r", dagId: "d" } })).toEqual({
      verb: "publish",
      outcome: "published",
    });
    expect(kept({ kind: "cap", cap: 1, previous: 2 })).toEqual(commandLabels({ op: "cap", kind: "set" }));
    expect(kept({ kind: "policy-proposed" })).toEqual(commandLabels({ op: "policy", kind: "proposed" }));
  });
});
