/**
 * The reply to a command, rendered from its stored outcome alone (no store reads), so the same
 * outcome always renders the same reply. Each verb renders its own outcomes (verbs/*.ts); the
 * answers any verb may give (an error, a refusal, not found, not the leader) are rendered here.
 * `null` means the outcome deserves no reply (a reaction that was not a decision).
 */
import type { Outcome, OutcomeKind } from "../commands/outcome.js";
import type { OutcomeRenderers, RenderedKindOf } from "../commands/verb.js";
import { GENERAL_HELP_LINE } from "../../domain/command-grammar.js";
import { VERBS } from "../commands/verbs/index.js";
import { paragraphs, usage } from "./blocks.js";
import type { Rendered } from "./html.js";
import { code, join, r, text } from "./html.js";

const COMMON_RENDERERS = {
  "command-error": renderCommandError,
  refused: (o) => paragraphs([r`⛔ ${o.reason}`, usage(o.helpLine)]),
  "not-found": renderNotFound,
  "not-leader": (o) =>
    r`This node does not lead room ${code(o.roomId)} right now, so it cannot change anything there; try again in a moment or send the command in the room.`,
  undecryptable: () =>
    r`🔒 I could not decrypt your message, so I cannot tell whether it was a command. If it was, please send it again. (Your client may not have shared the room key with this bot's session; I say this at most once every 10 minutes.)`,
  "edit-not-applied": () =>
    r`✏️ Edits are not applied: dagbot acts on a command as it was first sent, whatever the edit shows. To change it, send the command again as a new message (for a DAG: publish again).`,
  quarantined: (o) =>
    r`⛔ This command was dropped: it took the room's leader down ${o.losses === 2 ? "twice" : `${o.losses} times`} (the leader lost its lease while handling it), so no node will handle it again. If it should work, send a simpler version of it; the node's log has the details.`,
  ignored: () => null,
  // Answered by a reaction on the ask (inbox-step.ts, rateLimitedReaction), not by a message.
  "rate-limited": () => null,
} satisfies OutcomeRenderers<
  | "command-error"
  | "refused"
  | "not-found"
  | "not-leader"
  | "undecryptable"
  | "edit-not-applied"
  | "quarantined"
  | "ignored"
  | "rate-limited"
>;

// Every outcome kind has a renderer, a verb's or a common one: a kind without one does not compile.
type Unrendered = Exclude<
  OutcomeKind,
  RenderedKindOf<(typeof VERBS)[number]> | keyof typeof COMMON_RENDERERS
>;
const _everyKindRendered: [Unrendered] extends [never] ? true : Unrendered = true;

type AnyRenderer = (outcome: Outcome) => Rendered | null;
let renderers: ReadonlyMap<string, AnyRenderer> | null = null;

/** Built on first use: the verb files import render modules, so the list is complete only then. */
function rendererTable(): ReadonlyMap<string, AnyRenderer> {
  const table = new Map<string, AnyRenderer>(Object.entries(COMMON_RENDERERS) as [string, AnyRenderer][]);
  for (const verb of VERBS)
    for (const [kind, render] of Object.entries(verb.render)) table.set(kind, render as AnyRenderer);
  return table;
}

export function renderOutcome(outcome: Outcome): Rendered | null {
  renderers ??= rendererTable();
  const render = renderers.get(outcome.kind);
  // Only a stored outcome of a kind this version no longer has can miss.
  return render === undefined ? text(`(an answer of kind ${outcome.kind})`) : render(outcome);
}

function renderNotFound(outcome: Extract<Outcome, { kind: "not-found" }>): Rendered {
  const guess = outcome.didYouMean === null ? text("") : r` Did you mean ${code(outcome.didYouMean)}?`;
  if (outcome.taskId === null) {
    return r`No run named ${code(outcome.dagId)} in this room.${guess} ${code("!dag list")} shows the runs.`;
  }
  const known = join(
    outcome.known.map((t) => code(t)),
    ", ",
  );
  return r`Run ${code(outcome.dagId)} has no task named ${code(outcome.taskId)}.${guess} Its tasks: ${known}.`;
}

/**
 * A malformed command's answer: what is wrong, then how to fix it. A mistyped verb gets the command
 * as it was meant, to copy; an unknown one the pointer to `!dag help` rather than every verb.
 */
function renderCommandError(o: Extract<Outcome, { kind: "command-error" }>): Rendered {
  const fix =
    o.corrected === undefined
      ? o.helpLine === GENERAL_HELP_LINE
        ? r`${code("!dag help")} lists the commands.`
        : usage(o.helpLine)
      : o.corrected.partial
        ? r`Did you mean ${code(o.corrected.command)}? Send it again with the rest of your message.`
        : r`Did you mean ${code(o.corrected.command)}?`;
  return paragraphs([r`⚠️ ${o.message}`, fix]);
}
