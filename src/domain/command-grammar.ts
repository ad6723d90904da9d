/**
 * The `!dag` command grammar (docs/architecture.md §5), without the verbs: a Matrix message (or a CLI/HTTP
 * string) parsed into a command by the grammars it is given (one per verb, src/app/commands/verbs),
 * "not a command" for ordinary chat, or a typed error that carries the verb's usage line.
 *
 * Grammar: optional reply fallback, then `!dag` (any case) followed by whitespace or the end, then a
 * verb (any case) and its arguments separated by any whitespace. Only a verb whose grammar says so
 * takes a code block (publish). Arguments may be wrapped in one pair of `backticks` or quotes, as
 * people copy ids from the bot's own messages. `!dag` alone is help. Never throws.
 */
import { htmlToText, quoteInput, stripReplyFallback, utf8Length } from "./command-text.js";
import { ID_PATTERN } from "./dag-schema.js";
import { parseInstanceId } from "./matrix.js";

/** A command message may be at most this many UTF-8 bytes; a DAG document has the same limit. */
export const MAX_COMMAND_BYTES = 64 * 1024;
/** Run and task ids: the DAG documents' own pattern, so any id a DAG may have can be named. */
export const COMMAND_ID_PATTERN = ID_PATTERN;
/** A task id: a DAG document's, or an instance of its matrix task (`deploy[region=eu,tier=web]`, matrix.ts). */
export function isTaskId(id: string): boolean {
  return COMMAND_ID_PATTERN.test(id) || parseInstanceId(id) !== null;
}
/** What a task id is, said when one is refused. */
export const TASK_ID_RULE =
  "1 to 64 characters of A-Z a-z 0-9 _ . -, or a matrix instance's id like deploy[region=eu]";
/** Library names are ids that do not start with `.` or `-`, so `.`, `..` and option-like names are out. */
export const LIBRARY_NAME_PATTERN = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$/;
/** The Matrix HTML format; other formats' bodies are ignored. */
export const MATRIX_HTML_FORMAT = "org.matrix.custom.html";
/** How much of a content hash the bot shows, and the least a confirmation may give. */
export const SHORT_HASH_LENGTH = 12;
export const MIN_HASH_PREFIX = 8;
export const HASH_PREFIX_PATTERN = new RegExp(`^[0-9a-fA-F]{${MIN_HASH_PREFIX},64}$`);
/** The largest `!dag cap`: far above any real room, low enough that a typo like 1000000 is refused. */
export const MAX_CAP = 10_000;
/** What an id is, said when one is refused. */
export const ID_RULE = "1 to 64 characters of A-Z a-z 0-9 _ . -";

/** The part of a content hash that cards and replies show. */
export const shortHash = (hash: string): string => hash.slice(0, SHORT_HASH_LENGTH);

/** `operator`: a room power level (default 50) or an allowlisted user id; `open`: any room member. */
export type CommandPermission = "open" | "operator";

/**
 * One positional argument of a verb, as data: the parser, the usage line and help all read it, so a
 * verb's arguments are declared once (in its verb file).
 */
export interface ArgSpec {
  /** Its name in the usage line (`<id>`) and its field in the parsed command. */
  readonly name: string;
  readonly kind: "run-id" | "task-id" | "hash" | "cap";
  /** What it is, said when it is missing: `missing <id>, the id of a DAG run`. */
  readonly about: string;
  /** Optional arguments come last; absent they parse as null. */
  readonly optional?: boolean;
}

/** The argument most verbs take: the id of a DAG run. */
export const RUN_ID_ARG: ArgSpec = { name: "id", kind: "run-id", about: "the id of a DAG run" };

/** The usage line of a verb that declares its arguments: `!dag logs <id> <task>`, `!dag status [<id>]`. */
export function usageOf(verb: string, args: readonly ArgSpec[]): string {
  const shown = args.map((a) => (a.optional === true ? ` [<${a.name}>]` : ` <${a.name}>`)).join("");
  return `!dag ${verb}${shown}`;
}

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

export interface CommandError<V extends string = string> {
  code: CommandErrorCode;
  /** One sentence naming the problem, quoting (shortened, sanitised) what was typed. */
  message: string;
  /** The usage line of the verb, or the general one when the verb is unknown. */
  helpLine: string;
  /** The verb when it was recognised, so a handler can still apply its permission rule. */
  verb: V | null;
  /**
   * For a mistyped verb close to one: the command as it was meant, to copy (`!dag confirm x 4847e2`);
   * `partial` when only its start is shown (the rest spans lines or holds backticks: send it again).
   */
  corrected?: { command: string; partial: boolean };
}

export interface CommandInput {
  body: string;
  formattedBody?: string | null;
  format?: string | null;
}

/** What a verb's own grammar answers; the help line is filled in from its usage afterwards. */
export type Parsed<C = { verb: string }> =
  { kind: "command"; command: C } | { kind: "error"; error: CommandError };

export type ParseCommandResult<C = { verb: string }, V extends string = string> =
  { kind: "command"; command: C } | { kind: "not-a-command" } | { kind: "error"; error: CommandError<V> };

export const fail = (code: CommandErrorCode, verb: string | null, message: string): Parsed<never> => ({
  kind: "error",
  error: { code, message, helpLine: "", verb },
});
export const ok = <C>(command: C): Parsed<C> => ({ kind: "command", command });

/** A verb as the grammar sees it: its name, usage line, and either declared arguments or its own parser. */
export interface VerbGrammar {
  readonly verb: string;
  readonly usage: string;
  readonly args?: readonly ArgSpec[];
  /**
   * The verb's own grammar: `args` are the words after the verb, `after` the raw text (for a verb
   * that takes a code block). `grammar` answers whether a word is a verb and refuses an unknown one.
   */
  readonly parse?: (args: string[], after: string, grammar: GrammarLookup) => Parsed;
  /** Only such a verb may be followed by a code block (publish). */
  readonly takesCodeBlock?: boolean;
  /** Whether two parses of one message (plain and HTML) say the same; default: equal as JSON. */
  readonly same?: (a: { verb: string }, b: { verb: string }) => boolean;
  /**
   * The verb's command given as data (the CLI and HTTP send commands so, never as chat text), for a
   * verb with its own grammar; a verb whose arguments are declared is read from them.
   */
  readonly fromData?: (data: Readonly<Record<string, unknown>>) => Parsed;
  /**
   * Fields only data may carry (a read's page size, or "every task"), beside a declared verb's
   * arguments: each is checked by its function (an error message, or null when the value is
   * right). Chat text never sets them.
   */
  readonly dataFields?: Readonly<Record<string, DataFieldCheck>>;
}

/** Checks one data-only field of a command: an error message, or null when the value is right. */
export type DataFieldCheck = (value: unknown) => string | null;

export interface GrammarLookup {
  isVerb(word: string): boolean;
  /** `rewrite`: the whole command with a suggested verb in place of `raw`, to offer as a correction. */
  unknownCommand(raw: string, rewrite?: (verb: string) => Corrected): Parsed<never>;
}

export type Corrected = NonNullable<CommandError["corrected"]>;

/** The help line of an error whose verb is unknown: short; `!dag help` lists the commands, grouped. */
export const GENERAL_HELP_LINE = "usage: !dag <command> [<arguments>]; !dag help lists the commands";

/** Characters of the rest of a mistyped command shown in its correction. */
const MAX_CORRECTED_CHARS = 200;

/**
 * `!dag <verb> <rest>`: the rest as typed (spaces collapsed), when it is one short line a person can
 * copy from inline code; else only `!dag <verb>`, marked partial.
 */
export function correctedCommand(verb: string, rest: string): Corrected {
  const words = rest.trim().replace(/[ \t]+/g, " ");
  if (words === "") return { command: `!dag ${verb}`, partial: false };
  const plain =
    !/[`\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/u.test(words) && Array.from(words).length <= MAX_CORRECTED_CHARS;
  return plain
    ? { command: `!dag ${verb} ${words}`, partial: false }
    : { command: `!dag ${verb}`, partial: true };
}

/** Index just past `!dag` when the text (after leading whitespace) starts with it, else -1. */
function prefixEnd(text: string): number {
  const start = text.search(/\S/);
  if (start < 0) return -1;
  if (text.slice(start, start + 4).toLowerCase() !== "!dag") return -1;
  const after = text[start + 4];
  return after === undefined || /\s/.test(after) ? start + 4 : -1;
}

/**
 * Whether a message is addressed to dagbot at all: its plain text (reply fallback stripped) or its
 * HTML text starts with `!dag`. Exactly when parseCommand answers anything but "not-a-command", for
 * every verb list, so intake can tell commands from chatter without knowing the verbs
 * (docs/architecture.md, "Layers": the Matrix adapter imports no part of src/app).
 */
export function isCommandText(input: CommandInput): boolean {
  if (prefixEnd(stripReplyFallback(typeof input.body === "string" ? input.body : "")) >= 0) return true;
  const html = input.formattedBody;
  const format = input.format ?? MATRIX_HTML_FORMAT;
  return (
    typeof html === "string" &&
    html !== "" &&
    format === MATRIX_HTML_FORMAT &&
    prefixEnd(htmlToText(html)) >= 0
  );
}

export function unquote(token: string): string {
  if (token.length >= 2) {
    const first = token[0];
    if ((first === "`" || first === '"' || first === "'") && token.endsWith(first)) return token.slice(1, -1);
  }
  return token;
}

export const splitArgs = (text: string): string[] => text.split(/\s+/).filter((t) => t !== "");

export function checkId(verb: string, what: string, raw: string): string | Parsed<never> {
  const id = unquote(raw);
  if (COMMAND_ID_PATTERN.test(id)) return id;
  return fail("bad-id", verb, `bad ${what} ${quoteInput(raw)}: an id is ${ID_RULE}`);
}

/** A task (or gate) id: an id, or a matrix instance's. */
export function checkTaskId(verb: string, what: string, raw: string): string | Parsed<never> {
  const id = unquote(raw);
  if (isTaskId(id)) return id;
  return fail("bad-id", verb, `bad ${what} ${quoteInput(raw)}: a task id is ${TASK_ID_RULE}`);
}

const ARG_WORDS: Record<number, string> = { 0: "no arguments", 1: "one argument", 2: "two arguments" };

/** Too few or too many words after the verb, as an error; null when the count is right. */
export function arity(
  verb: string,
  args: string[],
  min: number,
  max: number,
  missing: string,
): Parsed<never> | null {
  if (args.length < min) return fail("missing-argument", verb, `missing ${missing}: !dag ${verb} needs it`);
  const extra = args[max];
  if (extra !== undefined) {
    const takes = min === max ? (ARG_WORDS[max] ?? `${max} arguments`) : `at most ${ARG_WORDS[max] ?? max}`;
    return fail("extra-argument", verb, `unexpected ${quoteInput(extra)}: !dag ${verb} takes ${takes}`);
  }
  return null;
}

/** A verb whose arguments are declared: arity, then each argument by its kind, into the field of its name. */
function parseDeclared(verb: string, specs: readonly ArgSpec[], args: string[]): Parsed {
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
  return ok({ verb, ...fields });
}

function parseArg(verb: string, spec: ArgSpec, raw: string): string | number | Parsed<never> {
  switch (spec.kind) {
    case "run-id":
      return checkId(verb, "id", raw);
    case "task-id":
      return checkTaskId(verb, "task id", raw);
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
      const text = unquote(raw);
      const n = /^\d{1,6}$/.test(text) ? Number.parseInt(text, 10) : NaN;
      if (Number.isInteger(n) && n <= MAX_CAP) return n;
      return fail(
        "bad-number",
        verb,
        `bad cap ${quoteInput(raw)}: expected a whole number from 0 to ${MAX_CAP}`,
      );
    }
  }
}

/**
 * A declared verb's command given as data: each argument's field, checked by its kind as a typed
 * word is, and no other field. A cap may be a number.
 */
function declaredFromData(
  verb: string,
  specs: readonly ArgSpec[],
  data: Readonly<Record<string, unknown>>,
  dataFields: Readonly<Record<string, DataFieldCheck>> = {},
): Parsed {
  const known = new Set(["verb", ...specs.map((a) => a.name), ...Object.keys(dataFields)]);
  const extra = Object.keys(data).find((k) => !known.has(k));
  if (extra !== undefined)
    return fail(
      "extra-argument",
      verb,
      `unexpected field ${quoteInput(extra)}: ${verb} takes ${fieldList(specs)}`,
    );
  const fields: Record<string, string | number | null> = {};
  for (const spec of specs) {
    const value = data[spec.name];
    if (value === undefined || value === null) {
      if (spec.optional === true) {
        fields[spec.name] = null;
        continue;
      }
      return fail("missing-argument", verb, `missing ${spec.name}, ${spec.about}`);
    }
    const raw = typeof value === "number" && spec.kind === "cap" ? String(value) : value;
    if (typeof raw !== "string")
      return fail("bad-argument", verb, `${spec.name} must be text, ${spec.about}`);
    const parsed = parseArg(verb, spec, raw);
    if (typeof parsed === "object") return parsed;
    fields[spec.name] = parsed;
  }
  const given: Record<string, unknown> = {};
  for (const [name, check] of Object.entries(dataFields)) {
    const value = data[name];
    if (value === undefined) continue;
    const wrong = check(value);
    if (wrong !== null) return fail("bad-argument", verb, `${name}: ${wrong}`);
    given[name] = value;
  }
  return ok({ verb, ...fields, ...given });
}

const fieldList = (specs: readonly ArgSpec[]): string =>
  specs.length === 0 ? "no arguments" : specs.map((a) => a.name).join(", ");

/** The grammar of a list of verbs: parseCommand and its helpers, bound to that list. */
export interface Grammar<C extends { verb: string }, V extends string> {
  parseCommand(input: CommandInput): ParseCommandResult<C, V>;
  /**
   * A command given as data (`{ verb: "confirm", id: "x", hash: null }`), checked as strictly as
   * typed text: the same rules per argument, unknown verbs and fields refused.
   */
  parseData(data: unknown): Parsed<C>;
  /** The help line a command error carries: the verb's usage, or the general line. */
  helpLineFor(verb: V | null): string;
  generalHelpLine: string;
  isVerb(word: string): word is V;
  /** The verb a mistyped word most likely meant, or null when none is close. */
  suggestVerb(word: string): V | null;
}

export function grammarOf<C extends { verb: string }, V extends string>(
  verbs: readonly VerbGrammar[],
): Grammar<C, V> {
  const names = verbs.map((v) => v.verb);
  const byName = new Map(verbs.map((v) => [v.verb, v]));
  // Short: the commands are `!dag help`'s to list, grouped, not a line of every verb.
  const generalHelpLine = GENERAL_HELP_LINE;
  const isVerb = (word: string): word is V => byName.has(word);
  const helpLineFor = (verb: string | null): string => {
    const v = verb === null ? undefined : byName.get(verb);
    return v === undefined ? generalHelpLine : `usage: ${v.usage}`;
  };
  const suggestVerb = (word: string): V | null => suggest(word, names) as V | null;
  const unknownCommand = (raw: string, rewrite?: (verb: string) => Corrected): Parsed<never> => {
    const suggestion = suggestVerb(raw);
    const unknown = `unknown command ${quoteInput(raw)}`;
    if (suggestion === null) return fail("unknown-command", null, unknown);
    // With the command as it was meant, the answer offers that to copy instead of the verb alone.
    if (rewrite === undefined)
      return fail("unknown-command", null, `${unknown} — did you mean "${suggestion}"?`);
    const corrected = rewrite(suggestion);
    return {
      kind: "error",
      error: { code: "unknown-command", message: unknown, helpLine: "", verb: null, corrected },
    };
  };
  const lookup: GrammarLookup = { isVerb, unknownCommand };

  /** Parses text that starts with `!dag` at `from` (the index just past it). */
  const afterPrefix = (text: string, from: number): Parsed => {
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
    const grammar = byName.get(verbRaw.toLowerCase());
    if (grammar === undefined) return unknownCommand(verbRaw, (verb) => correctedCommand(verb, after));
    const verb = grammar.verb;
    if (grammar.takesCodeBlock !== true && after.includes("```")) {
      return fail("unexpected-code-block", verb, `!dag ${verb} takes no code block; only publish does`);
    }
    const args = splitArgs(after);
    if (grammar.args !== undefined) return parseDeclared(verb, grammar.args, args);
    if (grammar.parse !== undefined) return grammar.parse(args, after, lookup);
    return fail("unknown-command", verb, `!dag ${verb} has no grammar`);
  };

  const parseText = (text: string): ParseCommandResult => {
    const from = prefixEnd(text);
    if (from < 0) return { kind: "not-a-command" };
    const parsed = afterPrefix(text, from);
    return parsed.kind === "command"
      ? parsed
      : { kind: "error", error: { ...parsed.error, helpLine: helpLineFor(parsed.error.verb) } };
  };

  const same = (a: { verb: string }, b: { verb: string }): boolean => {
    const own = a.verb === b.verb ? byName.get(a.verb)?.same : undefined;
    return own !== undefined ? own(a, b) : JSON.stringify(a) === JSON.stringify(b);
  };

  /**
   * Parses one message. The plain body is read first (reply fallback stripped); the HTML body is
   * read when the plain one is not a command or is a malformed one, so a client that keeps the code
   * block only in `formatted_body` still works.
   *
   * People read `formatted_body` and the bot acts on `body`: when a message has both and they say
   * different commands (another DAG in the code block, another id), it is refused, never run.
   */
  const parseCommand = (input: CommandInput): ParseCommandResult => {
    const body = typeof input.body === "string" ? input.body : "";
    const plain = parseText(stripReplyFallback(body));
    const html = input.formattedBody;
    const format = input.format ?? MATRIX_HTML_FORMAT;
    if (typeof html !== "string" || html === "" || format !== MATRIX_HTML_FORMAT) return plain;
    const rich = parseText(htmlToText(html));
    if (plain.kind === "command") {
      if (rich.kind === "command" && same(plain.command, rich.command)) return plain;
      const verb = plain.command.verb;
      const what = verb === "publish" ? "a different DAG (code block)" : "a different command";
      const message = `the message's formatted text shows ${what} than its plain text, and the bot reads the plain text: nothing was done. Send the command again from a client that sends both the same (or as plain text)`;
      return {
        kind: "error",
        error: { code: "formatted-mismatch", message, helpLine: helpLineFor(verb), verb },
      };
    }
    if (rich.kind === "command") return rich;
    return plain.kind === "error" ? plain : rich;
  };

  const parseData = (data: unknown): Parsed => {
    if (typeof data !== "object" || data === null || Array.isArray(data))
      return fail("missing-command", null, "a command given as data is an object with a verb");
    const fields = data as Record<string, unknown>;
    const name = fields["verb"];
    const grammar = typeof name === "string" ? byName.get(name) : undefined;
    if (grammar === undefined) return unknownCommand(typeof name === "string" ? name : "(none)");
    const parsed =
      grammar.args !== undefined
        ? declaredFromData(grammar.verb, grammar.args, fields, grammar.dataFields)
        : grammar.fromData !== undefined
          ? grammar.fromData(fields)
          : fail("unknown-command", grammar.verb, `${grammar.verb} cannot be given as data`);
    return parsed.kind === "command"
      ? parsed
      : { kind: "error", error: { ...parsed.error, helpLine: helpLineFor(parsed.error.verb) } };
  };

  return {
    // Each verb's grammar builds its own command shape (the verb files' types say which).
    parseCommand: parseCommand as (input: CommandInput) => ParseCommandResult<C, V>,
    parseData: parseData as (data: unknown) => Parsed<C>,
    helpLineFor,
    generalHelpLine,
    isVerb,
    suggestVerb,
  };
}

/** Edit distance with adjacent transpositions (optimal string alignment), for "did you mean". */
function editDistance(a: string, b: string): number {
  const rows = a.length + 1;
  const cols = b.length + 1;
  const d: number[] = new Array<number>(rows * cols).fill(0);
  const at = (i: number, j: number): number => d[i * cols + j] ?? 0;
  for (let i = 0; i < rows; i += 1) d[i * cols] = i;
  for (let j = 0; j < cols; j += 1) d[j] = j;
  for (let i = 1; i < rows; i += 1) {
    for (let j = 1; j < cols; j += 1) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min(at(i - 1, j) + 1, at(i, j - 1) + 1, at(i - 1, j - 1) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        best = Math.min(best, at(i - 2, j - 2) + 1);
      d[i * cols + j] = best;
    }
  }
  return at(a.length, b.length);
}

function suggest(word: string, verbs: readonly string[]): string | null {
  const w = word.toLowerCase();
  if (w.length === 0 || w.length > 32) return null;
  const prefixed = verbs.filter((v) => w.length >= 3 && v.startsWith(w));
  if (prefixed.length === 1) return prefixed[0] ?? null;
  let best: string | null = null;
  let bestDistance = Infinity;
  for (const v of verbs) {
    const dist = editDistance(w, v);
    // Short verbs (cap, list) tolerate one slip; longer ones two.
    const allowed = v.length <= 4 ? 1 : 2;
    if (dist <= allowed && dist < bestDistance) {
      best = v;
      bestDistance = dist;
    }
  }
  return best;
}
