/**
 * Who may run which command (DESIGN.md §5): `operator` verbs need the room's power level or a place
 * on the allowlist; `open` verbs anyone in the room may use. Each verb declares its permission in its
 * verb file, so help, chat, CLI and HTTP agree.
 */
import type { CommandPermission } from "../../domain/command-grammar.js";
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
