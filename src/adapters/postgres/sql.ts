/**
 * SQL fragments and value helpers shared by the PostgreSQL adapter's modules: the store's clock,
 * the event-log lock key, text cleaning and the mapping of driver errors to the port's errors.
 */
export { mapError } from "../store-common/checks.js";
export { LOG_LOCK, NOW } from "../store-common/postgres-text.js";

export const quoteIdent = (name: string): string => `"${name.replaceAll('"', '""')}"`;

export { sessionKey } from "../store-common/records.js";

/** A UTF-16 surrogate without its other half: JSON.stringify escapes it as \udXXX, which jsonb refuses. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
const SURROGATE = /[\uD800-\uDFFF]/;

/**
 * JSON and text from chat or a process may hold U+0000 or lone surrogates (legal JSON escapes),
 * which PostgreSQL text and jsonb refuse; replace them with U+FFFD so a stray character in a
 * command or an action's output never makes a write fail (intake would retry such an insert forever).
 */
export function cleanText(s: string): string;
export function cleanText(s: string | null): string | null;
export function cleanText(s: string | null): string | null {
  if (s === null) return s;
  const noNul = s.includes("\u0000") ? s.replaceAll("\u0000", "\uFFFD") : s;
  return SURROGATE.test(noNul) ? noNul.replace(LONE_SURROGATE, "\uFFFD") : noNul;
}

export function clean<T>(v: T): T {
  if (typeof v === "string") return cleanText(v) as T;
  if (Array.isArray(v)) return v.map(clean) as T;
  if (v !== null && typeof v === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) out[cleanText(k)] = clean(x);
    return out as T;
  }
  return v;
}

export const json = (v: unknown): string => JSON.stringify(clean(v));
