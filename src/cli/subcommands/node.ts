/**
 * Registers `dagbot node`; src/composition/node.ts runs it, imported then: its modules (the chat,
 * the HTTP API, an edge node's) are not loaded at every command's start (bench/README.md, "`dagbot
 * run` of a one-task DAG").
 */
import type { Command } from "commander";
import type { NodeOptions } from "../../composition/node.js";
import { runCli } from "../cli-error.js";
import { withCommonOptions } from "../config-options.js";

export function registerNode(program: Command): void {
  withCommonOptions(
    program
      .command("node")
      .description(
        "Run a headless node (engine only, no chat): lead its rooms when elected, run tasks, until SIGINT or SIGTERM.",
      )
      .option("--node-id <id>", "this node's id (overrides DAGBOT_NODE_ID and node_id)"),
    "Logs are JSON lines on stderr. The first SIGINT/SIGTERM stops gracefully: leadership is released at once,\n" +
      "no new task is claimed and running tasks finish; a second signal kills running actions (their tasks are\n" +
      "retried elsewhere once their leases expire). A store that cannot be reached yet (server down, too many\n" +
      "connections) is retried with backoff until it can. Exit status: 0 after a stop, 2 for a bad config or a\n" +
      "store that refuses it (authentication, no such database, a newer schema).",
  ).action((options: NodeOptions) =>
    runCli("node", async () => (await import("../../composition/node.js")).runNode(options)),
  );
}
