/** `dagbot submit FILE`: publish a DAG into the store as a chat command would, and print its run's id. */
import type { Command } from "commander";
import { commandPolicy } from "../../composition/command-step.js";
import { command, waitSeconds } from "../../composition/leader-room.js";
import { loadDagFile, publishCommand } from "../dag-file.js";
import { plainTextOf } from "../../app/commands/outcome-table.js";
import { CLI_IDIOM } from "./verb-commands.js";
import { runCli } from "../cli-error.js";
import { openConfiguredStore } from "../../composition/store-open.js";
import { pickRoom, resolveConfig, withCommonOptions } from "../config-options.js";
import type { CommonOptions } from "../config-options.js";

interface SubmitOptions extends CommonOptions {
  room?: string;
  confirm?: boolean;
  register?: boolean;
  wait: string;
  json?: boolean;
}

export function registerSubmit(program: Command): void {
  withCommonOptions(
    program
      .command("submit")
      .description(
        "Publish a DAG file through the room's leader, as a publish in chat would, and print its run id.",
      )
      .argument("<file>", "the DAG document (.json or .toml)")
      .option("--room <room>", "the room (default: the config's only room)")
      .option("--confirm", "confirm the run too, so it starts at once")
      .option(
        "--register",
        "register the DAG without running it now: its schedule, after and webhooks start its runs (docs/dag-format.md, Publishing without running)",
      )
      .option("--wait <seconds>", "how long to wait for the room's leader to answer", "30")
      .option("--json", "print { runId, dagId, status } as JSON"),
    "The command goes into the room's inbox; the room's leader (a running `dagbot node` or bot) validates\n" +
      "it against the actions live nodes offer and answers. The run id is printed on stdout, the leader's\n" +
      "answer on stderr. Exit status: 0 published (or already there with the same content), 1 refused or no\n" +
      "leader answered, 2 bad file or config, 3 no node of the room has a heartbeat (said at once; the\n" +
      "command stays queued and runs when a node starts).",
  ).action((file: string, options: SubmitOptions) => runCli("submit", () => submit(file, options)));
}

const LIVE = { requireLiveNode: true };

async function submit(file: string, options: SubmitOptions): Promise<number> {
  const waitMs = waitSeconds(options.wait);
  const config = resolveConfig(options, {}, { storeOnly: true });
  const roomId = pickRoom(config, options.room);
  const dag = await loadDagFile(file);
  const store = await openConfiguredStore(config);
  try {
    const published = await command(
      store,
      roomId,
      { ...publishCommand(dag.document), ...(options.register === true ? { register: true } : {}) },
      waitMs,
      commandPolicy(config),
      LIVE,
    );
    const outcome = published.outcome;
    if (outcome !== null) process.stderr.write(`${plainTextOf(outcome, CLI_IDIOM)}\n`);
    const kind = outcome?.kind ?? null;
    if (published.runId === null || (kind !== null && kind !== "published" && kind !== "exists")) return 1;
    let status = (await store.getRunById(published.runId))?.status ?? null;
    if (options.confirm === true && status === "pending") {
      const run = outcome?.kind === "published" || outcome?.kind === "exists" ? outcome.run : null;
      const confirmed = await command(
        store,
        roomId,
        // The hash of what was just published: the confirmation is for exactly that.
        { verb: "confirm", id: published.dagId ?? dag.dag.id, hash: run?.hash ?? dag.hash },
        waitMs,
        commandPolicy(config),
        LIVE,
      );
      if (confirmed.outcome !== null) process.stderr.write(`${plainTextOf(confirmed.outcome, CLI_IDIOM)}\n`);
      status = (await store.getRunById(published.runId))?.status ?? null;
      if (status === "pending") return 1;
    }
    if (options.json === true) {
      process.stdout.write(`${JSON.stringify({ runId: published.runId, dagId: published.dagId, status })}\n`);
    } else {
      // The run's canonical id (its name), as every other output names it; --json has the uuid too.
      process.stdout.write(`${published.dagId ?? dag.dag.id}\n`);
    }
    return 0;
  } finally {
    await store.close();
  }
}
