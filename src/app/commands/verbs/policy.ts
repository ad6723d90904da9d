/**
 * `!dag policy`: show or change the room's permissions (issue 10, finding 7). The policy lives in the
 * store so that every node enforces the same one; only the room's leader writes it, fenced by its term.
 */
import type { Parsed } from "../../../domain/command-grammar.js";
import { arity, fail, ok, unquote } from "../../../domain/command-grammar.js";
import { quoteInput } from "../../../domain/command-text.js";
import type { RoomPolicy } from "../../../ports/store.js";
import { codeBlock, r } from "../../render/html.js";
import type { HandlerContext } from "../context.js";
import { roomPolicyOf } from "../context.js";
import type { Outcome } from "../outcome.js";
import { defineVerb } from "../verb.js";

/** One change of the room's policy; each sets a value, so applying it twice changes nothing more. */
export type PolicyChange =
  | { setting: "power_level"; value: number }
  | { setting: "two_person_rule"; value: boolean }
  | { setting: "logs" | "graph"; value: "operators" | "anyone" }
  | { setting: "allow" | "auto_confirm"; op: "add" | "remove"; user: string };

export interface PolicyCommand {
  verb: "policy";
  change: PolicyChange | null;
}

export const policy = defineVerb<PolicyCommand, "policy">({
  verb: "policy",
  usage: "!dag policy | !dag policy <setting> <value>",
  summary: "show or change the room's permissions, which every node enforces",
  permission: "operator",
  details: [
    "Settings: power_level <0-100>, two_person_rule on|off, logs operators|anyone,",
    "graph operators|anyone (who may ask for pictures; anyone by default),",
    "allow +@user:server / -@user:server, auto_confirm +@user:server / -@user:server.",
    "The policy lives in the store: the first node sets it from its [permissions]; a node whose",
    "config then disagrees says so in its log and does not lead. Update the configs to match.",
  ],
  parse: (args): Parsed<PolicyCommand> => {
    if (args.length === 0) return ok({ verb: "policy", change: null });
    const err = arity("policy", args, 2, 2, "<value> after the setting");
    return err ?? parsePolicyChange(args[0] ?? "", args[1] ?? "");
  },
  handle: (ctx, c) => handlePolicy(ctx, c.change),
  render: {
    policy: (outcome) => {
      const p = outcome.policy;
      const users = (list: readonly string[]): string => (list.length === 0 ? "nobody" : list.join(", "));
      const lines = [
        `power_level ${p.powerLevel} · two_person_rule ${p.twoPersonRule ? "on" : "off"} · logs ${p.logs} · graph ${p.graph ?? "anyone"}`,
        `allow: ${users(p.allow)}`,
        `auto_confirm: ${users(p.autoConfirm)}`,
      ];
      const head =
        outcome.changed === null
          ? "The room's policy (every node enforces it):"
          : `The room's policy is changed (${outcome.changed}); every node enforces it now. Update [permissions] in the nodes' configs to match, or they will not lead after a restart:`;
      return r`${head}${codeBlock(lines.join("\n"))}`;
    },
  },
});

const POLICY_USER = /^@[^:\s]+:\S+$/;

function parsePolicyChange(rawSetting: string, rawValue: string): Parsed<PolicyCommand> {
  const setting = unquote(rawSetting).toLowerCase();
  const value = unquote(rawValue);
  const bad = (expected: string): Parsed<never> =>
    fail("bad-argument", "policy", `bad value ${quoteInput(rawValue)} for ${setting}: expected ${expected}`);
  switch (setting) {
    case "power_level": {
      const n = /^\d{1,3}$/.test(value) ? Number.parseInt(value, 10) : NaN;
      return n >= 0 && n <= 100 ? ok({ verb: "policy", change: { setting, value: n } }) : bad("0 to 100");
    }
    case "two_person_rule": {
      const on = ["on", "true", "yes"].includes(value.toLowerCase());
      const off = ["off", "false", "no"].includes(value.toLowerCase());
      return on || off ? ok({ verb: "policy", change: { setting, value: on } }) : bad("on or off");
    }
    case "logs":
    case "graph":
      return value === "operators" || value === "anyone"
        ? ok({ verb: "policy", change: { setting, value } })
        : bad("operators or anyone");
    case "allow":
    case "auto_confirm": {
      const op = value.startsWith("+") ? "add" : value.startsWith("-") ? "remove" : null;
      const user = value.slice(1);
      return op !== null && POLICY_USER.test(user)
        ? ok({ verb: "policy", change: { setting, op, user } })
        : bad("+@user:server or -@user:server");
    }
    default:
      return fail(
        "bad-argument",
        "policy",
        `unknown setting ${quoteInput(rawSetting)}: use power_level, two_person_rule, logs, graph, allow or auto_confirm`,
      );
  }
}

export function applyPolicyChange(policy: RoomPolicy, change: PolicyChange): RoomPolicy {
  switch (change.setting) {
    case "power_level":
      return { ...policy, powerLevel: change.value };
    case "two_person_rule":
      return { ...policy, twoPersonRule: change.value };
    case "logs":
      return { ...policy, logs: change.value };
    case "graph":
      return { ...policy, graph: change.value };
    case "allow":
    case "auto_confirm": {
      const key = change.setting === "allow" ? "allow" : "autoConfirm";
      const rest = policy[key].filter((u) => u !== change.user);
      return { ...policy, [key]: change.op === "add" ? [...rest, change.user] : rest };
    }
  }
}

async function handlePolicy(ctx: HandlerContext, change: PolicyChange | null): Promise<Outcome> {
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
