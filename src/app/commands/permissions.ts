/**
 * Who may run which command (DESIGN.md §5): `operator` verbs need the room power level of the
 * config or a place on the allowlist; `open` verbs anyone in the room may use. The permission of
 * each verb comes from the domain command table, so help, chat, CLI and HTTP agree.
 */
import type { CommandVerb } from "../../domain/command-table.js";
import { commandInfo } from "../../domain/command-table.js";
import type { SenderStanding } from "../../ports/permissions.js";
import type { CommandPolicy } from "./context.js";

export type PermissionCheck = { ok: true } | { ok: false; reason: string };

export function isOperator(standing: SenderStanding, policy: CommandPolicy): boolean {
  if (standing.kind === "local-operator") return true;
  return standing.allowlisted || standing.powerLevel >= policy.requiredPowerLevel;
}

export function mayUse(verb: CommandVerb, standing: SenderStanding, policy: CommandPolicy): boolean {
  if (verb === "logs" && (policy.logs ?? "operators") === "anyone") return true;
  return commandInfo(verb).permission === "open" || isOperator(standing, policy);
}

/** Whether the sender may use the verb, and if not, a reason that says what they lack. */
export function checkPermission(
  verb: CommandVerb,
  standing: SenderStanding,
  policy: CommandPolicy,
): PermissionCheck {
  if (mayUse(verb, standing, policy)) return { ok: true };
  const have = standing.kind === "room-member" ? standing.powerLevel : 0;
  return {
    ok: false,
    reason: `you need power level ${policy.requiredPowerLevel} in this room (or a place on the allowlist) to use ${verb}; you have ${have}`,
  };
}

/**
 * The two-person rule: with it on, a chat user may not confirm a run they published. The local
 * operator (CLI, HTTP token) is exempt: whoever holds the node's own credentials can change the
 * store directly, so the rule would only get in their way, not stop them.
 */
export function checkTwoPersonRule(
  publisher: string,
  sender: string,
  standing: SenderStanding,
  policy: CommandPolicy,
): PermissionCheck {
  if (!policy.twoPersonRule || standing.kind === "local-operator" || publisher !== sender)
    return { ok: true };
  return {
    ok: false,
    reason: "the two-person rule is on here: someone other than the publisher must confirm it",
  };
}
