/**
 * Who may run which command (docs/architecture.md §5): `operator` verbs need the room's power level or a place
 * on the allowlist; `open` verbs anyone in the room may use. Each verb declares its permission in its
 * verb file, so help, chat, CLI and HTTP agree.
 */
import type { CommandPermission } from "../../domain/command-grammar.js";
import { hookOfSender } from "../../domain/webhook.js";
import type { SenderStanding } from "../../ports/permissions.js";
import type { CommandPolicy } from "./context.js";

export type PermissionCheck = { ok: true } | { ok: false; reason: string };

export function isOperator(standing: SenderStanding, policy: CommandPolicy): boolean {
  if (standing.kind === "local-operator") return true;
  return standing.allowlisted || standing.powerLevel >= policy.requiredPowerLevel;
}

/** A verb as its permission sees it. */
export interface VerbPermission {
  readonly verb: string;
  readonly permission: CommandPermission;
  readonly openWhen?: (policy: CommandPolicy) => boolean;
  readonly closedWhen?: (policy: CommandPolicy) => boolean;
}

/** Whether the room's policy keeps the verb to operators (what `!dag help` marks). */
export function needsOperator(verb: VerbPermission, policy: CommandPolicy): boolean {
  if (verb.openWhen?.(policy) === true) return false;
  if (verb.closedWhen?.(policy) === true) return true;
  return verb.permission === "operator";
}

export function mayUse(verb: VerbPermission, standing: SenderStanding, policy: CommandPolicy): boolean {
  if (verb.openWhen?.(policy) === true) return true;
  return verb.permission === "open" || isOperator(standing, policy);
}

/** Whether the sender may use the verb, and if not, a reason that says what they lack. */
export function permissionFor(
  verb: VerbPermission,
  standing: SenderStanding,
  policy: CommandPolicy,
): PermissionCheck {
  if (mayUse(verb, standing, policy)) return { ok: true };
  const have = standing.kind === "room-member" ? standing.powerLevel : 0;
  return {
    ok: false,
    reason: `you need power level ${policy.requiredPowerLevel} in this room (or a place on the allowlist) to use ${verb.verb}; you have ${have}`,
  };
}

/**
 * Who may change the room's policy: those who own the room, with at least the power
 * level the room itself requires to change its power levels, and the local operator (who holds the
 * store's credentials anyway). The policy's own power_level and allowlist grant nothing here: they
 * are what a change would set, so an operator could otherwise widen their own rights alone.
 */
export function mayChangePolicy(standing: SenderStanding): PermissionCheck {
  if (standing.kind === "local-operator" || standing.powerLevel >= standing.adminLevel) return { ok: true };
  return {
    ok: false,
    reason: `changing the room's policy needs power level ${standing.adminLevel}, the level this room requires to change its power levels (room admins); you have ${standing.powerLevel}`,
  };
}

/**
 * Whether a policy change by this sender waits for a second admin's confirmation: under the
 * two-person rule, for everyone but the local operator (as for confirming their own run).
 */
export function policyChangeNeedsSecondAdmin(standing: SenderStanding, policy: CommandPolicy): boolean {
  return policy.twoPersonRule && standing.kind !== "local-operator";
}

/**
 * A webhook (sender `hook:<id>`) is a principal of its own: it may only start runs (the HTTP API
 * builds its one command, `run` of the hook's DAG); whether they await confirmation is the room's
 * policy line `hook_auto_confirm` (run-creation.ts). Every other verb is refused to it.
 */
export function hookPermission(sender: string, verb: string): PermissionCheck {
  const hook = hookOfSender(sender);
  if (hook === null || verb === "run") return { ok: true };
  return { ok: false, reason: `webhook ${hook} may only start runs, not use ${verb}` };
}
