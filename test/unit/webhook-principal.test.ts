// A webhook as a principal of the room: its own policy line (hook_auto_confirm), the one verb it may
// use (run), the origin only it may claim, and what its run's card says started it.
import { describe, expect, it } from "vitest";
import type { RunCommand } from "../../src/app/commands/verbs/run.js";
import type { PolicyCommand } from "../../src/app/commands/verbs/policy.js";
import type { Parsed } from "../../src/domain/command-grammar.js";
import type { CommandPolicy, HandlerContext } from "../../src/app/commands/context.js";
import { hookPermission } from "../../src/app/commands/permissions.js";
import { needsConfirmation } from "../../src/app/commands/run-creation.js";
import {
  applyPolicyChange,
  describePolicyDiff,
  policy as policyVerb,
} from "../../src/app/commands/verbs/policy.js";
import { run as runVerb } from "../../src/app/commands/verbs/run.js";
import { renderStatusCard } from "../../src/app/render/status-card.js";
import type { RoomPolicy, RunRecord } from "../../src/ports/store.js";

const policy: CommandPolicy = {
  requiredPowerLevel: 50,
  allowlist: [],
  twoPersonRule: false,
  autoConfirm: ["@alice:x"],
  confirmTimeoutMs: 3_600_000,
  nodeStaleAfterMs: 30_000,
};

const parsePolicy = (args: string[]): Parsed<PolicyCommand> =>
  policyVerb.parse!(args, args.join(" "), undefined as never) as Parsed<PolicyCommand>;

describe("hook_auto_confirm", () => {
  it("a hook's runs await confirmation unless the policy lists the hook; auto_confirm does not cover hooks", () => {
    expect(needsConfirmation(policy, "hook:tags")).toBe(true);
    expect(needsConfirmation({ ...policy, autoConfirm: ["hook:tags"] }, "hook:tags")).toBe(true);
    expect(needsConfirmation({ ...policy, hookAutoConfirm: ["tags"] }, "hook:tags")).toBe(false);
    expect(needsConfirmation({ ...policy, hookAutoConfirm: ["tags"] }, "hook:other")).toBe(true);
    expect(needsConfirmation(policy, "@alice:x")).toBe(false);
    expect(needsConfirmation({ ...policy, hookAutoConfirm: ["@bob:x"] }, "@bob:x")).toBe(true);
  });

  it("is a policy setting: +id adds, -id removes, the change is described", () => {
    const parsed = parsePolicy(["hook_auto_confirm", "+tags"]);
    expect(parsed).toMatchObject({
      kind: "command",
      command: { change: { setting: "hook_auto_confirm", op: "add", user: "tags" } },
    });
    const before: RoomPolicy = {
      powerLevel: 50,
      allow: [],
      twoPersonRule: false,
      autoConfirm: [],
      logs: "operators",
    };
    if (parsed.kind !== "command" || parsed.command.change === null) throw new Error("not parsed");
    const after = applyPolicyChange(before, parsed.command.change);
    expect(after.hookAutoConfirm).toEqual(["tags"]);
    expect(describePolicyDiff(before, after)).toBe("hook_auto_confirm unset → tags");
    const removed = parsePolicy(["hook_auto_confirm", "-tags"]);
    if (removed.kind !== "command" || removed.command.change === null) throw new Error("not parsed");
    expect(applyPolicyChange(after, removed.command.change).hookAutoConfirm).toEqual([]);
    expect(parsePolicy(["hook_auto_confirm", "+a b"])).toMatchObject({ kind: "error" });
    expect(parsePolicy(["hook_auto_confirm", "tags"])).toMatchObject({ kind: "error" });
  });
});

describe("a hook's standing", () => {
  it("may only start runs", () => {
    expect(hookPermission("hook:tags", "run")).toEqual({ ok: true });
    for (const verb of ["publish", "confirm", "cancel", "policy", "cap"])
      expect(hookPermission("hook:tags", verb)).toMatchObject({
        ok: false,
        reason: expect.stringMatching(/may only start runs/),
      });
    expect(hookPermission("@alice:x", "publish")).toEqual({ ok: true });
    expect(hookPermission("http:ops", "cap")).toEqual({ ok: true });
  });

  it("no other sender can say a delivery started its run", async () => {
    const parsed = runVerb.fromData!({
      verb: "run",
      id: "release",
      params: [],
      hook: { id: "tags", delivery: "d-1" },
    });
    if (parsed.kind !== "command") throw new Error("not parsed");
    const ctx = { sender: "http:ops", roomId: "local", policy } as unknown as HandlerContext;
    const outcome = await runVerb.handle(ctx, parsed.command as RunCommand, []);
    expect(outcome).toMatchObject({
      kind: "command-error",
      message: "only a webhook's own delivery names its hook",
    });
    // A malformed origin is refused by the grammar's rules for data.
    expect(
      runVerb.fromData!({ verb: "run", id: "r", params: [], hook: { id: "t", delivery: "a b" } }),
    ).toMatchObject({
      kind: "error",
    });
    expect(
      runVerb.fromData!({
        verb: "run",
        id: "r",
        params: [],
        hook: { id: "t", delivery: "d", link: "javascript:x" },
      }),
    ).toMatchObject({ kind: "error" });
  });
});

describe("the card of a run a webhook started", () => {
  const T0 = Date.UTC(2026, 0, 1);
  const run = (hook: RunRecord["dag"]["hook"]): RunRecord => ({
    runId: "run-1",
    roomId: "!r:x",
    dagId: "release.2",
    hash: "ab".repeat(32),
    status: "running",
    description: null,
    maxParallel: null,
    publisher: "hook:tags",
    publishEventId: null,
    confirmedBy: null,
    confirmDeadline: null,
    createdAt: T0,
    updatedAt: T0,
    dag: {
      id: "release.2",
      description: null,
      maxParallel: null,
      tasks: [],
      ...(hook === undefined ? {} : { hook }),
    },
  });

  it("names the hook, the delivery and the payload's link", () => {
    const card = renderStatusCard(
      run({ id: "tags", delivery: "d-1", link: "https://git.example/c/1?a=1&b=<2>" }),
      [],
      T0,
    );
    expect(card.body).toContain(
      "Started by webhook `tags` (delivery `d-1`, https://git.example/c/1?a=1&b=<2>)",
    );
    expect(card.html).toContain('<a href="https://git.example/c/1?a=1&amp;b=&lt;2&gt;">');
    expect(card.html).not.toContain("<2>");
    const plain = renderStatusCard(run({ id: "tags", delivery: "d-2" }), [], T0);
    expect(plain.body).toContain("Started by webhook `tags` (delivery `d-2`)");
    expect(plain.body).not.toContain("Published by");
  });
});
