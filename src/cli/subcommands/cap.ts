/**
 * `dagbot cap N`: set the room's global cap on active tasks, through the room's leader as `!dag cap`
 * would (the command table's permission and number check, the leader's fenced write, the cap and
 * the inbox row committed together).
 */
import type { Command } from "commander";
import { MAX_CAP } from "../../domain/command-grammar.js";
import { parseCommand } from "../../app/commands/verbs/index.js";
import { readCommandResult } from "../../app/commands/command-result.js";
import { queueLocalCommand, roomHasLiveNode } from "../../composition/command-step.js";
import { CliError, runCli } from "../cli-error.js";
import { withCommonOptions } from "../config-options.js";
import type { RoomOptions } from "../../composition/leader-room.js";
import { withLeaderRoom } from "../../composition/leader-room.js";

interface CapOptions extends RoomOptions {
  json?: boolean;
}

export function registerCap(program: Command): void {
  withCommonOptions(
    program
      .command("cap")
      .description("Set the room's global cap on active (queued or running) tasks, effective at once.")
      .argument("<n>", `the new cap, 0 to ${MAX_CAP} (0 pauses admission)`)
      .option("--room <room>", "the room (default: the config's only room)")
      .option("--json", "print { room, cap, previous } as JSON (previous is null while queued)")
      .option("--wait <seconds>", "how long to wait for the room's leader to answer", "30"),
    "Raising the cap lets the leader queue waiting tasks at once; lowering it never interrupts a running task\n" +
      "(admission stops until enough tasks finish). The room's leader applies it; while no node of the room\n" +
      "has a heartbeat the command waits in the inbox and the first leader applies it before it schedules\n" +
      "anything. Exit status: 0 set (or queued), 2 bad value or config, 1 refused, store error or no answer.",
  ).action((n: string, options: CapOptions) => runCli("cap", () => setCap(n, options)));
}

async function setCap(text: string, options: CapOptions): Promise<number> {
  const body = `!dag cap ${text}`;
  // The chat grammar's own check: one rule for `!dag cap` and `dagbot cap`.
  const parsed = parseCommand({ body });
  if (parsed.kind !== "command" || parsed.command.verb !== "cap") {
    const why = parsed.kind === "error" ? parsed.error.message : `"${text.slice(0, 20)}" is not a cap`;
    throw new CliError(why);
  }
  const cap = parsed.command.n;
  return withLeaderRoom(options, async ({ store, roomId, policy, send }) => {
    if (!(await roomHasLiveNode(store, roomId, policy.nodeStaleAfterMs))) {
      // Nothing leads the room to race with: the first leader handles the inbox before scheduling.
      await queueLocalCommand(store, roomId, body);
      if (options.json === true)
        process.stdout.write(`${JSON.stringify({ room: roomId, cap, previous: null })}\n`);
      else process.stdout.write(`cap of room ${roomId}: ${cap}, queued until a node of the room starts\n`);
      return 0;
    }
    const answer = await send(body);
    // The leader's fenced setRoomCap records the result itself (a StoreCommandResult).
    const o = readCommandResult(answer.row.result);
    if (o?.op !== "cap") {
      process.stderr.write(`${answer.text ?? "the cap was not set"}\n`);
      return 1;
    }
    if (options.json === true)
      process.stdout.write(`${JSON.stringify({ room: roomId, cap: o.cap, previous: o.previous })}\n`);
    else process.stdout.write(`cap of room ${roomId}: ${o.cap} (was ${o.previous})\n`);
    return 0;
  });
}
