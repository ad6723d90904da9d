/**
 * Registers `dagbot demo` (src/composition/demo.ts runs it: a local Synapse, three bot nodes and a person in one
 * room). The harness and the Matrix adapters are imported only when the command runs, so the other
 * subcommands start without them.
 */
import type { Command } from "commander";
import type { DemoOptions } from "../../composition/demo.js";
import { runCli } from "../cli-error.js";

export function registerDemo(program: Command): void {
  program
    .command("demo")
    .description(
      "Start a local Synapse with three dagbot nodes and a person in one room, publish an example DAG, and print the room until Ctrl-C.",
    )
    .option("--dag <name>", "the example DAG (from config/examples) to publish", "hello")
    .option("--keep", "keep the homeserver's and the nodes' data folders when stopping")
    .addHelpText(
      "after",
      "\nNeeds Python >= 3.10 with venv and pip: the first run installs Synapse into ~/.cache/dagbot (a few\n" +
        "minutes). The person's login is printed, so a Matrix client (e.g. Element) can join the room at the\n" +
        "local URL and type !dag commands too. Ctrl-C stops the nodes and Synapse and removes their data.",
    )
    .action((options: DemoOptions) =>
      runCli("demo", async () => (await import("../../composition/demo.js")).runDemo(options)),
    );
}
