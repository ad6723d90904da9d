// What a handled command stores, from every writer (both stores' shared helpers and the app), reads
// back as the same CommandResult; anything else is null rather than half-read.
import { describe, expect, it } from "vitest";
import {
  capOutcome,
  decisionOutcome,
  policyOutcome,
  proposalOutcome,
  publishOutcome,
} from "../../src/adapters/store-common/run-outcomes.js";
import { readCommandResult } from "../../src/app/commands/command-result.js";
import { unwrapOutcome, wrapOutcome } from "../../src/app/commands/outcome.js";
import type { CommandResult, RoomPolicy, RunRecord } from "../../src/ports/store.js";

const run: RunRecord = {
  runId: "run-1",
  roomId: "!room:test",
  dagId: "backup",
  hash: "abc",
  status: "pending",
  description: null,
  maxParallel: null,
  publisher: "@alice:test",
  publishEventId: "$publish",
  confirmedBy: null,
  confirmDeadline: null,
  createdAt: 0,
  updatedAt: 0,
  dag: { id: "backup", description: null, maxParallel: null, tasks: [] },
};
const policy: RoomPolicy = {
  powerLevel: 50,
  allow: [],
  twoPersonRule: false,
  autoConfirm: [],
  logs: "operators",
};

/** As the store keeps it: JSON text and back. */
const stored = (r: CommandResult): Record<string, unknown> =>
  JSON.parse(JSON.stringify(r)) as Record<string, unknown>;

describe("readCommandResult", () => {
  it.each<[string, CommandResult]>([
    ["publish", publishOutcome({ kind: "created", run }, "backup", "abc")],
    ["publish conflict", publishOutcome({ kind: "conflict", existing: run }, "backup", "def")],
    ["cancel", decisionOutcome("cancel", "done", run, "backup", "@bob:test")],
    ["cap", capOutcome(3, 16)],
    ["policy", policyOutcome(policy, null)],
    ["confirmed policy", policyOutcome(policy, policy, { changeId: "0a1b2c3d", proposedBy: "@alice:test" })],
    [
      "policy proposal",
      proposalOutcome({
        roomId: "!room:test",
        changeId: "0a1b2c3d",
        change: { setting: "two_person_rule", value: "off" },
        proposedBy: "@alice:test",
        proposedAt: 1,
        expiresAt: 2,
        status: "pending",
        confirmedBy: null,
        confirmedAt: null,
      }),
    ],
    ["app outcome", wrapOutcome({ kind: "ignored", why: "not a decision" }, "$card")],
  ])("reads back what %s wrote", (_name, written) => {
    expect(readCommandResult(stored(written))).toEqual(written);
  });

  it("tells the app's outcome from the store's by op", () => {
    const app = readCommandResult(stored(wrapOutcome({ kind: "edit-not-applied" })));
    expect(app?.op).toBeUndefined();
    expect(unwrapOutcome(stored(wrapOutcome({ kind: "edit-not-applied" })))).toEqual({
      kind: "edit-not-applied",
    });
    expect(unwrapOutcome(stored(capOutcome(1, 2)))).toBeNull();
  });

  it("is null for a typo'd op, a missing field or a status that is none", () => {
    const cancel = stored(decisionOutcome("cancel", "done", run, "backup", "@bob:test"));
    expect(readCommandResult({ ...cancel, op: "cancle" })).toBeNull();
    expect(readCommandResult({ ...cancel, runId: undefined })).toBeNull();
    expect(readCommandResult({ ...cancel, status: "runing" })).toBeNull();
    expect(readCommandResult({ op: "cap", kind: "set", cap: "3", previous: 1 })).toBeNull();
    expect(readCommandResult({ dagbotOutcome: { why: "no kind" } })).toBeNull();
    expect(readCommandResult(null)).toBeNull();
  });
});
