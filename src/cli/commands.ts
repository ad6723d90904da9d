/**
 * The table of `dagbot` subcommands; each lives in its own file under src/cli/subcommands/, and the
 * chat verbs that the CLI only hands to the leader are made from their verb files (inbox-verbs.ts).
 */
import type { Command } from "commander";
import { registerCap } from "./subcommands/cap.js";
import { registerDemo } from "./subcommands/demo.js";
import { registerGraph } from "./subcommands/graph.js";
import { registerInboxVerbs } from "./subcommands/inbox-verbs.js";
import { registerList } from "./subcommands/list.js";
import { registerLogs } from "./subcommands/logs.js";
import { registerNode } from "./subcommands/node.js";
import { registerNodes } from "./subcommands/nodes.js";
import { registerRun } from "./subcommands/run.js";
import { registerStart } from "./subcommands/start.js";
import { registerStatus } from "./subcommands/status.js";
import { registerSubmit } from "./subcommands/submit.js";
import { registerTrigger } from "./subcommands/trigger.js";
import { registerValidate } from "./subcommands/validate.js";

export function registerCommands(program: Command): void {
  registerValidate(program);
  registerRun(program);
  registerNode(program);
  registerStart(program);
  registerSubmit(program);
  registerTrigger(program);
  registerStatus(program);
  registerList(program);
  registerLogs(program);
  registerNodes(program);
  // confirm, reject, cancel, retry: from the verb files that declare a CLI form.
  registerInboxVerbs(program);
  registerCap(program);
  registerGraph(program);
  registerDemo(program);
}
