/** The table of `dagbot` subcommands; each lives in its own file under src/cli/. */
import type { Command } from "commander";
import { registerCancel } from "./cancel.js";
import { registerCap } from "./cap.js";
import { registerDecisions } from "./decide.js";
import { registerDemo } from "./demo.js";
import { registerGraph } from "./graph.js";
import { registerList } from "./list.js";
import { registerLogs } from "./logs.js";
import { registerNode } from "./node.js";
import { registerNodes } from "./nodes.js";
import { registerRun } from "./run.js";
import { registerStart } from "./start.js";
import { registerStatus } from "./status.js";
import { registerSubmit } from "./submit.js";
import { registerTrigger } from "./trigger.js";
import { registerValidate } from "./validate.js";

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
  registerDecisions(program);
  registerCancel(program);
  registerCap(program);
  registerGraph(program);
  registerDemo(program);
}
