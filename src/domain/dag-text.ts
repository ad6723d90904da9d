/**
 * From document text to a raw value: size limit, JSON and TOML parsing with line and column on
 * every syntax error, and a nesting limit. Never throws.
 */
import { parse as parseToml, TomlError } from "smol-toml";
import { DAG_LIMITS } from "./dag-schema.js";
import type { DagIssue } from "./dag-issues.js";
import { describeChar, formatPath, quote } from "./dag-issues.js";

export type DagFormat = "json" | "toml";

/** The format a file name says (`.json`, `.toml`, any case), or null when it says neither. */
export function formatFromFileName(fileName: string): DagFormat | null {
  const match = /\.(json|toml)$/i.exec(fileName);
  return match ? (match[1]!.toLowerCase() as DagFormat) : null;
}

/**
 * The format of a document: by the file name's extension when it has a known one, else by its
 * content (a JSON document is a table, so it starts with `{`; anything else is read as TOML).
 */
export function detectFormat(fileName: string | null, text: string): DagFormat {
  const byName = fileName === null ? null : formatFromFileName(fileName);
  if (byName !== null) return byName;
  return text
    .replace(/^\uFEFF/, "")
    .trimStart()
    .startsWith("{")
    ? "json"
    : "toml";
}

/** Length of `text` in UTF-8 bytes, without allocating an encoded copy. */
export function utf8Length(text: string): number {
  let bytes = 0;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code < 0x80) bytes += 1;
    else if (code < 0x800) bytes += 2;
    else if (code >= 0xd800 && code <= 0xdbff && i + 1 < text.length) {
      const low = text.charCodeAt(i + 1);
      if (low >= 0xdc00 && low <= 0xdfff) {
        bytes += 4;
        i++;
      } else bytes += 3;
    } else bytes += 3;
  }
  return bytes;
}

/** The issue for a document over the size limit; the CLI uses it too when it reads files. */
export function documentTooLarge(bytes: number, exact = true): DagIssue {
  const limit = DAG_LIMITS.maxDocumentBytes;
  return {
    path: "",
    message: `the document is ${exact ? "" : "at least "}${bytes.toLocaleString("en-US")} bytes; at most ${limit.toLocaleString("en-US")} bytes (${limit / 1024} KiB) are allowed`,
  };
}

export type TextResult = { ok: true; value: unknown } | { ok: false; issues: DagIssue[] };

/** Parses document text into a raw value, or says what is wrong with the text and where. */
export function parseDocumentText(text: string, format: DagFormat): TextResult {
  // Every UTF-16 unit is at least one UTF-8 byte, so a long string is refused without counting.
  if (text.length > 4 * DAG_LIMITS.maxDocumentBytes)
    return { ok: false, issues: [documentTooLarge(text.length, false)] };
  const bytes = utf8Length(text);
  if (bytes > DAG_LIMITS.maxDocumentBytes) return { ok: false, issues: [documentTooLarge(bytes)] };
  // Editors on some systems save a byte order mark; it is not content.
  const body = text.startsWith("\uFEFF") ? text.slice(1) : text;
  if (body.trim() === "") return { ok: false, issues: [{ path: "", message: "the document is empty" }] };
  let value: unknown;
  if (format === "json") {
    try {
      value = JSON.parse(body);
    } catch (err) {
      return { ok: false, issues: [{ path: "", message: jsonErrorMessage(body, err) }] };
    }
  } else {
    try {
      value = parseToml(body, { maxDepth: DAG_LIMITS.maxNesting });
    } catch (err) {
      return { ok: false, issues: [{ path: "", message: tomlErrorMessage(err) }] };
    }
  }
  const deep = tooDeep(value);
  return deep === null ? { ok: true, value } : { ok: false, issues: [deep] };
}

function position(text: string, offset: number): string {
  const before = text.slice(0, offset);
  const line = before.split("\n").length;
  const column = Array.from(before.slice(before.lastIndexOf("\n") + 1)).length + 1;
  return `line ${line}, column ${column}`;
}

function jsonErrorMessage(text: string, err: unknown): string {
  const located = locateJsonError(text);
  if (located !== null) return `invalid JSON at ${position(text, located.offset)}: ${located.message}`;
  // Our scanner found nothing; fall back to V8's words, minus the snippet of input it quotes.
  const raw = err instanceof Error ? err.message : String(err);
  return `invalid JSON: ${quote(raw.replace(/, ".*" is not valid JSON$/s, ""), 200).slice(1, -1)}`;
}

function tomlErrorMessage(err: unknown): string {
  if (err instanceof TomlError) {
    // The message's first line is the reason; the rest is a code block that echoes the input.
    const reason = (err.message.split("\n")[0] ?? "").replace(/^Invalid TOML document:\s*/, "");
    const clean = quote(reason, 200).slice(1, -1);
    return `invalid TOML at line ${err.line}, column ${err.column}: ${clean}`;
  }
  return `invalid TOML: ${quote(err instanceof Error ? err.message : String(err), 200).slice(1, -1)}`;
}

/** The first place where nesting passes the limit, walked without recursion. */
function tooDeep(root: unknown): DagIssue | null {
  const stack: { value: unknown; path: PropertyKey[] }[] = [{ value: root, path: [] }];
  while (stack.length > 0) {
    const { value, path } = stack.pop()!;
    if (typeof value !== "object" || value === null || value instanceof Date) continue;
    if (path.length >= DAG_LIMITS.maxNesting) {
      return {
        path: formatPath(path.slice(0, 4)),
        message: `values are nested more than ${DAG_LIMITS.maxNesting} levels deep`,
      };
    }
    for (const key of Object.keys(value)) {
      const child: unknown = Object.getOwnPropertyDescriptor(value, key)?.value;
      stack.push({ value: child, path: [...path, Array.isArray(value) ? Number(key) : key] });
    }
  }
  return null;
}

type Located = { offset: number; message: string };

const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;

/**
 * A small JSON syntax scanner, run only after JSON.parse failed, to say where and why in plain
 * words (V8 gives no position for some errors and quotes raw input in others).
 */
export function locateJsonError(text: string): Located | null {
  const stack: ("{" | "[")[] = [];
  let pos = 0;
  let state: "value" | "firstValue" | "firstKey" | "key" | "after" = "value";
  let afterComma = false;
  const skipSpace = () => {
    while (pos < text.length && " \t\n\r".includes(text[pos]!)) pos++;
  };
  const unexpected = (expected: string): Located => {
    if (pos >= text.length) return { offset: pos, message: `unexpected end of input, expected ${expected}` };
    const ch = String.fromCodePoint(text.codePointAt(pos)!);
    const trailing = afterComma && (ch === "]" || ch === "}") ? " (JSON allows no trailing comma)" : "";
    return { offset: pos, message: `unexpected ${describeChar(ch)}, expected ${expected}${trailing}` };
  };
  const scanString = (): Located | null => {
    const start = pos++;
    while (pos < text.length) {
      const code = text.charCodeAt(pos);
      if (code === 0x22) {
        pos++;
        return null;
      }
      if (code === 0x5c) {
        const next = text[pos + 1] ?? "";
        if ('"\\/bfnrt'.includes(next) && next !== "") pos += 2;
        else if (next === "u" && /^[0-9a-fA-F]{4}$/.test(text.slice(pos + 2, pos + 6))) pos += 6;
        else return { offset: pos, message: "invalid escape sequence in a string" };
      } else if (code < 0x20) {
        return { offset: pos, message: `${describeChar(text[pos]!)} inside a string; escape it` };
      } else pos++;
    }
    return { offset: start, message: "unterminated string" };
  };
  for (;;) {
    skipSpace();
    const ch = text[pos];
    if (state === "firstValue" || state === "firstKey") {
      const close = state === "firstValue" ? "]" : "}";
      if (ch === close) {
        stack.pop();
        pos++;
        state = "after";
        continue;
      }
      state = state === "firstValue" ? "value" : "key";
      continue;
    }
    if (state === "key") {
      if (ch !== '"') return unexpected("a quoted key");
      const bad = scanString();
      if (bad) return bad;
      skipSpace();
      if (text[pos] !== ":") return unexpected('":" after a key');
      pos++;
      afterComma = false;
      state = "value";
      continue;
    }
    if (state === "value") {
      if (ch === "{" || ch === "[") {
        stack.push(ch);
        pos++;
        state = ch === "{" ? "firstKey" : "firstValue";
        continue;
      }
      if (ch === '"') {
        const bad = scanString();
        if (bad) return bad;
      } else if (ch !== undefined && "-0123456789".includes(ch)) {
        NUMBER.lastIndex = pos;
        const match = NUMBER.exec(text);
        if (match === null) return { offset: pos, message: "invalid number" };
        pos = NUMBER.lastIndex;
      } else {
        const literal = ["true", "false", "null"].find((word) => text.startsWith(word, pos));
        if (literal === undefined) return unexpected("a value");
        pos += literal.length;
      }
      afterComma = false;
      state = "after";
      continue;
    }
    // state "after": a value just ended.
    const top = stack[stack.length - 1];
    if (top === undefined) return pos >= text.length ? null : unexpected("the end of the document");
    const close = top === "{" ? "}" : "]";
    if (ch === ",") {
      pos++;
      afterComma = true;
      state = top === "{" ? "key" : "value";
    } else if (ch === close) {
      stack.pop();
      pos++;
    } else return unexpected(`"," or "${close}"`);
  }
}
