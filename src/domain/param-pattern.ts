/**
 * A DAG parameter's pattern and what checking a value against it may cost.
 * Any operator writes these patterns, and the leader checks values against them while it handles a
 * command, on its event loop: an RE2 pattern is linear in the value, but the factor is the size of
 * its compiled program, and `(?:.{0,999}){0,1}` repeated 24 times compiles to 48,000 instructions
 * (2.5 s for one 1,500-character value; the leader's lease ran out meanwhile). So a pattern's size
 * is bounded before it is compiled (source length, repetition counts, an estimate of its program),
 * its program after, and a command's checks together by instructions × characters. The numbers are
 * in PATTERN_LIMITS; bench/README.md ("Parameter patterns") has what they cost.
 */
import type { RE2JS } from "re2js";
import { compileRe2 } from "./re2.js";

export const PATTERN_LIMITS = {
  /** Characters of a pattern's source. */
  maxSource: 256,
  /** The n and m of a counted repetition `{n}`, `{n,}`, `{n,m}`. */
  maxRepeat: 100,
  /** Instructions of a pattern's compiled program. */
  maxInstructions: 256,
  /**
   * Instructions × characters one command may spend on checking values (a publish its defaults, a
   * run its given values): worst cases measured at up to ~200 ns a unit, most patterns at a few ns.
   */
  maxCheckCost: 65_536,
} as const;

// The estimate below may be off by a small factor; past this the pattern is not even compiled.
const ESTIMATE_GATE = 4 * PATTERN_LIMITS.maxInstructions;

/** A compiled parameter pattern: a whole-value match, and the size its checks are charged by. */
export interface ParamPattern {
  instructions: number;
  matches(value: string): boolean;
}

const cache = new Map<string, ParamPattern | string>();

/** The pattern compiled, or why it is refused (a sentence naming the limit). */
export function compileParamPattern(source: string): ParamPattern | string {
  const known = cache.get(source);
  if (known !== undefined) return known;
  const result = compileUncached(source);
  if (cache.size >= 1000) cache.clear();
  cache.set(source, result);
  return result;
}

function compileUncached(source: string): ParamPattern | string {
  if (source.length > PATTERN_LIMITS.maxSource)
    return `is ${source.length} characters long; at most ${PATTERN_LIMITS.maxSource}`;
  const repeat = largeRepeat(source);
  if (repeat !== null)
    return `repeats ${repeat} times; a repetition count is at most ${PATTERN_LIMITS.maxRepeat}`;
  const estimate = estimateInstructions(source);
  if (estimate > ESTIMATE_GATE) return tooComplex(`about ${estimate}`);
  let re: RE2JS;
  try {
    re = compileRe2(source);
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    return `is not a valid RE2 pattern: ${message.replace(/^error parsing regexp: /, "")}`;
  }
  const instructions = re.programSize();
  if (instructions > PATTERN_LIMITS.maxInstructions) return tooComplex(String(instructions));
  // The matcher runs the bounded backtracker or the NFA (both instructions × characters at worst);
  // the DFA that `matches` prefers built its states at ~3× that cost on adversarial values.
  return { instructions, matches: (value) => re.matcher(value).matches() };
}

function tooComplex(size: string): string {
  return `is too complex: it compiles to ${size} instructions; at most ${PATTERN_LIMITS.maxInstructions} (a repetition {n,m} copies what it repeats m times)`;
}

/** What checking `value` against `pattern` costs (instructions × characters, at least 1 a value). */
export function checkCost(pattern: ParamPattern, value: string): number {
  return pattern.instructions * Math.max(1, value.length);
}

const REPEAT = /\{(\d+)(?:,(\d*))?\}/g;

/**
 * The first counted repetition over the limit, as written, or null. Read on the raw source, so a
 * `{1000}` inside a class or after an escape counts too: refusing a harmless literal is cheap, and
 * it cannot be fooled by a class this scan reads differently from RE2.
 */
function largeRepeat(source: string): string | null {
  for (const m of source.matchAll(REPEAT)) {
    const n = Number(m[1]);
    const max = m[2] === undefined || m[2] === "" ? n : Number(m[2]);
    if (n > PATTERN_LIMITS.maxRepeat || max > PATTERN_LIMITS.maxRepeat) return m[0];
  }
  return null;
}

interface Frame {
  /** The current alternative's size so far. */
  total: number;
  /** The size of its last atom, what a repetition would apply to. */
  last: number;
  /** The sizes of the alternatives before this one. */
  alternatives: number;
}

/**
 * The compiled size RE2 will give the pattern, estimated on its source without compiling (RE2's own
 * size rule: a repetition {n,m} of x costs m·size(x) + (m − n)). Compiling a pattern whose
 * repetitions multiply to 100,000 instructions is itself the stall this file is here to prevent.
 */
export function estimateInstructions(source: string): number {
  const stack: Frame[] = [{ total: 0, last: 0, alternatives: 0 }];
  const top = (): Frame => stack[stack.length - 1]!;
  const atom = (size: number): void => {
    top().total += size;
    top().last = size;
  };
  let i = 0;
  while (i < source.length) {
    const c = source[i]!;
    if (c === "\\") {
      i = skipEscape(source, i);
      atom(1);
      continue;
    }
    if (c === "[") {
      i = skipClass(source, i);
      atom(1);
      continue;
    }
    if (c === "(") {
      stack.push({ total: 0, last: 0, alternatives: 0 });
      i++;
      continue;
    }
    if (c === ")" && stack.length > 1) {
      const group = stack.pop()!;
      atom(group.alternatives + group.total + 2);
      i++;
      continue;
    }
    if (c === "|") {
      const f = top();
      f.alternatives += f.total + 1;
      f.total = 0;
      f.last = 0;
      i++;
      continue;
    }
    if (c === "*" || c === "+" || c === "?") {
      const extra = c === "*" ? 2 : 1;
      top().total += extra;
      top().last += extra;
      i++;
      continue;
    }
    if (c === "{") {
      const m = /^\{(\d+)(?:,(\d*))?\}/.exec(source.slice(i, i + 16));
      if (m !== null) {
        const min = Math.min(Number(m[1]), 1_000_000);
        const max = m[2] === undefined ? min : m[2] === "" ? -1 : Math.min(Number(m[2]), 1_000_000);
        const f = top();
        const size = max === -1 ? (min === 0 ? 2 : min) * f.last + 2 : max * f.last + (max - min);
        f.total += size - f.last;
        f.last = size;
        i += m[0].length;
        continue;
      }
    }
    atom(1);
    i++;
  }
  let size = 0;
  for (const f of stack) size += f.alternatives + f.total;
  return size;
}

/** Past an escape: `\x{...}`, `\p{...}`, `\Q...\E` (counted as one atom: an overestimate is fine). */
function skipEscape(source: string, i: number): number {
  const next = source[i + 1];
  if (next === undefined) return i + 1;
  if ((next === "x" || next === "p" || next === "P") && source[i + 2] === "{") {
    const end = source.indexOf("}", i + 3);
    return end < 0 ? source.length : end + 1;
  }
  if (next === "Q") {
    const end = source.indexOf("\\E", i + 2);
    return end < 0 ? source.length : end + 2;
  }
  return i + 2;
}

/** Past a character class `[...]`: a `]` first is literal, `[:name:]` and escapes are skipped. */
function skipClass(source: string, i: number): number {
  let j = i + 1;
  if (source[j] === "^") j++;
  if (source[j] === "]") j++;
  while (j < source.length && source[j] !== "]") {
    if (source[j] === "\\") j = skipEscape(source, j);
    else if (source.startsWith("[:", j)) {
      const end = source.indexOf(":]", j + 2);
      j = end < 0 ? j + 1 : end + 2;
    } else j++;
  }
  return j + 1;
}
