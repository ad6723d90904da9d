// The one authority rule every path that creates a run asks (src/domain/run-authority.ts): content
// starts at once only for an auto-confirmed principal and only if every run whose content it carries
// was approved; refused, pending, unconfirmed or vanished content always waits for a person.
import { describe, expect, it } from "vitest";
import type { CommandPolicy } from "../../src/app/commands/context.js";
import { needsConfirmation } from "../../src/app/commands/run-creation.js";
import type { ApprovalFacts } from "../../src/domain/run-authority.js";
import { approvalOf, definitionSource, runStartVerdict } from "../../src/domain/run-authority.js";

const confirmed: ApprovalFacts = { status: "succeeded", confirmedBy: "@c:x", confirmDeadline: 10 };
const auto: ApprovalFacts = { status: "running", confirmedBy: null, confirmDeadline: null };
const pending: ApprovalFacts = { status: "pending", confirmedBy: null, confirmDeadline: 10 };
const rejected: ApprovalFacts = { status: "rejected", confirmedBy: null, confirmDeadline: 10 };
const expired: ApprovalFacts = { status: "expired", confirmedBy: null, confirmDeadline: 10 };
const canceledWaiting: ApprovalFacts = { status: "canceled", confirmedBy: null, confirmDeadline: 10 };

const policy: CommandPolicy = {
  requiredPowerLevel: 50,
  allowlist: [],
  twoPersonRule: false,
  autoConfirm: ["@alice:x"],
  hookAutoConfirm: ["tags"],
  confirmTimeoutMs: 3_600_000,
  nodeStaleAfterMs: 30_000,
};

describe("run authority", () => {
  it("names each run's approval from its row", () => {
    expect(approvalOf(confirmed)).toBe("confirmed");
    expect(approvalOf(auto)).toBe("auto-confirmed");
    expect(approvalOf(pending)).toBe("pending");
    expect(approvalOf(rejected)).toBe("rejected");
    expect(approvalOf(expired)).toBe("unconfirmed");
    expect(approvalOf(canceledWaiting)).toBe("unconfirmed");
    expect(approvalOf(null)).toBe("unknown");
  });

  it("starts at once only for an auto-confirmed principal on approved content", () => {
    const of = (run: ApprovalFacts | null) => [definitionSource({ dagId: "rel", origin: run })];
    expect(runStartVerdict(true, of(confirmed))).toEqual({ kind: "start" });
    expect(runStartVerdict(true, of(auto))).toEqual({ kind: "start" });
    expect(runStartVerdict(true, [])).toEqual({ kind: "start" });
    expect(runStartVerdict(false, of(confirmed)).kind).toBe("confirm");
    for (const [run, words] of [
      [pending, "still awaits confirmation"],
      [rejected, "was rejected"],
      [expired, "ended before anyone confirmed it"],
      [canceledWaiting, "ended before anyone confirmed it"],
      [null, "is gone"],
    ] as const)
      expect(runStartVerdict(true, of(run))).toEqual({
        kind: "confirm",
        reason: expect.stringContaining(`the published run "rel" ${words}`),
      });
  });

  it("a webhook on hook_auto_confirm (or a person on auto_confirm) runs a rejected or pending DAG only once someone confirms it", () => {
    for (const sender of ["hook:tags", "@alice:x"]) {
      expect(needsConfirmation(policy, sender, [definitionSource({ dagId: "rel", origin: confirmed })])).toBe(
        false,
      );
      expect(needsConfirmation(policy, sender, [definitionSource({ dagId: "rel", origin: auto })])).toBe(
        false,
      );
      for (const origin of [rejected, pending, expired, canceledWaiting, null])
        expect(needsConfirmation(policy, sender, [definitionSource({ dagId: "rel", origin })])).toBe(true);
    }
  });
});
