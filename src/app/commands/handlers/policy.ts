/**
 * `!dag policy`: show or change the room's permissions (issue 10, finding 7). The policy lives in the
 * store so that every node enforces the same one; only the room's leader writes it, fenced by its term.
 */
import type { PolicyChange } from "../../../domain/commands.js";
import type { RoomPolicy } from "../../../ports/store.js";
import type { HandlerContext } from "../context.js";
import { roomPolicyOf } from "../context.js";
import type { Outcome } from "../outcome.js";

export function applyPolicyChange(policy: RoomPolicy, change: PolicyChange): RoomPolicy {
  switch (change.setting) {
    case "power_level":
      return { ...policy, powerLevel: change.value };
    case "two_person_rule":
      return { ...policy, twoPersonRule: change.value };
    case "logs":
      return { ...policy, logs: change.value };
    case "allow":
    case "auto_confirm": {
      const key = change.setting === "allow" ? "allow" : "autoConfirm";
      const rest = policy[key].filter((u) => u !== change.user);
      return { ...policy, [key]: change.op === "add" ? [...rest, change.user] : rest };
    }
  }
}

export async function handlePolicy(ctx: HandlerContext, change: PolicyChange | null): Promise<Outcome> {
  // The context's policy is the room's stored one (the inbox step reads it per command).
  const current = roomPolicyOf(ctx.policy);
  if (change === null) return { kind: "policy", policy: current, changed: null };
  if (ctx.fence === null) return { kind: "not-leader", roomId: ctx.roomId };
  const next = applyPolicyChange(current, change);
  // Not marked handled in the same write: every change sets a value, so a leader that repeats the
  // command after a crash writes the same policy again and changes nothing more.
  await ctx.store.setRoomPolicy({ fence: ctx.fence }, ctx.roomId, next, ctx.sender);
  return { kind: "policy", policy: next, changed: change.setting };
}
