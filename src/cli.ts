#!/usr/bin/env node
/** The `dagbot` entry point: the only reader of argv, and (with the node's composition root) env and signals. */
import { Command, CommanderError } from "commander";
import { registerCommands } from "./cli/commands.js";

const program = new Command()
  .name("dagbot")
  .description("Run DAGs of tasks across a fleet of bots that share a Matrix room and a database.")
  .showHelpAfterError()
  .exitOverride();
registerCommands(program);

try {
  await program.parseAsync(process.argv);
} catch (err) {
  if (err instanceof CommanderError) {
    // Usage errors exit 2; --help and --version exit 0 (commander already printed them).
    process.exitCode = err.exitCode === 0 ? 0 : 2;
  } else {
    process.stderr.write(`dagbot: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  }
}
