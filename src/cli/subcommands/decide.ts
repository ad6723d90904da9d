/**
 * `dagbot confirm`, `reject` and `retry`: the chat's decisions on a run, typed on the CLI and handed
 * to the room's leader through the inbox exactly as `!dag confirm` etc. would be, with the answer
 * as plain text (or JSON) for a terminal.
 */
import type { Command } from "commander";
import type { Outcome } from "../../app/commands/outcome.js";
import { COMMAND_ID_PATTERN, HASH_PREFIX_PATTERN } from "../../domain/command-grammar.js";
import { CliError, runCli } from "../cli-error.js";
import { openConfiguredStore } from "../store-open.js";
import { pickRoom, resolveConfig, withCommonOptions } from "../config-options.js";
import type { CommonOptions } from "../config-options.js";
import { commandPolicy } from "../command-step.js";
import { command, waitSeconds } from "./submit.js";

interface DecideOptions extends CommonOptions {
  room?: string;
  wait: string;
  json?: boolean;
}

type Verb = "confirm" | "reject" | "retry";

const ABOUT: Record<Verb, { description: string; took: string }> = {
  confirm: {
    description: "Confirm a run that awaits confirmation, as `!dag confirm` or ✅ on its card would.",
    took: "confirmed (or already running)",
  },
  reject: {
    description: "Reject a run that awaits confirmation, as `!dag reject` or ❌ on its card would.",
    took: "rejected (or already rejected)",
  },
  retry: {
    description: "Start a new run of the part of an ended run that did not succeed, as `!dag retry` would.",
    took: "a new run was created",
  },
};

export function registerDecisions(program: Command): void {
  for (const verb of ["confirm", "reject", "retry"] as const) {
    const cmd = program
      .command(verb)
      .description(ABOUT[verb].description)
      .argument("<dag_id>", "the run's DAG id (as in `dagbot list`)");
    if (verb === "confirm")
      cmd.argument("[hash]", "the content hash its card shows (8+ hex digits): starts it only if it matches");
    withCommonOptions(
      cmd
        .option("--room <room>", "the room (default: the config's only room)")
        .option("--wait <seconds>", "how long to wait for the room's leader to answer", "30")
        .option("--json", "print the leader's answer as JSON"),
      `Goes through the room's inbox as the chat command does (permissions, two-person rule, audit).\n` +
        `Exit status: 0 ${ABOUT[verb].took}, 1 no such run, refused or no leader answered, 2 bad\n` +
        "option or config, 3 no node of the room has a heartbeat (the command is queued and runs when\n" +
        "a node starts).",
    ).action((dagId: string, ...rest: unknown[]) => {
      const hash = verb === "confirm" && typeof rest[0] === "string" ? rest[0] : undefined;
      const options = (verb === "confirm" ? rest[1] : rest[0]) as DecideOptions;
      return runCli(verb, () => decide(verb, dagId, hash, options));
    });
  }
}

/** The chat's reply as terminal text: CLI verbs instead of `!dag …`, no Markdown code marks. */
export function terminalText(chat: string): string {
  return chat
    .replace(/`!dag ([a-z]+)([^`]*)`/g, (_m, verb: string, rest: string) => `dagbot ${verb}${rest}`)
    .replace(/`([^`\n]*)`/g, "$1");
}

/** Whether the answer means the command took effect (or had already). */
export function tookEffect(verb: Verb, outcome: Outcome | null): boolean {
  if (outcome === null) return false;
  if (verb === "retry") return outcome.kind === "retried";
  return outcome.kind === "decision" && outcome.result !== "wrong-status";
}

async function decide(
  verb: Verb,
  dagId: string,
  hash: string | undefined,
  options: DecideOptions,
): Promise<number> {
  if (!COMMAND_ID_PATTERN.test(dagId))
    throw new CliError(`bad DAG id "${dagId.slice(0, 70)}": use 1-64 of A-Z a-z 0-9 _ . -`);
  if (hash !== undefined && !HASH_PREFIX_PATTERN.test(hash))
    throw new CliError(`bad content hash "${hash.slice(0, 70)}": give 8 to 64 hex digits, as the card shows`);
  const waitMs = waitSeconds(options.wait);
  const config = resolveConfig(options, {}, { storeOnly: true });
  const roomId = pickRoom(config, options.room);
  const store = await openConfiguredStore(config);
  try {
    const body = `!dag ${verb} ${dagId}${hash === undefined ? "" : ` ${hash}`}`;
    const answer = await command(store, roomId, body, waitMs, commandPolicy(config), {
      requireLiveNode: true,
    });
    const ok = tookEffect(verb, answer.outcome);
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
  } finally {
    await store.close();
  }
}
