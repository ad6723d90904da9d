/** The issue type every DAG check reports, and the helpers that render places and values safely. */

/** One problem found in a DAG document. `path` is empty for the whole document. */
export interface DagIssue {
  /** Where, like `tasks[3].needs[0]`; "" means the document as a whole. */
  path: string;
  message: string;
}

/** `tasks[3].needs[0]: unknown task "upload"`, or the bare message for the whole document. */
export function formatIssue(issue: DagIssue): string {
  return issue.path === "" ? issue.message : `${issue.path}: ${issue.message}`;
}

const PLAIN_KEY = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Renders a path of keys and indexes: ["tasks", 3, "needs", 0] → `tasks[3].needs[0]`. */
export function formatPath(segments: readonly PropertyKey[]): string {
  let out = "";
  for (const segment of segments) {
    if (typeof segment === "number") out += `[${segment}]`;
    else if (typeof segment === "string" && PLAIN_KEY.test(segment))
      out += out === "" ? segment : `.${segment}`;
    else out += `[${quote(String(segment))}]`;
  }
  return out;
}

/**
 * Quotes a user-supplied string for a message: everything outside printable ASCII is escaped, so
 * control characters, bidi overrides and terminal escapes in a hostile document stay inert.
 */
export function quote(value: string, maxLength = 64): string {
  const cut = value.length > maxLength ? value.slice(0, maxLength) : value;
  let out = '"';
  for (const ch of cut) {
    const code = ch.codePointAt(0) ?? 0;
    if (ch === '"' || ch === "\\") out += `\\${ch}`;
    else if (code >= 0x20 && code < 0x7f) out += ch;
    else if (code <= 0xffff) out += `\\u${code.toString(16).padStart(4, "0")}`;
    else out += `\\u{${code.toString(16)}}`;
  }
  out += '"';
  return value.length > maxLength ? `${out}… (${value.length} characters)` : out;
}

/** Names a character for a message: `"!"`, or `U+0007 (a control character)`, or `"é" (U+00E9)`. */
export function describeChar(ch: string): string {
  const code = ch.codePointAt(0) ?? 0;
  const hex = `U+${code.toString(16).toUpperCase().padStart(4, "0")}`;
  if (code < 0x20 || (code >= 0x7f && code < 0xa0)) return `${hex} (a control character)`;
  if (code >= 0x20 && code < 0x7f) return `"${ch}"`;
  return `${quote(ch)} (${hex})`;
}

/** What a value is, in words: "a string", "an array", "null", "a date". */
export function describeValue(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (value instanceof Date) return "a date";
  switch (typeof value) {
    case "string":
      return "a string";
    case "number":
      return Number.isInteger(value) ? "an integer" : Number.isFinite(value) ? "a number" : String(value);
    case "boolean":
      return "a boolean";
    case "bigint":
      return "a big integer";
    case "object":
      return "a table";
    default:
      return typeof value;
  }
}

/** Edit distance where swapping two neighbours counts as one typo. Inputs are short (ids ≤ 64). */
function editDistance(a: string, b: string): number {
  let before: number[] = [];
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min((prev[j] ?? 0) + 1, (row[j - 1] ?? 0) + 1, (prev[j - 1] ?? 0) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        best = Math.min(best, (before[j - 2] ?? 0) + 1);
      }
      row.push(best);
    }
    before = prev;
    prev = row;
  }
  return prev[b.length] ?? 0;
}

/** ` (did you mean "needs"?)` when one candidate is close enough, else "". */
export function suggestion(word: string, candidates: Iterable<string>): string {
  if (word.length > 64) return "";
  let best: string | null = null;
  // Short words are too easily one edit from anything; only suggest where a typo is likely.
  let bestDistance = word.length <= 2 ? 0 : word.length <= 5 ? 1 : 2;
  for (const candidate of candidates) {
    const distance = editDistance(word.toLowerCase(), candidate.toLowerCase());
    if (candidate !== word && (distance < bestDistance || (best === null && distance === bestDistance))) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best === null ? "" : ` (did you mean ${quote(best)}?)`;
}
