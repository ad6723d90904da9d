/**
 * `dagbot trigger DAG_ID [name=value ...]`: a new run of a published DAG through the room's leader,
 * as `!dag run` would (the command goes into the room's inbox); the answer as plain text or JSON.
 */
import type { Command } from "commander";
import { COMMAND_ID_PATTERN } from "../../domain/command-grammar.js";
import { parseCommand } from "../../app/commands/verbs/index.js";
import { CliError, EXIT_CONFIG, runCli } from "../cli-error.js";
import { withCommonOptions } from "../config-options.js";
import type { RoomOptions } from "../../composition/leader-room.js";
import { withLeaderRoom } from "../../composition/leader-room.js";
import { terminalText } from "./inbox-verbs.js";

interface TriggerOptions extends RoomOptions {
  json?: boolean;
  confirm?: boolean;
}

export function registerTrigger(program: Command): void {
  withCommonOptions(
    program
      .command("trigger")
      .description("Start a new run of a published DAG, as `!dag run` would, with values for its parameters.")
      .argument("<dag_id>", "the published DAG's id")
      .argument("[params...]", "name=value for a parameter the DAG declares (a value is one word)")
      .option("--room <room>", "the room (default: the config's only room)")
      .option("--wait <seconds>", "how long to wait for the room's leader to answer", "30")
      .option("--confirm", "confirm the new run too, so it starts at once")
      .option("--json", "print the answer as one JSON object"),
    "The run gets the next free id <dag_id>.2, <dag_id>.3, ... and awaits confirmation unless the sender is\n" +
      "on auto_confirm or --confirm is given, like a published DAG. <dag_id> may name one of its runs. Values are checked against the DAG's [params] before anything\n" +
      "is stored. Exit status: 0 the run was created, 1 refused (unknown DAG, a bad value, no leader answered),\n" +
      "2 bad arguments or config, 3 no node of the room has a heartbeat (the command stays queued).",
  ).action((dagId: string, params: string[], options: TriggerOptions) =>
    runCli("trigger", () => trigger(dagId, params, options)),
  );
}

/** The `!dag run` text for these arguments; a value travels wrapped in backticks, exactly as typed. */
export function runCommandText(dagId: string, params: readonly string[]): string {
  if (!COMMAND_ID_PATTERN.test(dagId))
    throw new CliError(`bad DAG id "${dagId.slice(0, 70)}": use 1-64 of A-Z a-z 0-9 _ . -`, EXIT_CONFIG);
  const parts = [`!dag run ${dagId}`];
  for (const pair of params) {
    const eq = pair.indexOf("=");
    if (eq <= 0) throw new CliError(`bad parameter "${pair.slice(0, 70)}": write name=value`, EXIT_CONFIG);
    const value = pair.slice(eq + 1);
    if (/\s/.test(value))
      throw new CliError(
        `bad value for ${pair.slice(0, eq).slice(0, 64)}: a parameter value is one word (no spaces or line breaks)`,
        EXIT_CONFIG,
      );
    parts.push(`${pair.slice(0, eq)}=\`${value}\``);
  }
  const text = parts.join(" ");
  // Checked here as the leader will: a malformed command is refused before anything is queued.
  const parsed = parseCommand({ body: text });
  if (parsed.kind === "error") throw new CliError(parsed.error.message, EXIT_CONFIG);
  if (parsed.kind !== "command" || parsed.command.verb !== "run")
    throw new CliError("not a run command", EXIT_CONFIG);
  const seen = parsed.command.params.map(([, v]) => v);
  if (seen.join("\n") !== params.map((p) => p.slice(p.indexOf("=") + 1)).join("\n"))
    throw new CliError(
      "a parameter value cannot be sent as typed (it starts or ends with a backtick)",
      EXIT_CONFIG,
    );
  return text;
}

async function trigger(dagId: string, params: string[], options: TriggerOptions): Promise<number> {
  const body = runCommandText(dagId, params);
  return withLeaderRoom(options, async ({ store, roomId, send }) => {
    const answer = await send(body, { requireLiveNode: true });
    const kind = answer.outcome?.kind ?? null;
    const ok = kind === "published" && answer.runId !== null;
    if (ok && options.confirm === true && answer.dagId !== null) {
      const created = await store.getRun(roomId, answer.dagId);
      if (created?.status === "pending") {
        const confirmed = await send(`!dag confirm ${answer.dagId}`);
        if (confirmed.text !== null && options.json !== true)
          process.stderr.write(`${terminalText(confirmed.text)}\n`);
      }
    }
    const run = answer.runId === null ? null : await store.getRunById(answer.runId);
    if (options.json === true) {
      const json = {
        ok,
        answer: kind,
        runId: answer.runId,
        dagId: answer.dagId,
        status: run?.status ?? null,
        params: run?.dag.values ?? {},
        message: answer.text === null ? null : terminalText(answer.text),
      };
      process.stdout.write(`${JSON.stringify(json)}\n`);
    } else {
      process.stdout.write(`${terminalText(answer.text ?? "trigger: no answer text")}\n`);
    }
    return ok ? 0 : 1;
  });
}
