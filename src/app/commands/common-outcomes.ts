/**
 * The renderers of the answers any verb may give (an error, a refusal, not found, not the leader, a
 * dropped command), for every face; each verb renders its own outcomes in its file (verbs/*.ts).
 * Renderers read only the stored outcome, so the same outcome always renders the same words.
 */
import { GENERAL_HELP_LINE } from "../../domain/command-grammar.js";
import { retryWords } from "../picture-budget.js";
import { paragraphs, usage } from "../render/blocks.js";
import { code, join, r, text } from "../render/html.js";
import type { Rendered } from "../render/html.js";
import type { Idiom } from "./face.js";
import { codeIn, commandIn, markIn } from "./face.js";
import type { Outcome, OutcomeKind } from "./outcome.js";
import type { OutcomeRenderers, RenderedKindOf } from "./verb.js";
import type { VERBS } from "./verbs/index.js";

export const COMMON_RENDERERS = {
  "command-error": renderCommandError,
  refused: (o, say) =>
    say.chat === true ? paragraphs([r`⛔ ${o.reason}`, usage(o.helpLine)]) : text(o.reason),
  "not-found": renderNotFound,
  "not-leader": (o, say) =>
    r`This node does not lead room ${codeIn(say, o.roomId)} right now, so it cannot change anything there; try again in a moment${
      say.chat === true ? " or send the command in the room" : ""
    }.`,
  // Chat's answers to what only chat sends (an encrypted message, an edit, a reaction): the other
  // faces never see them, and say only what they were if they do.
  undecryptable: (_o, say) =>
    say.chat === true
      ? r`🔒 I could not decrypt your message, so I cannot tell whether it was a command. If it was, please send it again. (Your client may not have shared the room key with this bot's session; I say this at most once every 10 minutes.)`
      : text("The command could not be decrypted."),
  "edit-not-applied": (_o, say) =>
    say.chat === true
      ? r`✏️ Edits are not applied: dagbot acts on a command as it was first sent, whatever the edit shows. To change it, send the command again as a new message (for a DAG: publish again).`
      : text("Edits are not applied."),
  quarantined: (o, say) =>
    r`${markIn(say, "⛔")}This command was dropped: it took the room's leader down ${
      o.losses === 2 ? "twice" : `${o.losses} times`
    } (the leader lost its lease while handling it), so no node will handle it again. If it should work, send a simpler version of it; the node's log has the details.`,
  ignored: (o, say) => (say.chat === true ? null : text(`Ignored: ${o.why}.`)),
  // In chat, answered by a reaction on the ask (inbox-step.ts, rateLimitedReaction), not by a message.
  "rate-limited": (o, say) =>
    say.chat === true
      ? null
      : text(`Over the ${o.verb} rate limit: try again in ${retryWords(o.retryAfterMs)}.`),
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

function renderNotFound(o: Extract<Outcome, { kind: "not-found" }>, say: Idiom): Rendered {
  const guess = o.didYouMean === null ? text("") : r` Did you mean ${codeIn(say, o.didYouMean)}?`;
  if (o.dag === true)
    return r`There is no DAG or run ${say.chat === true ? code(o.dagId) : `"${o.dagId}"`} in this room.${guess}`;
  if (o.taskId === null)
    return r`No run named ${codeIn(say, o.dagId)} in this room.${guess} ${commandIn(say, "list", [])} shows the runs.`;
  const known = join(
    o.known.map((t) => codeIn(say, t)),
    ", ",
  );
  return r`Run ${codeIn(say, o.dagId)} has no task named ${codeIn(say, o.taskId)}.${guess} Its tasks: ${known}.`;
}

/**
 * A malformed command's answer: what is wrong, then how to fix it. A mistyped verb gets the command
 * as it was meant, to copy; an unknown one the pointer to `!dag help` rather than every verb.
 */
function renderCommandError(o: Extract<Outcome, { kind: "command-error" }>, say: Idiom): Rendered {
  if (say.chat !== true)
    return text(
      o.corrected === undefined ? o.message : `${o.message} — did you mean "${o.corrected.command}"?`,
    );
  const fix =
    o.corrected === undefined
      ? o.helpLine === GENERAL_HELP_LINE
        ? r`${codeIn(say, "!dag help")} lists the commands.`
        : usage(o.helpLine)
      : o.corrected.partial
        ? r`Did you mean ${codeIn(say, o.corrected.command)}? Send it again with the rest of your message.`
        : r`Did you mean ${codeIn(say, o.corrected.command)}?`;
  return paragraphs([r`⚠️ ${o.message}`, fix]);
}
