/** `!dag help [<command>]`: the commands the sender may use in the room, or one explained. */
import type { Parsed } from "../../../domain/command-grammar.js";
import { arity, ok, unquote } from "../../../domain/command-grammar.js";
import type { Rendered } from "../../render/html.js";
import { codeBlock, join, r, code, text } from "../../render/html.js";
import type { HandlerContext } from "../context.js";
import type { HelpGroup, Outcome } from "../outcome.js";
import { isOperator, mayUse, needsOperator } from "../permissions.js";
import type { AnyVerb, VerbGroup } from "../verb.js";
import { defineVerb, VERB_GROUPS } from "../verb.js";
import { byLayout } from "../face.js";

export interface HelpCommand {
  verb: "help";
  /** A verb to explain; null for the list. */
  topic: string | null;
}

export const help = defineVerb<HelpCommand, "help">({
  verb: "help",
  usage: "!dag help [<command>]",
  summary: "list the commands, or explain one",
  group: "help",
  permission: "open",
  details: [],
  parse: (args, _after, grammar): Parsed<HelpCommand> => {
    const err = arity("help", args, 0, 1, "");
    if (err !== null) return err;
    const topicRaw = args[0];
    if (topicRaw === undefined) return ok({ verb: "help", topic: null });
    const topic = unquote(topicRaw).toLowerCase();
    return grammar.isVerb(topic)
      ? ok({ verb: "help", topic })
      : grammar.unknownCommand(topicRaw, (verb) => ({ command: `!dag help ${verb}`, partial: false }));
  },
  handle: (ctx, c, verbs) => helpOutcome(ctx, c.topic, verbs),
  render: {
    help: byLayout(renderHelp, (o) => o.entries.map((e) => `${e.verb} — ${e.summary}`).join("\n")),
  },
});

/**
 * The commands by what people do with them (each verb's `group`), each marked when the room keeps
 * it to operators, and whether the sender is one; or one command explained.
 */
export function helpOutcome(ctx: HandlerContext, topic: string | null, verbs: readonly AnyVerb[]): Outcome {
  const requiredPowerLevel = ctx.policy.requiredPowerLevel;
  const operator = isOperator(ctx.standing, ctx.policy);
  if (topic !== null) {
    const info = verbs.find((v) => v.verb === topic);
    if (info === undefined)
      return { kind: "command-error", message: `unknown command ${topic}`, helpLine: "" };
    const allowed = mayUse(info, ctx.standing, ctx.policy);
    return {
      kind: "help",
      entries: [{ verb: topic, usage: info.usage, summary: info.summary }],
      details: info.details.length > 0 ? [...info.details] : [],
      hiddenVerbs: allowed ? [] : [topic],
      requiredPowerLevel,
      operator,
      operatorOnly: needsOperator(info, ctx.policy),
    };
  }
  const allowed = verbs.filter((c) => mayUse(c, ctx.standing, ctx.policy));
  const groups = (Object.keys(VERB_GROUPS) as VerbGroup[])
    .filter((g) => g !== "help")
    .map((g) => ({
      title: VERB_GROUPS[g],
      verbs: verbs
        .filter((v) => v.group === g)
        .map((v) => ({ verb: v.verb, operator: needsOperator(v, ctx.policy) })),
    }))
    .filter((g) => g.verbs.length > 0);
  return {
    kind: "help",
    entries: allowed.map((c) => ({ verb: c.verb, usage: c.usage, summary: c.summary })),
    details: [],
    hiddenVerbs: verbs.filter((c) => !allowed.includes(c)).map((c) => c.verb),
    requiredPowerLevel,
    groups,
    operator,
  };
}

const LOCK = "🔒";

function renderHelp(outcome: Extract<Outcome, { kind: "help" }>): Rendered {
  if (outcome.groups !== undefined) return renderGroups(outcome, outcome.groups);
  const items = outcome.entries.map((e) => r`${code(e.usage)} — ${e.summary}`);
  const head = outcome.details.length > 0 ? [] : [text("Commands you may use in this room:")];
  const details = outcome.details.length > 0 ? [codeBlock(outcome.details.join("\n"))] : [];
  const who =
    outcome.operatorOnly === undefined
      ? outcome.hiddenVerbs.length === 0
        ? []
        : [
            text(
              `${outcome.hiddenVerbs.join(", ")} ${outcome.hiddenVerbs.length === 1 ? "needs" : "need"} power level ${outcome.requiredPowerLevel} in this room or a place on the allowlist.`,
            ),
          ]
      : [
          text(
            outcome.operatorOnly
              ? `${LOCK} Operators only here: power level ${outcome.requiredPowerLevel} or a place on the allowlist; ${outcome.operator === true ? "you are one" : "you are not one"}.`
              : "Anyone in the room may use it.",
          ),
        ];
  return {
    body: [...head, ...items, ...details, ...who].map((p) => p.body).join("\n"),
    html:
      head.map((p) => `<p>${p.html}</p>`).join("") +
      `<ul>${items.map((i) => `<li>${i.html}</li>`).join("")}</ul>` +
      details.map((d) => d.html).join("") +
      who.map((p) => `<p>${p.html}</p>`).join(""),
  };
}

/**
 * `!dag help`: a few lines, one per group of what people do, each verb marked 🔒 when the room keeps
 * it to operators; whether the sender is one; how to ask about one command.
 */
function renderGroups(outcome: Extract<Outcome, { kind: "help" }>, groups: readonly HelpGroup[]): Rendered {
  const you = outcome.operator === true ? "you are one" : "you are not one";
  // A title first: it is what a preview, a notification and a reply's quote show.
  const title = text("dagbot commands");
  const key = text(
    `${LOCK} needs an operator (power level ${outcome.requiredPowerLevel} or a place on the allowlist; ${you}).`,
  );
  const lines = groups.map(
    (g) =>
      r`${g.title}: ${join(
        g.verbs.map((v) => (v.operator ? r`${code(v.verb)} ${LOCK}` : code(v.verb))),
        ", ",
      )}`,
  );
  const tail = r`${code("!dag help <command>")} explains one, e.g. ${code("!dag help publish")}.`;
  return {
    body: [title, ...lines, key, tail].map((p) => p.body).join("\n"),
    html:
      `<p><b>${title.html}</b></p>` +
      `<ul>${lines.map((l) => `<li>${l.html}</li>`).join("")}</ul>` +
      `<p>${key.html}</p>` +
      `<p>${tail.html}</p>`,
  };
}
