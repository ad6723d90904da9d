/**
 * `name=value` words, the one grammar of a run's parameters (`!dag run ID name=value`) and a gate's
 * form (`!dag approve RUN GATE name=value`), typed in chat or given as data by the CLI and HTTP
 * (docs/architecture.md §5). A name is letters, digits and _; a value is one word, everything after
 * the first "=". Never throws.
 */
import type { Parsed } from "./command-grammar.js";
import { fail, ok, unquote } from "./command-grammar.js";
import { quoteInput } from "./command-text.js";

export type Pair = [name: string, value: string];

/** What a verb's pairs are called in its refusals. */
export interface PairWords {
  readonly verb: string;
  /** One word of the pair in a refusal: "parameter" (a run's) or "value" (a gate form's). */
  readonly word: string;
  /** The same, counted: "parameters", "values". */
  readonly plural: string;
  /** What a name must be: "a parameter the DAG declares", "a field of the gate's form". */
  readonly nameOf: string;
  /** What a value is: "a parameter value", "a form value". */
  readonly valueOf: string;
  /** What each name is, said when one is given twice: "parameter", "field". */
  readonly each: string;
}

/** At most this many pairs in one command (a DAG declares at most 32 parameters, a form 32 fields). */
export const MAX_PAIRS = 32;
const NAME = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;
const ONE_WORD = /^[^\s]*$/;

/**
 * What the CLI gives for a word without "=": no value anyone could send (it holds a NUL), so the
 * check of the data refuses it naming the word, as chat does.
 */
const NO_VALUE = "\u0000";

/** A CLI word as a pair, "=" or not: the pairs' check names a word without one. */
export function cliPair(word: string): Pair {
  const eq = word.indexOf("=");
  return eq < 0 ? [word, NO_VALUE] : [word.slice(0, eq), word.slice(eq + 1)];
}

const badName = (w: PairWords, shown: string): Parsed<never> =>
  fail(
    "bad-argument",
    w.verb,
    `bad ${w.word} ${quoteInput(shown)}: write name=value, the name ${w.nameOf} (letters, digits, _)`,
  );

/** The checks every pair passes, typed or given as data. */
function checked(pairs: readonly Pair[], w: PairWords, shown: (i: number) => string): Parsed<Pair[]> {
  if (pairs.length > MAX_PAIRS)
    return fail("extra-argument", w.verb, `${pairs.length} ${w.plural} given; at most ${MAX_PAIRS}`);
  const seen = new Set<string>();
  for (const [i, [name, value]] of pairs.entries()) {
    if (!NAME.test(name) || value === NO_VALUE) return badName(w, shown(i));
    if (!ONE_WORD.test(value))
      return fail(
        "bad-argument",
        w.verb,
        `bad value for ${name}: ${w.valueOf} is one word (no spaces or line breaks)`,
      );
    if (seen.has(name))
      return fail("bad-argument", w.verb, `${name} is given twice: give each ${w.each} once`);
    seen.add(name);
  }
  return ok([...pairs]);
}

/** The words typed after the verb's ids: each `name=value`, quotes around a word or a value dropped. */
export function pairsFromWords(words: readonly string[], w: PairWords): Parsed<Pair[]> {
  const pairs: Pair[] = [];
  for (const raw of words) {
    const token = unquote(raw);
    const eq = token.indexOf("=");
    pairs.push(eq < 0 ? [token, NO_VALUE] : [token.slice(0, eq), unquote(token.slice(eq + 1))]);
  }
  return checked(pairs, w, (i) => words[i] ?? "");
}

/** The pairs given as data (CLI, HTTP): a list of [name, value] pairs of strings, checked as typed ones. */
export function pairsFromData(given: unknown, field: string, w: PairWords): Parsed<Pair[]> {
  if (given === undefined || given === null) return ok([]);
  if (!Array.isArray(given)) return fail("bad-argument", w.verb, `${field} is a list of [name, value] pairs`);
  const pairs: Pair[] = [];
  for (const pair of given as unknown[]) {
    const [name, value] = Array.isArray(pair) ? (pair as unknown[]) : [];
    if (typeof name !== "string" || typeof value !== "string")
      return fail("bad-argument", w.verb, `${field} is a list of [name, value] pairs of strings`);
    pairs.push([name, value]);
  }
  return checked(pairs, w, (i) => pairs[i]?.[0] ?? "");
}
