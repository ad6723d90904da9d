/**
 * The `!dag` command grammar (DESIGN.md §5): a Matrix message (or a CLI/HTTP string) parsed into a
 * typed command, "not a command" for ordinary chat, or a typed error that carries the help line.
 *
 * Grammar: optional reply fallback, then `!dag` (any case) followed by whitespace or the end, then a
 * verb (any case) and its arguments separated by any whitespace. `publish` takes a library name, or a
 * fenced code block (```json, ```toml, or ``` sniffed: `{`/`[` means JSON, else TOML), or unfenced
 * JSON starting with `{`. Arguments may be wrapped in one pair of `backticks` or quotes, as people copy
 * ids from the bot's own messages. `!dag` alone is help. Never throws.
 */
import type { ArgSpec, CommandVerb } from "./command-table.js";
import { MAX_CAP, commandInfo, helpLineFor, isCommandVerb, suggestVerb } from "./command-table.js";
import { htmlToText, quoteInput, stripReplyFallback, utf8Length } from "./command-text.js";
import { ID_PATTERN } from "./dag-schema.js";

/** A command message may be at most this many UTF-8 bytes; a DAG document has the same limit. */
export const MAX_COMMAND_BYTES = 64 * 1024;
/** Run and task ids: the DAG documents' own pattern, so any id a DAG may have can be named. */
export const COMMAND_ID_PATTERN = ID_PATTERN;
/** Library names are ids that do not start with `.` or `-`, so `.`, `..` and option-like names are out. */
export const LIBRARY_NAME_PATTERN = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$/;
/** The Matrix HTML format; other formats' bodies are ignored. */
export const MATRIX_HTML_FORMAT = "org.matrix.custom.html";
/** How much of a content hash the bot shows, and the least a confirmation may give. */
export const SHORT_HASH_LENGTH = 12;
export const MIN_HASH_PREFIX = 8;
export const HASH_PREFIX_PATTERN = new RegExp(`^[0-9a-fA-F]{${MIN_HASH_PREFIX},64}$`);

/** The part of a content hash that cards and replies show. */
export const shortHash = (hash: string): string => hash.slice(0, SHORT_HASH_LENGTH);

export type PublishSource =
  { kind: "inline"; format: "json" | "toml"; text: string } | { kind: "library"; name: string };

export type Command =
  | { verb: "help"; topic: CommandVerb | null }
  | { verb: "publish"; source: PublishSource }
  /** `params`: name=value pairs in the order given (checked against the DAG's declarations later). */
  | { verb: "run"; id: string; params: Array<[string, string]> }
  /** `hash`: a prefix of the content hash the confirmer saw (on the card), lower case; null when not given. */
  | { verb: "confirm"; id: string; hash: string | null }
  | { verb: "reject"; id: string }
  | { verb: "cancel"; id: string }
  | { verb: "status"; id: string | null }
  | { verb: "list"; id?: string | null }
  | { verb: "schedules" }
  | { verb: "logs"; id: string; task: string }
  | { verb: "graph"; id: string }
  | { verb: "retry"; id: string }
  /** `verbose`: also the leader's term and lease, which a person rarely needs. */
  | { verb: "nodes"; verbose?: boolean }
  | { verb: "cap"; n: number }
  | { verb: "policy"; change: PolicyChange | null };

/** One change of the room's policy; each sets a value, so applying it twice changes nothing more. */
export type PolicyChange =
  | { setting: "power_level"; value: number }
  | { setting: "two_person_rule"; value: boolean }
  | { setting: "logs"; value: "operators" | "anyone" }
  | { setting: "allow" | "auto_confirm"; op: "add" | "remove"; user: string };

export type CommandErrorCode =
  | "too-large"
  | "unknown-command"
  | "missing-command"
  | "missing-argument"
  | "extra-argument"
  | "bad-id"
  | "bad-name"
  | "bad-number"
  | "missing-source"
  | "unclosed-code-block"
  | "unsupported-format"
  | "empty-code-block"
  | "text-outside-code-block"
  | "unexpected-code-block"
  | "bad-hash"
  | "formatted-mismatch"
  | "bad-argument";

export interface CommandError {
  code: CommandErrorCode;
  /** One sentence naming the problem, quoting (shortened, sanitised) what was typed. */
  message: string;
  /** The usage line of the verb, or the general one when the verb is unknown. */
  helpLine: string;
  /** The verb when it was recognised, so a handler can still apply its permission rule. */
  verb: CommandVerb | null;
}

export type ParseCommandResult =
  { kind: "command"; command: Command } | { kind: "not-a-command" } | { kind: "error"; error: CommandError };

export interface CommandInput {
  body: string;
  formattedBody?: string | null;
  format?: string | null;
}

type Parsed = { kind: "command"; command: Command } | { kind: "error"; error: CommandError };

const fail = (code: CommandErrorCode, verb: CommandVerb | null, message: string): Parsed => ({
  kind: "error",
  error: { code, message, helpLine: helpLineFor(verb), verb },
});
const ok = (command: Command): Parsed => ({ kind: "command", command });

/** Index just past `!dag` when the text (after leading whitespace) starts with it, else -1. */
function prefixEnd(text: string): number {
  const start = text.search(/\S/);
  if (start < 0) return -1;
  if (text.slice(start, start + 4).toLowerCase() !== "!dag") return -1;
  const after = text[start + 4];
  return after === undefined || /\s/.test(after) ? start + 4 : -1;
}

function unquote(token: string): string {
  if (token.length >= 2) {
    const first = token[0];
    if ((first === "`" || first === '"' || first === "'") && token.endsWith(first)) return token.slice(1, -1);
  }
  return token;
}

const splitArgs = (text: string): string[] => text.split(/\s+/).filter((t) => t !== "");

const ID_RULE = "1 to 64 characters of A-Z a-z 0-9 _ . -";

function checkId(verb: CommandVerb, what: string, raw: string): string | Parsed {
  const id = unquote(raw);
  if (COMMAND_ID_PATTERN.test(id)) return id;
  return fail("bad-id", verb, `bad ${what} ${quoteInput(raw)}: an id is ${ID_RULE}`);
}

const ARG_WORDS: Record<number, string> = { 0: "no arguments", 1: "one argument", 2: "two arguments" };

function arity(verb: CommandVerb, args: string[], min: number, max: number, missing: string): Parsed | null {
  if (args.length < min) return fail("missing-argument", verb, `missing ${missing}: !dag ${verb} needs it`);
  const extra = args[max];
  if (extra !== undefined) {
    const takes = min === max ? (ARG_WORDS[max] ?? `${max} arguments`) : `at most ${ARG_WORDS[max] ?? max}`;
    return fail("extra-argument", verb, `unexpected ${quoteInput(extra)}: !dag ${verb} takes ${takes}`);
  }
  return null;
}

function parseCap(raw: string): Parsed {
  const text = unquote(raw);
  const n = /^\d{1,6}$/.test(text) ? Number.parseInt(text, 10) : NaN;
  if (!Number.isInteger(n) || n > MAX_CAP) {
    return fail(
      "bad-number",
      "cap",
      `bad cap ${quoteInput(raw)}: expected a whole number from 0 to ${MAX_CAP}`,
    );
  }
  return ok({ verb: "cap", n });
}

const POLICY_USER = /^@[^:\s]+:\S+$/;

function parsePolicyChange(rawSetting: string, rawValue: string): Parsed {
  const setting = unquote(rawSetting).toLowerCase();
  const value = unquote(rawValue);
  const bad = (expected: string): Parsed =>
    fail("bad-argument", "policy", `bad value ${quoteInput(rawValue)} for ${setting}: expected ${expected}`);
  switch (setting) {
    case "power_level": {
      const n = /^\d{1,3}$/.test(value) ? Number.parseInt(value, 10) : NaN;
      return n >= 0 && n <= 100 ? ok({ verb: "policy", change: { setting, value: n } }) : bad("0 to 100");
    }
    case "two_person_rule": {
      const on = ["on", "true", "yes"].includes(value.toLowerCase());
      const off = ["off", "false", "no"].includes(value.toLowerCase());
      return on || off ? ok({ verb: "policy", change: { setting, value: on } }) : bad("on or off");
    }
    case "logs":
      return value === "operators" || value === "anyone"
        ? ok({ verb: "policy", change: { setting, value } })
        : bad("operators or anyone");
    case "allow":
    case "auto_confirm": {
      const op = value.startsWith("+") ? "add" : value.startsWith("-") ? "remove" : null;
      const user = value.slice(1);
      return op !== null && POLICY_USER.test(user)
        ? ok({ verb: "policy", change: { setting, op, user } })
        : bad("+@user:server or -@user:server");
    }
    default:
      return fail(
        "bad-argument",
        "policy",
        `unknown setting ${quoteInput(rawSetting)}: use power_level, two_person_rule, logs, allow or auto_confirm`,
      );
  }
}

interface Fence {
  info: string;
  content: string;
  rest: string;
}

/** Reads the fenced block opening at `start`; the closing fence is the first line that begins with it. */
function readFence(s: string, start: number): Fence | Parsed {
  let k = start;
  while (s[k] === "`") k += 1;
  const marker = s.slice(start, k);
  const nl = s.indexOf("\n", k);
  const sameLine = s.indexOf(marker, k);
  if (sameLine >= 0 && (nl < 0 || sameLine < nl)) {
    // A one-line block: ```{"id": "x", ...}``` or ```json {...}```.
    const inner = s.slice(k, sameLine);
    const lang = /^(json|toml)\s/i.exec(inner);
    return {
      info: lang?.[1] ?? "",
      content: lang === null ? inner : inner.slice(lang[0].length),
      rest: s.slice(sameLine + marker.length),
    };
  }
  if (nl < 0) return fail("unclosed-code-block", "publish", "the code block is not closed: end it with ```");
  const info = s.slice(k, nl).trim();
  const contentStart = nl + 1;
  let lineStart = contentStart;
  for (;;) {
    const lineEnd = s.indexOf("\n", lineStart);
    const line = s.slice(lineStart, lineEnd < 0 ? s.length : lineEnd);
    const body = line.trimStart();
    if (body.startsWith(marker)) {
      const content = s.slice(contentStart, lineStart).replace(/\r?\n$/, "");
      const rest = s.slice(lineStart + (line.length - body.length) + marker.length);
      return { info, content, rest };
    }
    if (lineEnd < 0) break;
    lineStart = lineEnd + 1;
  }
  // No closing line: accept a fence glued to the last line (`}```), as people type it.
  const last = s.lastIndexOf(marker);
  if (last >= contentStart && s.slice(last + marker.length).trim() === "") {
    return { info, content: s.slice(contentStart, last), rest: "" };
  }
  return fail("unclosed-code-block", "publish", "the code block is not closed: end it with a line of ```");
}

function parsePublish(after: string): Parsed {
  const fenceAt = after.indexOf("```");
  if (fenceAt < 0) {
    const trimmed = after.trim();
    if (trimmed === "") {
      return fail(
        "missing-source",
        "publish",
        "publish needs a DAG: a library name or a ```json / ```toml code block",
      );
    }
    if (trimmed.startsWith("{"))
      return ok({ verb: "publish", source: { kind: "inline", format: "json", text: trimmed } });
    const args = splitArgs(trimmed);
    const arityError = arity("publish", args, 1, 1, "<name>");
    if (arityError !== null) return arityError;
    const raw = args[0] ?? "";
    const name = unquote(raw);
    if (!LIBRARY_NAME_PATTERN.test(name)) {
      return fail(
        "bad-name",
        "publish",
        `bad library name ${quoteInput(raw)}: ${ID_RULE}, not starting with . or -`,
      );
    }
    return ok({ verb: "publish", source: { kind: "library", name } });
  }
  const before = after.slice(0, fenceAt).trim();
  if (before !== "") {
    const message = LIBRARY_NAME_PATTERN.test(unquote(before))
      ? `give a library name or a code block, not both (${quoteInput(before)} and a block)`
      : `unexpected text ${quoteInput(before)} before the code block`;
    return fail("text-outside-code-block", "publish", message);
  }
  const fence = readFence(after, fenceAt);
  if ("kind" in fence) return fence;
  const rest = fence.rest.trim();
  if (rest !== "") {
    return fail(
      "text-outside-code-block",
      "publish",
      `unexpected text ${quoteInput(rest)} after the code block: send one block per publish`,
    );
  }
  const lang = (splitArgs(fence.info)[0] ?? "").toLowerCase();
  if (lang !== "" && lang !== "json" && lang !== "toml") {
    return fail(
      "unsupported-format",
      "publish",
      `unsupported code block language ${quoteInput(lang)}: use json or toml`,
    );
  }
  const head = fence.content.trimStart();
  if (head === "")
    return fail("empty-code-block", "publish", "the code block is empty: put the DAG document in it");
  const format =
    lang === "json" || lang === "toml"
      ? lang
      : head.startsWith("{") || head.startsWith("[")
        ? "json"
        : "toml";
  return ok({ verb: "publish", source: { kind: "inline", format, text: fence.content } });
}

/** Parses text that starts with `!dag` at `from` (the index just past it). */
function parseAfterPrefix(text: string, from: number): Parsed {
  const bytes = utf8Length(text);
  if (bytes > MAX_COMMAND_BYTES) {
    return fail(
      "too-large",
      null,
      `the message is ${bytes} bytes; a command may be at most ${MAX_COMMAND_BYTES} bytes (64 KiB)`,
    );
  }
  const rest = text.slice(from);
  const verbMatch = /^\s*([^\s`]*)/.exec(rest);
  const verbRaw = verbMatch?.[1] ?? "";
  const after = rest.slice(verbMatch?.[0].length ?? 0);
  if (verbRaw === "") {
    if (after.includes("```")) {
      return fail("missing-command", "publish", "a code block needs a command before it: !dag publish");
    }
    return ok({ verb: "help", topic: null });
  }
  const verb = verbRaw.toLowerCase();
  if (!isCommandVerb(verb)) return unknownCommand(verbRaw);
  if (verb === "publish") return parsePublish(after);
  if (after.includes("```")) {
    return fail("unexpected-code-block", verb, `!dag ${verb} takes no code block; only publish does`);
  }
  const args = splitArgs(after);
  const declared = commandInfo(verb).args;
  if (declared !== undefined) return parseDeclared(verb, declared, args);
  switch (verb) {
    case "help": {
      const err = arity(verb, args, 0, 1, "");
      if (err !== null) return err;
      const topicRaw = args[0];
      if (topicRaw === undefined) return ok({ verb: "help", topic: null });
      const topic = unquote(topicRaw).toLowerCase();
      return isCommandVerb(topic) ? ok({ verb: "help", topic }) : unknownCommand(topicRaw);
    }
    case "nodes": {
      const err = arity(verb, args, 0, 1, "");
      if (err !== null) return err;
      const option = args[0] === undefined ? null : unquote(args[0]).toLowerCase();
      if (option === null) return ok({ verb, verbose: false });
      if (option === "verbose" || option === "-v" || option === "--verbose")
        return ok({ verb, verbose: true });
      return fail(
        "bad-argument",
        verb,
        `unknown option ${quoteInput(args[0] ?? "")}: the only one is verbose`,
      );
    }
    case "run":
      return parseRun(args);
    case "policy": {
      if (args.length === 0) return ok({ verb, change: null });
      const err = arity(verb, args, 2, 2, "<value> after the setting");
      return err ?? parsePolicyChange(args[0] ?? "", args[1] ?? "");
    }
    default:
      // Every other verb declares its arguments in the command table (command-table.test.ts).
      return fail("unknown-command", verb, `!dag ${verb} has no grammar`);
  }
}

/** At most this many name=value pairs after `!dag run <id>` (a DAG declares at most 32 parameters). */
const MAX_RUN_PARAMS = 32;
const PARAM_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;

/** `!dag run <id> [name=value ...]`: the id, then pairs; the value is everything after the first "=". */
function parseRun(args: string[]): Parsed {
  const [rawId, ...pairs] = args;
  if (rawId === undefined)
    return fail("missing-argument", "run", "missing <id>, the id of a published DAG: !dag run needs it");
  const id = checkId("run", "id", rawId);
  if (typeof id !== "string") return id;
  if (pairs.length > MAX_RUN_PARAMS)
    return fail("extra-argument", "run", `${pairs.length} parameters given; at most ${MAX_RUN_PARAMS}`);
  const params: Array<[string, string]> = [];
  for (const raw of pairs) {
    const token = unquote(raw);
    const eq = token.indexOf("=");
    const name = eq < 0 ? token : token.slice(0, eq);
    if (eq < 0 || !PARAM_NAME.test(name)) {
      return fail(
        "bad-argument",
        "run",
        `bad parameter ${quoteInput(raw)}: write name=value, the name a parameter the DAG declares (letters, digits, _)`,
      );
    }
    params.push([name, unquote(token.slice(eq + 1))]);
  }
  return ok({ verb: "run", id, params });
}

/** A verb whose arguments are declared in the command table: arity, then each argument by its kind. */
function parseDeclared(verb: CommandVerb, specs: readonly ArgSpec[], args: string[]): Parsed {
  const required = specs.filter((a) => a.optional !== true);
  const next = specs[args.length];
  const missing =
    args.length === 0 && required.length > 1
      ? required.map((a) => `<${a.name}>`).join(" and ")
      : next === undefined
        ? ""
        : `<${next.name}>, ${next.about}`;
  const err = arity(verb, args, required.length, specs.length, missing);
  if (err !== null) return err;
  const fields: Record<string, string | number | null> = {};
  for (const [i, spec] of specs.entries()) {
    const raw = args[i];
    if (raw === undefined) {
      fields[spec.name] = null;
      continue;
    }
    const value = parseArg(verb, spec, raw);
    if (typeof value === "object") return value;
    fields[spec.name] = value;
  }
  // The table declares each verb's arguments by the names of its Command fields.
  return ok({ verb, ...fields } as Command);
}

function parseArg(verb: CommandVerb, spec: ArgSpec, raw: string): string | number | Parsed {
  switch (spec.kind) {
    case "run-id":
      return checkId(verb, "id", raw);
    case "task-id":
      return checkId(verb, "task id", raw);
    case "hash": {
      const hash = unquote(raw);
      if (HASH_PREFIX_PATTERN.test(hash)) return hash.toLowerCase();
      return fail(
        "bad-hash",
        verb,
        `bad content hash ${quoteInput(raw)}: give the hash the run's status card shows (at least ${MIN_HASH_PREFIX} hex digits)`,
      );
    }
    case "cap": {
      const parsed = parseCap(raw);
      return parsed.kind === "command" && parsed.command.verb === "cap" ? parsed.command.n : parsed;
    }
  }
}

function unknownCommand(raw: string): Parsed {
  const suggestion = suggestVerb(raw);
  const hint = suggestion === null ? "" : ` — did you mean "${suggestion}"?`;
  return fail("unknown-command", null, `unknown command ${quoteInput(raw)}${hint}`);
}

function parseText(text: string): ParseCommandResult {
  const from = prefixEnd(text);
  return from < 0 ? { kind: "not-a-command" } : parseAfterPrefix(text, from);
}

/**
 * Parses one message. The plain body is read first (reply fallback stripped); the HTML body is read
 * when the plain one is not a command or is a malformed one, so a client that keeps the code block
 * only in `formatted_body` still works.
 *
 * People read `formatted_body` and the bot acts on `body`: when a message has both and they say
 * different commands (another DAG in the code block, another id), it is refused, never run.
 */
export function parseCommand(input: CommandInput): ParseCommandResult {
  const body = typeof input.body === "string" ? input.body : "";
  const plain = parseText(stripReplyFallback(body));
  const html = input.formattedBody;
  const format = input.format ?? MATRIX_HTML_FORMAT;
  if (typeof html !== "string" || html === "" || format !== MATRIX_HTML_FORMAT) return plain;
  const rich = parseText(htmlToText(html));
  if (plain.kind === "command") {
    if (rich.kind === "command" && sameCommand(plain.command, rich.command)) return plain;
    const verb = plain.command.verb;
    const what = verb === "publish" ? "a different DAG (code block)" : "a different command";
    return fail(
      "formatted-mismatch",
      verb,
      `the message's formatted text shows ${what} than its plain text, and the bot reads the plain text: nothing was done. Send the command again from a client that sends both the same (or as plain text)`,
    );
  }
  if (rich.kind === "command") return rich;
  return plain.kind === "error" ? plain : rich;
}

/** Equal commands, with an inline DAG's text compared line by line without trailing spaces. */
function sameCommand(a: Command, b: Command): boolean {
  if (a.verb === "publish" && b.verb === "publish") {
    const [x, y] = [a.source, b.source];
    if (x.kind === "inline" && y.kind === "inline")
      return x.format === y.format && normalizeBlock(x.text) === normalizeBlock(y.text);
  }
  return JSON.stringify(a) === JSON.stringify(b);
}

function normalizeBlock(text: string): string {
  return text
    .replace(/\r\n?/g, "\n")
    .split("\n")
    .map((line) => line.trimEnd())
    .join("\n")
    .trim();
}
