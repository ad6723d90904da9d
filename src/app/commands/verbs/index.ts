/**
 * The `!dag` command verbs (docs/architecture.md §5), one file each. A new verb is its file and one line in
 * VERBS: the grammar, help, the handler table (table.ts), the reply renderer (render/reply.ts) and
 * the CLI's inbox subcommands are all built from this list, in its order.
 */
import type {
  CommandError as GrammarError,
  CommandPermission,
  ParseCommandResult as GrammarResult,
} from "../../../domain/command-grammar.js";
import { grammarOf } from "../../../domain/command-grammar.js";
import type { Parsed } from "../../../domain/command-grammar.js";
import type { AnyVerb, CommandOf } from "../verb.js";
import { approve } from "./approve.js";
import { cancel } from "./cancel.js";
import { cap } from "./cap.js";
import { deny } from "./deny.js";
import { confirm } from "./confirm.js";
import { graph } from "./graph.js";
import { help } from "./help.js";
import { list } from "./list.js";
import { logs } from "./logs.js";
import { mark } from "./mark.js";
import { nodes } from "./nodes.js";
import { policy } from "./policy.js";
import { publish } from "./publish.js";
import { reject } from "./reject.js";
import { retry } from "./retry.js";
import { run } from "./run.js";
import { schedule } from "./schedule.js";
import { schedules } from "./schedules.js";
import { status } from "./status.js";
import { triggers } from "./triggers.js";

export const VERBS = [
  help,
  publish,
  run,
  confirm,
  reject,
  cancel,
  approve,
  deny,
  mark,
  status,
  list,
  schedules,
  schedule,
  triggers,
  logs,
  graph,
  retry,
  nodes,
  cap,
  policy,
] as const;

/** A parsed command: one member per verb, each the shape its verb file declares. */
export type Command = CommandOf<(typeof VERBS)[number]>;
export type CommandVerb = Command["verb"];
export type ParseCommandResult = GrammarResult<Command, CommandVerb>;
export type CommandError = GrammarError<CommandVerb>;

/** The verbs as help, the table and the CLI read them. */
export const COMMANDS: readonly (typeof VERBS)[number][] = VERBS;
export const COMMAND_VERBS: readonly CommandVerb[] = VERBS.map((v) => v.verb);

const grammar = grammarOf<Command, CommandVerb>(VERBS);
export const parseCommand = grammar.parseCommand;
/** A command given as data (the CLI's and HTTP's way), checked by the rules of typed text. */
export const parseCommandData = grammar.parseData as (
  data: unknown,
) => { kind: "command"; command: Command } | { kind: "error"; error: CommandError };
export const helpLineFor = grammar.helpLineFor;
export const isCommandVerb = grammar.isVerb;
export const suggestVerb = grammar.suggestVerb;
export const GENERAL_HELP_LINE = grammar.generalHelpLine;

/**
 * A list of verbs with the grammar that reads their commands given as data: what the CLI and HTTP
 * faces are built from (VERB_REGISTRY; a test builds one with a trial verb added).
 */
export interface VerbRegistry {
  readonly verbs: readonly AnyVerb[];
  parseData(data: unknown): Parsed;
}

export function registryOf(verbs: readonly AnyVerb[]): VerbRegistry {
  const own = grammarOf<{ verb: string }, string>(verbs);
  return { verbs, parseData: own.parseData };
}

export const VERB_REGISTRY: VerbRegistry = { verbs: COMMANDS, parseData: grammar.parseData };

export function commandInfo(verb: CommandVerb): (typeof VERBS)[number] {
  // VERBS lists every verb; the fallback only satisfies the type checker.
  return COMMANDS.find((c) => c.verb === verb) ?? help;
}

/**
 * Help as plain lines: every command (optionally only those of one permission), or one command in
 * detail. Adapters add their own formatting.
 */
export function renderHelp(filter?: CommandVerb | CommandPermission): string[] {
  if (filter !== undefined && isCommandVerb(filter)) {
    const c = commandInfo(filter);
    const who = c.permission === "operator" ? "operators only" : "anyone in the room";
    return [c.usage, `${c.summary} (${who})`, ...c.details];
  }
  const shown = COMMANDS.filter((c) => filter === undefined || c.permission === filter);
  return [
    "dagbot commands (* = operators only):",
    ...shown.map((c) => `${c.usage}${c.permission === "operator" ? " *" : ""} — ${c.summary}`),
  ];
}
