/**
 * How a face says an outcome: chat (HTML and plain, in the room), the CLI and HTTP (plain text).
 * Each outcome kind has one renderer (verb.ts OutcomeRenderer) that takes the face's idiom; the
 * helpers here let one sentence serve every face (docs/architecture.md §5).
 */
import type { Rendered } from "../render/html.js";
import { code, join, text, userPill } from "../render/html.js";
import { paragraphs } from "../render/blocks.js";

/** How a face names a command: `!dag confirm x` in chat, `dagbot confirm x h` on the CLI, `POST /v1/runs/x/confirm` over HTTP. */
export interface Idiom {
  command(verb: string, args: readonly string[]): string;
  /** Chat: its renderer may mark code, link users and add emoji. Absent: plain text (CLI, HTTP). */
  readonly chat?: boolean;
}

/** Chat's idiom: commands as typed in the room. */
export const CHAT_IDIOM: Idiom = { chat: true, command: (verb, args) => ["!dag", verb, ...args].join(" ") };

/** Code in the face's idiom: `<code>` in chat, the bare words on the CLI and over HTTP. */
export function codeIn(say: Idiom, value: string): Rendered {
  return say.chat === true ? code(value) : text(value);
}

/** A command of another verb, in the face's idiom, marked as code where the face marks code. */
export function commandIn(say: Idiom, verb: string, args: readonly string[]): Rendered {
  return codeIn(say, say.command(verb, args));
}

/** A user: a pill in chat, the id elsewhere. */
export function userIn(say: Idiom, user: string): Rendered {
  return say.chat === true ? userPill(user) : text(user);
}

/** A chat mark (an emoji and a space) that the text faces leave out. */
export function markIn(say: Idiom, emoji: string): string {
  return say.chat === true ? `${emoji} ` : "";
}

/** Sentences of one answer: a paragraph each in chat, one line on the CLI and over HTTP. */
export function sentencesIn(say: Idiom, parts: readonly Rendered[]): Rendered {
  return say.chat === true ? paragraphs(parts) : join(parts, " ");
}

/**
 * One renderer from a chat layout and a plain layout of the same outcome, for the kinds whose chat
 * reply is a card or list and whose plain form is a table to read in a terminal: each says the
 * outcome its own way, neither restates the other's sentences.
 */
export function byLayout<O>(
  chat: (outcome: O) => Rendered | null,
  plain: (outcome: O, say: Idiom) => string,
): (outcome: O, say: Idiom) => Rendered | null {
  return (outcome, say) => (say.chat === true ? chat(outcome) : text(plain(outcome, say)));
}
