// Inbox rows that a store of 0.2.0 or 0.3.x marked handled keep that store's own result (`op`), not
// the app's outcome. They are written here as those releases wrote them (literal JSON, since this
// release writes none), and read back into the outcome every face renders (old-results.ts).
import { describe, expect, it } from "vitest";
import { outcomeOfOldResult, readOldResult } from "../../src/app/commands/old-results.js";
import { unwrapOutcome, wrapOutcome } from "../../src/app/commands/outcome.js";
import type { CommandPolicy } from "../../src/app/commands/context.js";
import type { InboxEvent, RoomPolicy, RunRecord } from "../../src/ports/store.js";

const run: RunRecord = {
  runId: "run-1",
  roomId: "!room:test",
  dagId: "backup",
  hash: "abc",
  status: "running",
  description: null,
  maxParallel: null,
  publisher: "@alice:test",
  publishEventId: "$publish",
  confirmedBy: "@bob:test",
  confirmDeadline: null,
  createdAt: 0,
  updatedAt: 0,
  dag: { id: "backup", description: null, maxParallel: null, tasks: [] },
};
const strict: RoomPolicy = {
  powerLevel: 50,
  allow: [],
  twoPersonRule: true,
  autoConfirm: [],
  logs: "operators",
};

/** The two reads old-results.ts may make: the run by its id, and a run by name (a retry's source). */
const store = {
  getRunById: (id: string) => Promise.resolve(id === run.runId ? run : null),
  getRun: (_room: string, dagId: string) => Promise.resolve(dagId === run.dagId ? run : null),
};
const policy = { twoPersonRule: false } as CommandPolicy;

const row = (result: Record<string, unknown>, body = "!dag confirm backup"): InboxEvent => ({
  eventId: "$cmd",
  roomId: "!room:test",
  sender: "@bob:test",
  originServerTs: 1,
  content: { msgtype: "m.text", body },
  seenBy: "n1",
  status: "handled",
  receivedAt: 1,
  handledTerm: 1,
  result: JSON.parse(JSON.stringify(result)) as Record<string, unknown>,
});
const read = (result: Record<string, unknown>, body?: string) =>
  outcomeOfOldResult({ store, policy }, row(result, body));

describe("a row an older release's store handled", () => {
  it("answers a decision with the run as recorded then, not as it is now", async () => {
    const result = {
      op: "confirm",
      kind: "done",
      runId: "run-1",
      dagId: "backup",
      status: "pending",
      by: "@bob:test",
    };
    expect(await read(result)).toMatchObject({
      kind: "decision",
      verb: "confirm",
      result: "done",
      by: "@bob:test",
      run: { runId: "run-1", dagId: "backup", status: "pending", confirmedBy: "@bob:test" },
    });
  });

  it("answers a publish, a retry's new run and a conflict", async () => {
    const created = {
      op: "publish",
      verb: "publish",
      kind: "created",
      runId: "run-1",
      dagId: "backup",
      status: "pending",
    };
    expect(await read(created, "!dag publish …")).toMatchObject({
      kind: "published",
      needsConfirmation: true,
      twoPersonRule: false,
      run: { dagId: "backup" },
    });
    // A 0.3.x retry kept only the new run: the run it retried is read from the command.
    expect(await read({ ...created, verb: "retry" }, "!dag retry backup")).toMatchObject({
      kind: "retried",
      from: { dagId: "backup" },
      run: { dagId: "backup" },
    });
    const conflict = { ...created, kind: "conflict", existingHash: "abc", hash: "def" };
    expect(await read(conflict, "!dag publish …")).toMatchObject({
      kind: "conflict",
      dagId: "backup",
      suggestion: "backup-2",
    });
  });

  it("answers cap, policy, a proposal, a schedule change and a gate without reading a run", async () => {
    expect(await read({ op: "cap", kind: "set", cap: 3, previous: 16 })).toEqual({
      kind: "cap",
      cap: 3,
      previous: 16,
    });
    const lax = { ...strict, twoPersonRule: false };
    expect(await read({ op: "policy", kind: "set", policy: lax, previous: strict })).toEqual({
      kind: "policy",
      policy: lax,
      changed: "two_person_rule on → off",
      by: "@bob:test",
    });
    const proposal = {
      roomId: "!room:test",
      changeId: "0a1b2c3d",
      change: { setting: "two_person_rule", value: "off" },
      proposedBy: "@alice:test",
      proposedAt: 1,
      expiresAt: 2,
      status: "pending",
      confirmedBy: null,
      confirmedAt: null,
    };
    expect(await read({ op: "policy", kind: "proposed", proposal })).toEqual({
      kind: "policy-proposed",
      changeId: "0a1b2c3d",
      change: "two_person_rule off",
      by: "@alice:test",
      proposedAt: 1,
      expiresAt: 2,
    });
    const schedule = {
      op: "schedule",
      action: "pause",
      kind: "done",
      dagId: "backup",
      state: "paused",
      by: "@bob:test",
    };
    expect(await read(schedule)).toEqual({
      kind: "schedule-changed",
      action: "pause",
      result: "done",
      dagId: "backup",
      state: "paused",
      by: "@bob:test",
    });
    const gate = {
      op: "gate",
      decision: "approve",
      kind: "recorded",
      runId: "run-1",
      dagId: "backup",
      taskId: "ok",
      by: "@bob:test",
      missing: 1,
    };
    expect(await read(gate)).toEqual({
      kind: "gate",
      verb: "approve",
      result: "recorded",
      runId: "run-1",
      dagId: "backup",
      publishEventId: "$publish",
      gate: "ok",
      by: "@bob:test",
      missing: 1,
    });
  });

  it("says a result it cannot read, or whose run is gone, cannot be shown", async () => {
    const cancel = {
      op: "cancel",
      kind: "done",
      runId: "run-1",
      dagId: "backup",
      status: "canceled",
      by: "@bob:test",
    };
    expect(readOldResult(cancel)).toEqual(cancel);
    for (const bad of [
      { ...cancel, op: "cancle" },
      { ...cancel, runId: undefined },
      { ...cancel, status: "runing" },
      { op: "cap", kind: "set", cap: "3", previous: 1 },
    ])
      expect(await read(bad)).toMatchObject({
        kind: "command-error",
        message: expect.stringContaining("cannot be shown"),
      });
    expect(await read({ ...cancel, runId: "gone" })).toMatchObject({
      kind: "command-error",
      message: expect.stringContaining("its run is gone"),
    });
  });

  it("is not read for a row that keeps an outcome, which is read as it is", async () => {
    const kept = wrapOutcome({ kind: "cap", cap: 3, previous: 16 });
    expect(await read(kept)).toBeNull();
    expect(unwrapOutcome(row(kept).result)).toEqual({ kind: "cap", cap: 3, previous: 16 });
    expect(unwrapOutcome(row({ op: "cap", kind: "set", cap: 3, previous: 16 }).result)).toBeNull();
    expect(unwrapOutcome({ dagbotOutcome: { why: "no kind" } })).toBeNull();
  });
});
