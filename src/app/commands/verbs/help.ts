/** `!dag help [<command>]`: the commands the sender may use in the room, or one explained. */
import type { Parsed } from "../../../domain/command-grammar.js";
import { arity, ok, unquote } from "../../../domain/command-grammar.js";
import type { Rendered } from "../../render/html.js";
import { codeBlock, r, code, text } from "../../render/html.js";
import type { HandlerContext } from "../context.js";
import type { Outcome } from "../outcome.js";
import { mayUse } from "../permissions.js";
import type { AnyVerb } from "../verb.js";
import { defineVerb } from "../verb.js";

export interface HelpCommand {
  verb: "help";
  /** A verb to explain; null for the list. */
  topic: string | null;
}

export const help = defineVerb<HelpCommand, "help">({
  verb: "help",
  usage: "!dag help [<command>]",
  summary: "list the commands, or explain one",
  permission: "open",
  details: [],
  parse: (args, _after, grammar): Parsed<HelpCommand> => {
    const err = arity("help", args, 0, 1, "");
    if (err !== null) return err;
    const topicRaw = args[0];
    if (topicRaw === undefined) return ok({ verb: "help", topic: null });
    const topic = unquote(topicRaw).toLowerCase();
    return grammar.isVerb(topic) ? ok({ verb: "help", topic }) : grammar.unknownCommand(topicRaw);
  },
  handle: (ctx, c, verbs) => helpOutcome(ctx, c.topic, verbs),
  render: { help: renderHelp },
});

/** The commands the sender may use (the others named as hidden), or one explained. */
export function helpOutcome(ctx: HandlerContext, topic: string | null, verbs: readonly AnyVerb[]): Outcome {
  const requiredPowerLevel = ctx.policy.requiredPowerLevel;
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
    };
  }
  const allowed = verbs.filter((c) => mayUse(c, ctx.standing, ctx.policy));
  return {
    kind: "help",
    entries: allowed.map((c) => ({ verb: c.verb, usage: c.usage, summary: c.summary })),
    details: [],
    hiddenVerbs: verbs.filter((c) => !allowed.includes(c)).map((c) => c.verb),
    requiredPowerLevel,
  };
}

function renderHelp(outcome: Extract<Outcome, { kind: "help" }>): Rendered {
  const items = outcome.entries.map((e) => r`${code(e.usage)} — ${e.summary}`);
  const head = outcome.details.length > 0 ? [] : [text("Commands you may use in this room:")];
  const details = outcome.details.length > 0 ? [codeBlock(outcome.details.join("\n"))] : [];
  const hidden =
    outcome.hiddenVerbs.length === 0
      ? []
      : [
          text(
            `${outcome.hiddenVerbs.join(", ")} ${outcome.hiddenVerbs.length === 1 ? "needs" : "need"} power level ${outcome.requiredPowerLevel} in this room or a place on the allowlist.`,
          ),
        ];
  return {
    body: [...head, ...items, ...details, ...hidden].map((p) => p.body).join("\n"),
    html:
      head.map((p) => `<p>${p.html}</p>`).join("") +
      `<ul>${items.map((i) => `<li>${i.html}</li>`).join("")}</ul>` +
      details.map((d) => d.html).join("") +
      hidden.map((p) => `<p>${p.html}</p>`).join(""),
  };
}
