/**
 * `!dag policy`: show or change the room's permissions. The policy lives in the
 * store so that every node enforces the same one; only the room's leader writes it, fenced by its term.
 * It is the room's, so only those who own the room change it: a change needs the power
 * level the room requires to change its power levels (permissions.ts), and under the two-person rule
 * it waits, kept in the store under a short id, until another room admin confirms it
 * (`!dag policy confirm <id>`) before it expires like a run awaiting confirmation. Every applied
 * change is answered in the room and logged as a `policy.set` event with who, from what and to what
 * (docs/architecture.md, section 5).
 */
import { createHash } from "node:crypto";
import type { Parsed } from "../../../domain/command-grammar.js";
import { arity, fail, ok, unquote } from "../../../domain/command-grammar.js";
import { quoteInput } from "../../../domain/command-text.js";
import { formatDuration } from "../../../domain/duration.js";
import type { CommandContext, PolicyProposal, PolicySet, RoomPolicy } from "../../../ports/store.js";
import { codeBlock, r, text } from "../../render/html.js";
import type { Rendered } from "../../render/html.js";
import type { HandlerContext } from "../context.js";
import { roomPolicyOf } from "../context.js";
import type { Outcome } from "../outcome.js";
import type { Idiom } from "../face.js";
import { codeIn, commandIn, markIn } from "../face.js";
import { mayChangePolicy, policyChangeNeedsSecondAdmin } from "../permissions.js";
import { commandContext } from "../shared.js";
import type { VerbHttp } from "../verb.js";
import { defineVerb } from "../verb.js";

/** One change of the room's policy; each sets a value, so applying it twice changes nothing more. */
export type PolicyChange =
  | { setting: "power_level"; value: number }
  | { setting: "two_person_rule"; value: boolean }
  | { setting: "logs" | "graph"; value: "operators" | "anyone" }
  | { setting: "allow" | "auto_confirm"; op: "add" | "remove"; user: string }
  /** A webhook (by hook id) whose deliveries start runs without confirmation. */
  | { setting: "hook_auto_confirm"; op: "add" | "remove"; user: string };

export interface PolicyCommand {
  verb: "policy";
  /** Null: show the policy (or confirm, when `confirm` is set). */
  change: PolicyChange | null;
  /** `!dag policy confirm <id>`: the id of a proposed change to apply. */
  confirm?: string;
}

const USAGE = "!dag policy | !dag policy <setting> <value> | !dag policy confirm <id>";
/** A proposal's id: the first hex digits of its command event's hash (policyChangeId). */
const CHANGE_ID = /^[0-9a-f]{8}$/;

export const policy = defineVerb<PolicyCommand, "policy" | "policy-proposed">({
  verb: "policy",
  usage: USAGE,
  summary: "show the room's permissions, which every node enforces; room admins change them",
  group: "room",
  permission: "operator",
  details: [
    "Settings: power_level <0-100>, two_person_rule on|off, logs operators|anyone,",
    "graph operators|anyone (who may ask for pictures; anyone by default),",
    "allow +@user:server / -@user:server, auto_confirm +@user:server / -@user:server,",
    "hook_auto_confirm +<hook id> / -<hook id> (a webhook whose runs start without confirmation).",
    "A change needs the power level this room requires to change its power levels (room admins).",
    "Under the two-person rule it waits for another admin: `!dag policy confirm <id>`; the",
    "proposer cannot confirm it, and it expires like a run awaiting confirmation.",
    "The policy lives in the store: the first node sets it from its [permissions]; a node whose",
    "config then disagrees says so in its log and does not lead. Update the configs to match.",
  ],
  parse: (args): Parsed<PolicyCommand> => {
    if (args.length === 0) return ok({ verb: "policy", change: null });
    const err = arity("policy", args, 2, 2, "<value> after the setting");
    if (err !== null) return err;
    const [first, second] = [unquote(args[0] ?? ""), unquote(args[1] ?? "")];
    if (first.toLowerCase() === "confirm") return parseConfirm(second);
    return parsePolicyChange(args[0] ?? "", args[1] ?? "");
  },
  fromData: (data) => policyFromData(data),
  handle: (ctx, c) => handlePolicy(ctx, c),
  // A change or a confirmation goes to the room's leader; showing the policy only reads the store,
  // so it answers in a room without a leader too (docs/architecture.md §5).
  writes: true,
  readOnly: (c) => c.change === null && c.confirm === undefined,
  cli: {
    description: "Show the room's policy, change it, or confirm a change another admin proposed.",
    about:
      "Without arguments: the room's policy, which every node enforces. `dagbot policy <setting> <value>`\n" +
      "changes it (settings as in `!dag help policy`: power_level 0-100, two_person_rule on|off, logs and\n" +
      "graph operators|anyone, allow / auto_confirm +@user:server or -@user:server, hook_auto_confirm\n" +
      "+<hook id> or -<hook id>); `dagbot policy confirm <id>` applies a change proposed under the\n" +
      "two-person rule. The CLI's user has the store's credentials and so a room admin's right; its\n" +
      "change applies at once. When no node leads the room (its nodes' [permissions] disagree with the\n" +
      "room's policy), a change is applied by this command itself under the room's lease.",
    args: [
      { name: "setting", about: "the setting to change, or `confirm`", optional: true },
      { name: "value", about: "its new value, or the id of the change to confirm", optional: true },
    ],
    selfLeads: true,
    command: ([setting, value]) => {
      if (typeof setting !== "string") return { verb: "policy", change: null };
      if (setting.toLowerCase() === "confirm")
        return { verb: "policy", change: null, confirm: typeof value === "string" ? value : "" };
      // The words as typed: the grammar's rules for data read them as chat reads the text.
      return { verb: "policy", change: { setting, value: typeof value === "string" ? value : "" } } as never;
    },
  },
  http: (s) =>
    [
      {
        method: "GET",
        path: "/v1/rooms/:room/policy",
        summary: "The room's policy, which every node enforces",
        params: s.roomParams,
        response: s.policySchema,
        command: () => ({ verb: "policy", change: null }),
        answer: policyAnswer,
      },
      {
        method: "POST",
        path: "/v1/rooms/:room/policy",
        summary:
          "Change the room's policy (an operate token is a room admin); under the two-person rule a read token's change would be a proposal",
        params: s.roomParams,
        body: s.policyChangeBody,
        response: s.policySchema,
        command: ({ body }) => {
          const { setting, value } = body as { setting: string; value: string };
          return { verb: "policy", change: { setting, value } as never };
        },
        answer: policyAnswer,
      },
      {
        method: "POST",
        path: "/v1/rooms/:room/policy/:change/confirm",
        summary: "Apply a policy change another admin proposed under the two-person rule",
        params: s.policyConfirmParams,
        body: s.emptyBody,
        response: s.policySchema,
        command: ({ params }) => ({ verb: "policy", change: null, confirm: params["change"] ?? "" }),
        answer: policyAnswer,
      },
    ] satisfies VerbHttp<PolicyCommand>[],
  httpWords: (args) => policyHttpWords(args),
  render: {
    policy: (outcome, say) => {
      const p = outcome.policy;
      const users = (list: readonly string[]): string => (list.length === 0 ? "nobody" : list.join(", "));
      const lines = [
        `power_level ${p.powerLevel} · two_person_rule ${p.twoPersonRule ? "on" : "off"} · logs ${p.logs} · graph ${p.graph ?? "anyone"}`,
        `allow: ${users(p.allow)}`,
        `auto_confirm: ${users(p.autoConfirm)}`,
        `hook_auto_confirm: ${users(p.hookAutoConfirm ?? [])}`,
      ];
      return say.chat === true
        ? r`${policyHead(outcome, say)}${codeBlock(lines.join("\n"))}`
        : r`${policyHead(outcome, say)}\n${lines.join("\n")}`;
    },
    "policy-proposed": (o, say) =>
      r`${markIn(say, "🔐")}Policy change proposed by ${o.by}: ${codeIn(say, o.change)}. It is not applied yet: the two-person rule needs a second room admin to confirm it with ${commandIn(
        say,
        "policy",
        ["confirm", o.changeId],
      )}. It expires in ${formatDuration(Math.max(0, o.expiresAt - o.proposedAt))}.`,
  },
});

function policyHead(o: Extract<Outcome, { kind: "policy" }>, say: Idiom): Rendered {
  if (o.changed === null) return text("The room's policy (every node enforces it):");
  const who = o.by === undefined ? text("") : r` by ${o.by}`;
  const whose =
    o.proposal === undefined
      ? text("")
      : r` (proposed by ${o.proposal.proposedBy} as ${codeIn(say, o.proposal.changeId)})`;
  return r`${markIn(say, "🔐")}The room's policy is changed${who}${whose}: ${o.changed}. Every node enforces it now. Update [permissions] in the nodes' configs to match, or they will not lead after a restart:`;
}

/**
 * A policy command in HTTP words, from its CLI words (`logs anyone --room r`, `confirm <id>`):
 * the route and the body that say it.
 */
function policyHttpWords(args: readonly string[]): string {
  const words = [...args];
  const at = words.indexOf("--room");
  const room = at >= 0 ? (words.splice(at, 2)[1] ?? "{room}") : "{room}";
  const base = `/v1/rooms/${encodeURIComponent(room).replace("%7Broom%7D", "{room}")}/policy`;
  const [first, second] = words;
  if (first === undefined) return `GET ${base}`;
  if (first === "confirm") return `POST ${base}/${second ?? "{change}"}/confirm`;
  return `POST ${base} ${JSON.stringify({ setting: first, value: second ?? "" })}`;
}

/**
 * What a room whose nodes' [permissions] disagree with its policy is told (the refusal of a command
 * that finds no leader, /readyz, `dagbot nodes`), with the commands that end it in the face's words:
 * the policy changes that make the room's policy the config's, or a config that states the room's.
 */
export function policyConflictAdvice(
  roomId: string,
  conflict: { disagreements: readonly string[]; fixes: ReadonlyArray<readonly [string, string]> },
  say: Idiom,
): string {
  const commands = conflict.fixes.map((f) => say.command("policy", [...f, "--room", roomId]));
  return (
    `the nodes' [permissions] disagree with room ${roomId}'s policy (${conflict.disagreements.join("; ")}), ` +
    `so they do not lead it. To make the room's policy the config's, run ${commands.join(" and ")}; ` +
    "or make the nodes' [permissions] state the room's policy (or leave those settings out) and restart them"
  );
}

/** The HTTP answer of a policy outcome: the policy, or the proposal awaiting a second admin. */
function policyAnswer(o: Outcome): Record<string, unknown> | null {
  if (o.kind === "policy")
    return { policy: o.policy, changed: o.changed, ...(o.by === undefined ? {} : { by: o.by }) };
  if (o.kind === "policy-proposed")
    return { proposed: { changeId: o.changeId, change: o.change, by: o.by, expiresAt: o.expiresAt } };
  return null;
}

/**
 * `{ verb: "policy", change?, confirm? }` as the CLI and HTTP give it and the inbox keeps it: a
 * change is a PolicyChange or its words (`{ setting: "logs", value: "anyone" }`), read again by the
 * typed command's rules so both faces and chat accept exactly the same changes.
 */
function policyFromData(data: Readonly<Record<string, unknown>>): Parsed<PolicyCommand> {
  const extra = Object.keys(data).find((k) => !["verb", "change", "confirm"].includes(k));
  if (extra !== undefined)
    return fail(
      "extra-argument",
      "policy",
      `unexpected field ${quoteInput(extra)}: policy takes change or confirm`,
    );
  const { change, confirm } = data;
  if (confirm !== undefined) {
    if (change !== null && change !== undefined)
      return fail("extra-argument", "policy", "give a change or a confirmation, not both");
    if (typeof confirm !== "string") return fail("bad-argument", "policy", "confirm is a change id");
    return parseConfirm(confirm);
  }
  if (change === null || change === undefined) return ok({ verb: "policy", change: null });
  const words = changeWords(change);
  if (words === null)
    return fail("bad-argument", "policy", "a change is { setting, value }, as typed after `policy`");
  return parsePolicyChange(words[0], words[1]);
}

/** The words of a change given as data: a PolicyChange or `{ setting, value }`; null when neither. */
function changeWords(change: unknown): [string, string] | null {
  if (typeof change !== "object" || change === null || Array.isArray(change)) return null;
  const c = change as Record<string, unknown>;
  const keys = Object.keys(c);
  if (typeof c["setting"] !== "string") return null;
  if (keys.every((k) => ["setting", "op", "user"].includes(k)) && keys.length === 3) {
    if ((c["op"] !== "add" && c["op"] !== "remove") || typeof c["user"] !== "string") return null;
    return [c["setting"], `${c["op"] === "add" ? "+" : "-"}${c["user"]}`];
  }
  if (keys.length !== 2 || !keys.includes("value")) return null;
  const value = c["value"];
  if (typeof value === "boolean") return [c["setting"], value ? "on" : "off"];
  if (typeof value === "number" && Number.isInteger(value)) return [c["setting"], String(value)];
  return typeof value === "string" ? [c["setting"], value] : null;
}

/** `confirm <id>`: the id of a proposed change, 8 hex digits. */
function parseConfirm(raw: string): Parsed<PolicyCommand> {
  const id = raw.toLowerCase();
  return CHANGE_ID.test(id)
    ? ok({ verb: "policy", change: null, confirm: id })
    : fail("bad-argument", "policy", `bad change id ${quoteInput(raw)}: expected 8 hex digits`);
}

const POLICY_USER = /^@[^:\s]+:\S+$/;
/** A webhook's id, as [[webhooks]] declares it. */
const HOOK_ID = /^[A-Za-z0-9_.-]{1,64}$/;

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
    case "hook_auto_confirm": {
      const op = value.startsWith("+") ? "add" : value.startsWith("-") ? "remove" : null;
      const hook = value.slice(1);
      return op !== null && HOOK_ID.test(hook)
        ? ok({ verb: "policy", change: { setting, op, user: hook } })
        : bad("+<hook id> or -<hook id>");
    }
    default:
      return fail(
        "bad-argument",
        "policy",
        `unknown setting ${quoteInput(rawSetting)}: use power_level, two_person_rule, logs, graph, allow, auto_confirm or hook_auto_confirm, or confirm <id>`,
      );
  }
}

/** The change as typed after `!dag policy`: what a proposal keeps and parses again when confirmed. */
export function policyChangeArgs(change: PolicyChange): [setting: string, value: string] {
  switch (change.setting) {
    case "power_level":
      return [change.setting, String(change.value)];
    case "two_person_rule":
      return [change.setting, change.value ? "on" : "off"];
    case "logs":
    case "graph":
      return [change.setting, change.value];
    case "allow":
    case "auto_confirm":
    case "hook_auto_confirm":
      return [change.setting, `${change.op === "add" ? "+" : "-"}${change.user}`];
  }
}

/** A kept proposal's change, parsed again as it was typed; null when this version cannot read it. */
function proposedChange(proposal: PolicyProposal): PolicyChange | null {
  const { setting, value } = proposal.change;
  if (typeof setting !== "string" || typeof value !== "string") return null;
  const parsed = parsePolicyChange(setting, value);
  return parsed.kind === "command" ? parsed.command.change : null;
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
    case "hook_auto_confirm": {
      const rest = (policy.hookAutoConfirm ?? []).filter((h) => h !== change.user);
      return { ...policy, hookAutoConfirm: change.op === "add" ? [...rest, change.user] : rest };
    }
  }
}

/**
 * What differs between two policies, setting by setting (`two_person_rule on → off; allow nobody
 * → @a:x`); read from the values, so a setting added later is described without a case of its own.
 */
export function describePolicyDiff(before: RoomPolicy | null, after: RoomPolicy): string {
  const show = (v: unknown): string =>
    typeof v === "boolean"
      ? v
        ? "on"
        : "off"
      : Array.isArray(v)
        ? v.length === 0
          ? "nobody"
          : v.join(", ")
        : v === undefined
          ? "unset"
          : String(v);
  const old = (before ?? {}) as unknown as Record<string, unknown>;
  const now = after as unknown as Record<string, unknown>;
  const parts: string[] = [];
  for (const key of new Set([...Object.keys(old), ...Object.keys(now)])) {
    if (JSON.stringify(old[key]) === JSON.stringify(now[key])) continue;
    const name = key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
    parts.push(`${name} ${show(old[key])} → ${show(now[key])}`);
  }
  return parts.length === 0 ? "nothing changed" : parts.join("; ");
}

/** A proposal's id, fixed by its command event so a repeated command finds the same one. */
export function policyChangeId(eventId: string): string {
  return createHash("sha256").update(eventId, "utf8").digest("hex").slice(0, 8);
}

async function handlePolicy(ctx: HandlerContext, c: PolicyCommand): Promise<Outcome> {
  // The context's policy is the room's stored one (the inbox step reads it per command).
  const current = roomPolicyOf(ctx.policy);
  if (c.change === null && c.confirm === undefined) return { kind: "policy", policy: current, changed: null };
  const admin = mayChangePolicy(ctx.standing);
  if (!admin.ok)
    return { kind: "refused", verb: "policy", reason: admin.reason, helpLine: `usage: ${USAGE}` };
  // Every write below marks the command's inbox row handled in its own transaction, with its outcome.
  const propose = commandContext(ctx, proposedOutcome);
  const set = commandContext(ctx, (done: PolicySet) => policySetOutcome(done, ctx.sender));
  if (propose === null || set === null) return { kind: "not-leader", roomId: ctx.roomId };
  if (c.confirm !== undefined) return confirmProposal(ctx, set, current, c.confirm);
  if (c.change === null) return { kind: "policy", policy: current, changed: null };
  const [setting, value] = policyChangeArgs(c.change);
  if (policyChangeNeedsSecondAdmin(ctx.standing, ctx.policy)) {
    const proposal = await ctx.store.proposePolicyChange(propose, ctx.roomId, {
      changeId: policyChangeId(ctx.eventId ?? `${ctx.sender}/${await ctx.store.now()}`),
      change: { setting, value },
      by: ctx.sender,
      ttlMs: ctx.policy.confirmTimeoutMs,
    });
    return proposedOutcome(proposal);
  }
  const next = applyPolicyChange(current, c.change);
  const done = await ctx.store.setRoomPolicy(set, ctx.roomId, next, ctx.sender, {
    change: { setting, value },
  });
  // Without a proposal to confirm, the write is always "set".
  return policySetOutcome(
    { policy: next, previous: done.kind === "set" ? done.previous : current },
    ctx.sender,
  );
}

/** A change applied: the policy after it, what changed from the one the store held, who applied it. */
export function policySetOutcome({ policy, previous, proposal }: PolicySet, by: string): Outcome {
  const changed = describePolicyDiff(previous, policy);
  return { kind: "policy", policy, changed, by, ...(proposal === undefined ? {} : { proposal }) };
}

export function proposedOutcome(p: PolicyProposal): Outcome {
  const { setting, value } = p.change;
  return {
    kind: "policy-proposed",
    changeId: p.changeId,
    change: `${String(setting)} ${String(value)}`,
    by: p.proposedBy,
    proposedAt: p.proposedAt,
    expiresAt: p.expiresAt,
  };
}

async function confirmProposal(
  ctx: HandlerContext,
  write: CommandContext<PolicySet>,
  current: RoomPolicy,
  changeId: string,
): Promise<Outcome> {
  const error = (message: string): Outcome => ({
    kind: "command-error",
    message,
    helpLine: `usage: ${USAGE}`,
  });
  const proposal = await ctx.store.getPolicyProposal(ctx.roomId, changeId);
  if (proposal === null) return error(`no proposed policy change ${quoteInput(changeId)} in this room`);
  const settled = settledProposal(proposal, await ctx.store.now());
  if (settled !== null) return error(settled);
  if (proposal.proposedBy === ctx.sender)
    return {
      kind: "refused",
      verb: "policy",
      reason: `you proposed policy change ${changeId}; the two-person rule needs another room admin to confirm it`,
      helpLine: `usage: ${USAGE}`,
    };
  const change = proposedChange(proposal);
  if (change === null) return error(`policy change ${changeId} cannot be read by this version of dagbot`);
  const next = applyPolicyChange(current, change);
  const [setting, value] = policyChangeArgs(change);
  const done = await ctx.store.setRoomPolicy(write, ctx.roomId, next, ctx.sender, {
    change: { setting, value },
    confirms: changeId,
  });
  if (done.kind === "set") {
    const confirmed = { changeId, proposedBy: proposal.proposedBy };
    return policySetOutcome({ policy: next, previous: done.previous, proposal: confirmed }, ctx.sender);
  }
  // The store's guard refused (the proposal moved on since it was read): say how it stands now.
  const now = await ctx.store.now();
  return error(
    (done.proposal === null ? null : settledProposal(done.proposal, now)) ??
      `policy change ${changeId} is no longer pending`,
  );
}

/** Why a proposal can no longer be confirmed (applied, or expired at `now`); null while it can. */
function settledProposal(p: PolicyProposal, now: number): string | null {
  if (p.status === "applied")
    return `policy change ${p.changeId} is already applied (confirmed by ${p.confirmedBy ?? "someone"})`;
  if (p.expiresAt <= now) return `policy change ${p.changeId} expired unconfirmed; propose it again`;
  return null;
}
