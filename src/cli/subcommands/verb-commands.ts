/**
 * `dagbot <verb>` for every verb whose file declares `cli`: its arguments, --help, --json and --room
 * from the declaration. A verb that writes goes to the room's leader through the inbox as a command
 * given AS DATA (permissions, two-person rule, audit, exactly once); a read runs against the store.
 * The answer's exit status, plain text and JSON come from the outcome table, in the CLI's own words.
 */
import type { Command as Program } from "commander";
import type { Outcome } from "../../app/commands/outcome.js";
import { asideOf, exitStatusOf, plainTextOf } from "../../app/commands/outcome-table.js";
import type { Idiom } from "../../app/commands/outcome-table.js";
import type { AnyVerb, CliArg, VerbCli } from "../../app/commands/verb.js";
import type { Command, VerbRegistry } from "../../app/commands/verbs/index.js";
import { COMMANDS, VERB_REGISTRY } from "../../app/commands/verbs/index.js";
import type { ArgSpec } from "../../domain/command-grammar.js";
import { CliError, EXIT_CONFIG, runCli } from "../cli-error.js";
import type { CommandData } from "../../composition/command-step.js";
import { localReadContext, roomHasLiveNode, queueLocalCommand } from "../../composition/command-step.js";
import { permissionFor } from "../../app/commands/permissions.js";
import { pickRoom, resolveConfig, withCommonOptions } from "../config-options.js";
import type { RoomOptions } from "../../composition/leader-room.js";
import { withLeaderRoom } from "../../composition/leader-room.js";
import { openConfiguredStore } from "../../composition/store-open.js";

interface VerbOptions extends RoomOptions {
  json?: boolean;
  confirm?: boolean;
}

/** Subcommands written by hand for verbs the CLI does more with (a file to read, a live view). */
const HAND_WRITTEN: Readonly<Record<string, string>> = { publish: "submit" };

/** The CLI's name for a verb's command: `dagbot trigger` for `run`. */
export function cliNameOf(verb: string): string {
  const declared = COMMANDS.find((v) => v.verb === verb)?.cli?.name;
  return declared ?? HAND_WRITTEN[verb] ?? verb;
}

/** How the CLI names a command in its answers. */
export const CLI_IDIOM: Idiom = {
  command: (verb, args) => ["dagbot", cliNameOf(verb), ...args].join(" "),
};

/** A declared argument as the CLI shows it. */
const SHOWN: Record<ArgSpec["kind"], { name: string; about: string }> = {
  "run-id": { name: "dag_id", about: "the run's DAG id (as in `dagbot list`)" },
  hash: { name: "hash", about: "the content hash its card or answer shows (8+ hex digits)" },
  "task-id": { name: "task_id", about: "the id of a task" },
  cap: { name: "n", about: "a whole number" },
};

function cliArgsOf(verb: AnyVerb, cli: VerbCli<{ verb: string }>): readonly CliArg[] {
  if (cli.args !== undefined) return cli.args;
  return (verb.args ?? []).map((a) => ({
    name: SHOWN[a.kind].name,
    about: a.kind === "cap" ? a.about : SHOWN[a.kind].about,
    ...(a.optional === true ? { optional: true } : {}),
  }));
}

/** The command the given words make, checked by the grammar's rules for data (a usage error: exit 2). */
function commandOf(
  registry: VerbRegistry,
  verb: AnyVerb,
  cli: VerbCli<{ verb: string }>,
  values: ReadonlyArray<string | readonly string[] | undefined>,
  options: Readonly<Record<string, unknown>>,
): CommandData {
  let data: Record<string, unknown>;
  if (cli.command !== undefined) data = { ...cli.command(values, options) };
  else {
    data = { verb: verb.verb };
    for (const [i, spec] of (verb.args ?? []).entries()) data[spec.name] = values[i] ?? null;
  }
  const parsed = registry.parseData(data);
  if (parsed.kind === "error") throw new CliError(parsed.error.message, EXIT_CONFIG);
  const wrong = cli.check?.(parsed.command) ?? null;
  if (wrong !== null) throw new CliError(wrong, EXIT_CONFIG);
  // The registry's grammar made it: a command of one of its verbs.
  return parsed.command as Command;
}

export function registerVerbCommands(program: Program, registry: VerbRegistry = VERB_REGISTRY): void {
  for (const verb of registry.verbs) {
    const cli = verb.cli;
    if (cli === undefined) continue;
    const args = cliArgsOf(verb, cli);
    const cmd = program.command(cli.name ?? verb.verb).description(cli.description);
    for (const a of args) {
      const shown = `${a.name}${a.variadic === true ? "..." : ""}`;
      cmd.argument(a.optional === true || a.variadic === true ? `[${shown}]` : `<${shown}>`, a.about);
    }
    cmd.option("--room <room>", "the room (default: the config's only room)");
    if (verb.writes === true)
      cmd.option("--wait <seconds>", "how long to wait for the room's leader to answer", "30");
    if (cli.confirmOption === true) cmd.option("--confirm", "confirm the new run too, so it starts at once");
    for (const o of cli.options ?? []) cmd.option(o.flags, o.about, o.default);
    cmd.option("--json", "print the answer as one JSON object: ok, answer (its kind), its data, message");
    const how =
      verb.writes === true
        ? "Goes to the room's leader through its inbox, as the chat command does (permissions, two-person\n" +
          "rule, audit). Exit status: 0 done (or already done), 1 refused, not found or no leader answered,\n" +
          "2 bad arguments or config, " +
          (cli.queuesWithoutNode === true
            ? "and 0 when no node of the room runs: the command is queued and the\nfirst leader applies it."
            : "3 no node of the room has a heartbeat (the command is queued and runs\nwhen a node starts).")
        : "Reads the store (and never creates one): the answer on stdout, a failure on stderr. Exit status: 0\n" +
          "shown, 1 not found or store error, 2 bad arguments or config.";
    withCommonOptions(cmd, `${cli.about === undefined ? "" : `${cli.about}\n\n`}${how}`).action(
      (...given: unknown[]) => {
        const values = given.slice(0, args.length) as Array<string | string[] | undefined>;
        const options = given[args.length] as VerbOptions;
        const name = cli.name ?? verb.verb;
        return runCli(name, () => {
          const command = commandOf(
            registry,
            verb,
            cli,
            values,
            options as unknown as Record<string, unknown>,
          );
          const reads = verb.readOnly?.(command as never) === true;
          return verb.writes === true && !reads
            ? sendVerb(
                command,
                options,
                cli.queuesWithoutNode === true,
                cli.selfLeads === true,
                registry.verbs,
              )
            : readVerb(registry, verb, command, options);
        });
      },
    );
  }
}

/** What the CLI prints for an answer: one JSON object, or plain text; the exit status. */
interface Printed {
  ok: boolean;
  exit: number;
  json: Record<string, unknown>;
  text: string;
}

function print(printed: Printed, json: boolean): number {
  process.stdout.write(json ? `${JSON.stringify(printed.json)}\n` : `${printed.text}\n`);
  return printed.exit;
}

/** The outcome's own data, without its kind (the JSON's `answer`). */
function dataOf(outcome: Outcome): Record<string, unknown> {
  const { kind: _kind, ...data } = outcome as { kind: string } & Record<string, unknown>;
  return data;
}

/**
 * A read: the handler of the command's verb (the declaring verb's, or the read it made) runs on the
 * store, which is opened only if it exists; the declaring verb's `json` shapes a success's data.
 */
async function readVerb(
  registry: VerbRegistry,
  declaring: AnyVerb,
  command: CommandData,
  options: VerbOptions,
): Promise<number> {
  const config = resolveConfig(options, {}, { storeOnly: true });
  const roomId = pickRoom(config, options.room);
  const verb = registry.verbs.find((v) => v.verb === command.verb) ?? declaring;
  const store = await openConfiguredStore(config, { existing: true });
  try {
    const ctx = await localReadContext(store, roomId, config);
    const check = permissionFor(verb, ctx.standing, ctx.policy);
    const outcome: Outcome = check.ok
      ? await verb.handle(ctx, command, registry.verbs)
      : { kind: "refused", verb: verb.verb, reason: check.reason, helpLine: "" };
    const exit = exitStatusOf(outcome, registry.verbs);
    const data = (exit === 0 ? declaring.cli?.json?.(outcome) : null) ?? dataOf(outcome);
    if (options.json === true) {
      process.stdout.write(
        `${JSON.stringify({ ok: exit === 0, answer: outcome.kind, room: roomId, ...data })}\n`,
      );
      return exit;
    }
    // What was read goes to stdout (one line per run, for scripts); a failure and an aside to stderr.
    const text = `${plainTextOf(outcome, CLI_IDIOM, registry.verbs)}\n`;
    if (exit === 0) process.stdout.write(text);
    else process.stderr.write(text);
    const aside = asideOf(outcome, CLI_IDIOM, registry.verbs);
    if (aside !== null) process.stderr.write(`${aside}\n`);
    return exit;
  } finally {
    await store.close();
  }
}

async function sendVerb(
  command: CommandData,
  options: VerbOptions,
  queues: boolean,
  selfLead: boolean,
  verbs: readonly AnyVerb[],
): Promise<number> {
  return withLeaderRoom(options, async ({ store, roomId, policy, send }) => {
    if (queues && !(await roomHasLiveNode(store, roomId, policy.nodeStaleAfterMs))) {
      // Nothing leads the room to race with: the first leader handles its inbox before it schedules.
      await queueLocalCommand(store, roomId, command);
      const text = `queued: the first node of room ${roomId} to start applies it before it schedules anything`;
      return print(
        {
          ok: true,
          exit: 0,
          json: { ok: true, answer: "queued", room: roomId, command, message: text },
          text,
        },
        options.json === true,
      );
    }
    const answer = await send(command, { requireLiveNode: true, selfLead });
    const outcome = answer.outcome;
    if (outcome === null) throw new CliError("the leader's answer cannot be read", 1);
    let confirmed: Outcome | null = null;
    const created = outcome.kind === "published" || outcome.kind === "retried" ? outcome : null;
    if (options.confirm === true && created !== null && created.needsConfirmation) {
      const run = created.run;
      // The hash the run was created with: the confirmation is for exactly what was answered.
      const again = await send({ verb: "confirm", id: run.dagId, hash: run.hash ?? null });
      confirmed = again.outcome;
    }
    const run = answer.runId === null ? null : await store.getRunById(answer.runId);
    // With --confirm the answer is the created run's, as it started (not "it awaits confirmation").
    const shown: Outcome =
      confirmed !== null && created !== null && exitStatusOf(confirmed, verbs) === 0
        ? { ...created, needsConfirmation: false }
        : outcome;
    const exit =
      confirmed === null
        ? exitStatusOf(outcome, verbs)
        : Math.max(exitStatusOf(outcome, verbs), exitStatusOf(confirmed, verbs));
    const text = [
      plainTextOf(shown, CLI_IDIOM, verbs),
      ...(confirmed === null ? [] : [plainTextOf(confirmed, CLI_IDIOM, verbs)]),
    ].join("\n");
    const data = dataOf(shown);
    return print(
      {
        ok: exit === 0,
        exit,
        json: {
          ok: exit === 0,
          answer: outcome.kind,
          room: roomId,
          ...data,
          ...(confirmed === null ? {} : { confirmed: { answer: confirmed.kind, ...dataOf(confirmed) } }),
          runId: answer.runId,
          dagId: answer.dagId ?? (typeof data["dagId"] === "string" ? data["dagId"] : null),
          status: run?.status ?? null,
          ...(run === null ? {} : { params: run.dag.values ?? {} }),
          message: text,
        },
        text,
      },
      options.json === true,
    );
  });
}
