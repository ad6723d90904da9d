/**
 * `dagbot confirm`, `reject`, `cancel`, `retry` (every verb whose file declares `cli`): the chat's
 * command typed on the CLI and handed to the room's leader through the inbox exactly as `!dag <verb>`
 * would be (permissions, two-person rule, audit), with the answer as plain text (or JSON) for a
 * terminal. The subcommands, their arguments and their exit rule come from the verb files.
 */
import type { Command } from "commander";
import type { VerbCli } from "../../app/commands/verb.js";
import { COMMANDS, parseCommand } from "../../app/commands/verbs/index.js";
import type { ArgSpec } from "../../domain/command-grammar.js";
import { COMMAND_ID_PATTERN, HASH_PREFIX_PATTERN } from "../../domain/command-grammar.js";
import { CliError, runCli } from "../cli-error.js";
import { withCommonOptions } from "../config-options.js";
import type { RoomOptions } from "../../composition/leader-room.js";
import { withLeaderRoom } from "../../composition/leader-room.js";

interface InboxVerbOptions extends RoomOptions {
  json?: boolean;
}

/** A declared argument as commander shows it, and the check it gets before anything is opened. */
const CLI_ARGS: Record<ArgSpec["kind"], { name: string; about: string; check: (value: string) => void }> = {
  "run-id": {
    name: "dag_id",
    about: "the run's DAG id (as in `dagbot list`)",
    check: (v) => {
      if (!COMMAND_ID_PATTERN.test(v))
        throw new CliError(`bad DAG id "${v.slice(0, 70)}": use 1-64 of A-Z a-z 0-9 _ . -`);
    },
  },
  hash: {
    name: "hash",
    about: "the content hash its card shows (8+ hex digits): starts it only if it matches",
    check: (v) => {
      if (!HASH_PREFIX_PATTERN.test(v))
        throw new CliError(
          `bad content hash "${v.slice(0, 70)}": give 8 to 64 hex digits, as the card shows`,
        );
    },
  },
  "task-id": { name: "task_id", about: "the id of a task", check: () => undefined },
  cap: { name: "n", about: "a whole number", check: () => undefined },
};

export function registerInboxVerbs(program: Command): void {
  for (const verb of COMMANDS) {
    const cli = verb.cli;
    if (cli === undefined || verb.args === undefined) continue;
    const args = verb.args;
    const cmd = program.command(verb.verb).description(cli.description);
    for (const spec of args) {
      const shown = CLI_ARGS[spec.kind];
      cmd.argument(spec.optional === true ? `[${shown.name}]` : `<${shown.name}>`, shown.about);
    }
    cmd
      .option("--room <room>", "the room (default: the config's only room)")
      .option("--wait <seconds>", "how long to wait for the room's leader to answer", "30");
    if (cli.json) cmd.option("--json", "print the leader's answer as JSON");
    withCommonOptions(
      cmd,
      `${cli.about === undefined ? "" : `${cli.about}\n`}` +
        "Goes through the room's inbox as the chat command does (permissions, two-person rule, audit).\n" +
        `Exit status: 0 ${cli.took}, 1 no such run, refused or no leader answered, 2 bad\n` +
        "option or config, 3 no node of the room has a heartbeat (the command is queued and runs when\n" +
        "a node starts).",
    ).action((...given: unknown[]) => {
      const values = given.slice(0, args.length).map((v) => (typeof v === "string" ? v : undefined));
      const options = given[args.length] as InboxVerbOptions;
      return runCli(verb.verb, () => send(verb.verb, cli, args, values, options));
    });
  }
}

/** The chat's reply as terminal text: CLI verbs instead of `!dag …`, no Markdown code marks. */
export function terminalText(chat: string): string {
  return chat
    .replace(/`!dag ([a-z]+)([^`]*)`/g, (_m, verb: string, rest: string) => `dagbot ${verb}${rest}`)
    .replace(/`([^`\n]*)`/g, "$1");
}

async function send(
  verb: string,
  cli: VerbCli,
  specs: readonly ArgSpec[],
  values: ReadonlyArray<string | undefined>,
  options: InboxVerbOptions,
): Promise<number> {
  const words: string[] = [];
  for (const [i, spec] of specs.entries()) {
    const value = values[i];
    if (value === undefined) continue;
    CLI_ARGS[spec.kind].check(value);
    words.push(value);
  }
  const body = [`!dag ${verb}`, ...words].join(" ");
  // The chat grammar's own check, for what the checks above do not cover.
  const parsed = parseCommand({ body });
  if (parsed.kind === "error") throw new CliError(parsed.error.message);
  return withLeaderRoom(options, async ({ store, send }) => {
    const answer = await send(body, { requireLiveNode: true });
    const ok = cli.tookEffect(answer.outcome);
    const run = answer.runId === null ? null : await store.getRunById(answer.runId);
    if (options.json === true) {
      const json = {
        ok,
        answer: answer.outcome?.kind ?? null,
        ...(answer.outcome?.kind === "decision" ? { result: answer.outcome.result } : {}),
        runId: answer.runId,
        dagId: answer.dagId,
        status: run?.status ?? null,
        message: answer.text === null ? null : terminalText(answer.text),
      };
      process.stdout.write(`${JSON.stringify(json)}\n`);
    } else {
      process.stdout.write(`${terminalText(answer.text ?? `${verb}: no answer text`)}\n`);
    }
    return ok ? 0 : 1;
  });
}
