/** `dagbot cancel DAG_ID`: cancel a run through the room's leader, as `!dag cancel` would. */
import type { Command } from "commander";
import { COMMAND_ID_PATTERN } from "../../domain/command-grammar.js";
import { CliError, runCli } from "../cli-error.js";
import { openConfiguredStore } from "../store-open.js";
import { pickRoom, resolveConfig, withCommonOptions } from "../config-options.js";
import type { CommonOptions } from "../config-options.js";
import { commandPolicy } from "../command-step.js";
import { command, waitSeconds } from "./submit.js";
import { terminalText } from "./decide.js";

interface CancelOptions extends CommonOptions {
  room?: string;
  wait: string;
}

export function registerCancel(program: Command): void {
  withCommonOptions(
    program
      .command("cancel")
      .description("Cancel a run: tasks not started are canceled, running ones are stopped by their workers.")
      .argument("<dag_id>", "the run's DAG id")
      .option("--room <room>", "the room (default: the config's only room)")
      .option("--wait <seconds>", "how long to wait for the room's leader to answer", "30"),
    "The run moves to canceling at once and ends canceled when no task of it is running. Exit status: 0\n" +
      "canceled (or already ending), 1 no such run, refused or no leader answered, 2 bad config, 3 no node\n" +
      "of the room has a heartbeat (the command stays queued and runs when a node starts).",
  ).action((dagId: string, options: CancelOptions) => runCli("cancel", () => cancel(dagId, options)));
}

async function cancel(dagId: string, options: CancelOptions): Promise<number> {
  if (!COMMAND_ID_PATTERN.test(dagId))
    throw new CliError(`bad DAG id "${dagId.slice(0, 70)}": use 1-64 of A-Z a-z 0-9 _ . -`);
  const waitMs = waitSeconds(options.wait);
  const config = resolveConfig(options, {}, { storeOnly: true });
  const roomId = pickRoom(config, options.room);
  const store = await openConfiguredStore(config);
  try {
    const answer = await command(store, roomId, `!dag cancel ${dagId}`, waitMs, commandPolicy(config), {
      requireLiveNode: true,
    });
    process.stdout.write(`${terminalText(answer.text ?? "canceled")}\n`);
    const o = answer.outcome;
    if (o === null) return answer.runId === null ? 1 : 0;
    return o.kind === "decision" && o.result !== "wrong-status" ? 0 : 1;
  } finally {
    await store.close();
  }
}
