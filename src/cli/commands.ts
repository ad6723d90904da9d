/**
 * The table of `dagbot` subcommands: those written by hand live in their own files under
 * src/cli/subcommands/; every verb whose file declares `cli` is made from it (verb-commands.ts).
 */
import type { Command } from "commander";
import { registerCrypto } from "./subcommands/crypto.js";
import { registerDemo } from "./subcommands/demo.js";
import { registerGraph } from "./subcommands/graph.js";
import { registerLogs } from "./subcommands/logs.js";
import { registerNode } from "./subcommands/node.js";
import { registerMigrate } from "./subcommands/migrate.js";
import { registerNodes } from "./subcommands/nodes.js";
import { registerRun } from "./subcommands/run.js";
import { registerStart } from "./subcommands/start.js";
import { registerSubmit } from "./subcommands/submit.js";
import { registerValidate } from "./subcommands/validate.js";
import { registerVerbCommands } from "./subcommands/verb-commands.js";

type Register = (program: Command) => void;

// The subcommands written by hand, by name, in the order `dagbot --help` lists them: these, the
// verbs, then the last ones.
const FIRST: ReadonlyArray<readonly [string, Register]> = [
  ["validate", registerValidate],
  ["run", registerRun],
  ["node", registerNode],
  ["start", registerStart],
  ["submit", registerSubmit],
  ["logs", registerLogs],
  ["nodes", registerNodes],
  ["migrate", registerMigrate],
];
const LAST: ReadonlyArray<readonly [string, Register]> = [
  ["graph", registerGraph],
  ["demo", registerDemo],
  ["crypto", registerCrypto],
];

/**
 * Registers every subcommand; when `name` (the command line's first word) is one of those written by
 * hand, only that one: a command does not build the options and help of the 25 others (`dagbot run`
 * starts 4–6 ms sooner; bench/README.md, "`dagbot run` of a one-task DAG"). Anything else (no word,
 * an option, `help`, a verb, a typo) gets the whole table, for the help and the suggestions.
 */
export function registerCommands(program: Command, name?: string): void {
  const alone = [...FIRST, ...LAST].find(([n]) => n === name);
  if (alone !== undefined) {
    alone[1](program);
    return;
  }
  for (const [, register] of FIRST) register(program);
  // trigger, confirm, reject, cancel, retry, cap, ...: from the verb files that declare a CLI form.
  registerVerbCommands(program);
  for (const [, register] of LAST) register(program);
}
