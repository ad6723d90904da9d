/** The table of `dagbot` subcommands; each lives in its own file under src/cli/. */
import type { Command } from "commander";
import { registerValidate } from "./validate.js";

export function registerCommands(program: Command): void {
  registerValidate(program);
}
