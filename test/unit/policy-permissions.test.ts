/**
 * Who may change the room's policy, as pure rules: the room's own level for
 * changing its power levels decides, never the policy's power_level or allowlist (which a change
 * sets); under the two-person rule a change from chat waits for a second admin; the local operator
 * (store credentials) acts alone. And how the Matrix oracle reads that level from the room state.
 */
import { describe, expect, it } from "vitest";
import { adminLevelOf } from "../../src/adapters/matrix/power-levels.js";
import type { CommandPolicy } from "../../src/app/commands/context.js";
import { mayChangePolicy, policyChangeNeedsSecondAdmin } from "../../src/app/commands/permissions.js";
import {
  applyPolicyChange,
  describePolicyDiff,
  policyChangeArgs,
  policyChangeId,
} from "../../src/app/commands/verbs/policy.js";
import type { SenderStanding } from "../../src/ports/permissions.js";
import type { RoomPolicy } from "../../src/ports/store.js";

const member = (powerLevel: number, adminLevel: number, allowlisted = false): SenderStanding => ({
  kind: "room-member",
  powerLevel,
  allowlisted,
  adminLevel,
});

const policy = (twoPersonRule: boolean): CommandPolicy => ({
  requiredPowerLevel: 50,
  allowlist: [],
  twoPersonRule,
  autoConfirm: [],
  confirmTimeoutMs: 3_600_000,
  nodeStaleAfterMs: 30_000,
});

describe("mayChangePolicy", () => {
  it("refuses an operator below the level the room needs to change its power levels", () => {
    const check = mayChangePolicy(member(50, 100));
    expect(check.ok).toBe(false);
    expect(check.ok ? "" : check.reason).toBe(
      "changing the room's policy needs power level 100, the level this room requires to change its power levels (room admins); you have 50",
    );
  });

  it("refuses the allowlisted too: the allowlist is part of what a change sets", () => {
    expect(mayChangePolicy(member(0, 100, true)).ok).toBe(false);
  });

  it("allows the room's admins and the local operator", () => {
    expect(mayChangePolicy(member(100, 100)).ok).toBe(true);
    expect(mayChangePolicy(member(75, 50)).ok).toBe(true);
    expect(mayChangePolicy({ kind: "local-operator" }).ok).toBe(true);
  });
});

describe("policyChangeNeedsSecondAdmin", () => {
  it("holds for a room admin under the two-person rule, not for the local operator or without the rule", () => {
    expect(policyChangeNeedsSecondAdmin(member(100, 100), policy(true))).toBe(true);
    expect(policyChangeNeedsSecondAdmin({ kind: "local-operator" }, policy(true))).toBe(false);
    expect(policyChangeNeedsSecondAdmin(member(100, 100), policy(false))).toBe(false);
  });
});

describe("adminLevelOf", () => {
  it("reads events[m.room.power_levels], else state_default, else 50; a room without the event: 0", () => {
    expect(adminLevelOf({ events: { "m.room.power_levels": 100 }, state_default: 50 })).toBe(100);
    expect(adminLevelOf({ events: { "m.room.name": 50 }, state_default: 75 })).toBe(75);
    expect(adminLevelOf({ users: { "@a:hs": 100 } })).toBe(50);
    expect(adminLevelOf({ events: { "m.room.power_levels": "100" } })).toBe(50);
    expect(adminLevelOf(null)).toBe(0);
  });
});

describe("policy changes as data", () => {
  const base: RoomPolicy = {
    powerLevel: 50,
    allow: [],
    twoPersonRule: true,
    autoConfirm: [],
    logs: "operators",
  };

  it("describe what changed, from what to what", () => {
    const next = applyPolicyChange(base, { setting: "auto_confirm", op: "add", user: "@m:x" });
    expect(describePolicyDiff(base, next)).toBe("auto_confirm nobody → @m:x");
    const off = applyPolicyChange(base, { setting: "two_person_rule", value: false });
    expect(describePolicyDiff(base, applyPolicyChange(off, { setting: "power_level", value: 0 }))).toBe(
      "power_level 50 → 0; two_person_rule on → off",
    );
    expect(describePolicyDiff(base, base)).toBe("nothing changed");
  });

  it("keep a change as it is typed, and give a proposal a short id fixed by its command", () => {
    expect(policyChangeArgs({ setting: "power_level", value: 0 })).toEqual(["power_level", "0"]);
    expect(policyChangeArgs({ setting: "allow", op: "remove", user: "@u:x" })).toEqual(["allow", "-@u:x"]);
    expect(policyChangeId("$event")).toMatch(/^[0-9a-f]{8}$/);
    expect(policyChangeId("$event")).toBe(policyChangeId("$event"));
    expect(policyChangeId("$event")).not.toBe(policyChangeId("$other"));
  });
});
