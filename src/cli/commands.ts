/** The table of `dagbot` subcommands; each lives in its own file under src/cli/. */
import type { Command } from "commander";
import { registerCap } from "./cap.js";
import { registerNode } from "./node.js";
import { registerNodes } from "./nodes.js";
import { registerStatus } from "./status.js";
import { registerValidate } from "./validate.js";

export function registerCommands(program: Command): void {
  registerValidate(program);
  registerNode(program);
  registerStatus(program);
  registerNodes(program);
  registerCap(program);
}
