/**
 * Every face's words for an outcome, from the one renderer of its kind: a verb's (its file under
 * verbs/), or for the answers any verb may give, common-outcomes.ts. Chat takes the HTML and plain
 * body, the CLI and HTTP the plain body in their own idiom (docs/architecture.md §5). A face built
 * from another list of verbs than the node's (a test's trial verb) passes that list.
 */
import type { Outcome } from "./outcome.js";
import type { Rendered } from "../render/html.js";
import { text } from "../render/html.js";
import type { Idiom } from "./face.js";
import { CHAT_IDIOM } from "./face.js";
import { COMMON_RENDERERS } from "./common-outcomes.js";
import type { AnyVerb, NewOutcome } from "./verb.js";
import { VERBS } from "./verbs/index.js";

/** What a renderer gives: the words, and for the CLI a line beside them (a next page). */
export type Rendition = Rendered & { readonly aside?: string };
type AnyRenderer = (outcome: Outcome, say: Idiom) => Rendition | null;
type AnyNewOutcome = NewOutcome<{ kind: string }>;

interface Renderers {
  readonly render: ReadonlyMap<string, AnyRenderer>;
  readonly own: ReadonlyMap<string, AnyNewOutcome>;
}

const built = new WeakMap<readonly AnyVerb[], Renderers>();

/** Built on first use: the verb files import render modules, so the list is complete only then. */
function renderersOf(verbs: readonly AnyVerb[] = VERBS): Renderers {
  const known = built.get(verbs);
  if (known !== undefined) return known;
  const render = new Map<string, AnyRenderer>(Object.entries(COMMON_RENDERERS) as [string, AnyRenderer][]);
  const own = new Map<string, AnyNewOutcome>();
  for (const verb of verbs) {
    for (const [kind, r] of Object.entries(verb.render)) render.set(kind, r as AnyRenderer);
    for (const [kind, o] of Object.entries(verb.outcomes ?? {}) as [string, AnyNewOutcome][]) {
      render.set(kind, o.render as AnyRenderer);
      own.set(kind, o);
    }
  }
  const renderers = { render, own };
  built.set(verbs, renderers);
  return renderers;
}

/** A verb's own outcome kind (its statuses and renderer), null for a kind of the outcome table. */
export function newOutcomeOf(kind: string, verbs?: readonly AnyVerb[]): AnyNewOutcome | null {
  return renderersOf(verbs).own.get(kind) ?? null;
}

function rendition(outcome: Outcome, say: Idiom, verbs?: readonly AnyVerb[]): Rendition | null {
  const render = renderersOf(verbs).render.get(outcome.kind);
  // Only a stored outcome of a kind this version no longer has can miss.
  return render === undefined ? text(`(an answer of kind ${outcome.kind})`) : render(outcome, say);
}

/** The reply in chat; null: the outcome deserves no reply (a reaction that was not a decision). */
export function renderOutcome(outcome: Outcome, verbs?: readonly AnyVerb[]): Rendered | null {
  const r = rendition(outcome, CHAT_IDIOM, verbs);
  return r === null ? null : { body: r.body, html: r.html };
}

/** The outcome as plain text, naming other commands in the face's idiom (CLI, HTTP). */
export function plainTextOf(outcome: Outcome, say: Idiom, verbs?: readonly AnyVerb[]): string {
  return rendition(outcome, say, verbs)?.body ?? "";
}

/** A line beside the outcome's text (a next page), or null. */
export function asideOf(outcome: Outcome, say: Idiom, verbs?: readonly AnyVerb[]): string | null {
  return rendition(outcome, say, verbs)?.aside ?? null;
}
