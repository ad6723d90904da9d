/**
 * The table of `dagbot` subcommands: those written by hand live in their own files under
 * src/cli/subcommands/; every verb whose file declares `cli` is made from it (verb-commands.ts).
 */
import type { Command } from "commander";
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

export function registerCommands(program: Command): void {
  registerValidate(program);
  registerRun(program);
  registerNode(program);
  registerStart(program);
  registerSubmit(program);
  registerLogs(program);
  registerNodes(program);
  registerMigrate(program);
  // trigger, confirm, reject, cancel, retry, cap, ...: from the verb files that declare a CLI form.
  registerVerbCommands(program);
  registerGraph(program);
  registerDemo(program);
}
