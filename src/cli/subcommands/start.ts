/**
 * Registers `dagbot start` (the node that is also a Matrix bot; src/composition/bot.ts runs it). The Matrix
 * SDK and adapters are imported only when the command runs, so every other subcommand (`dagbot
 * node` above all) starts without them: about 35 MB less resident memory.
 */
import type { Command } from "commander";
import { runCli } from "../cli-error.js";
import { withCommonOptions } from "../config-options.js";
import type { StartOptions } from "../../composition/bot.js";

export function registerStart(program: Command): void {
  withCommonOptions(
    program
      .command("start")
      .description(
        "Run a node that is also a Matrix bot: read !dag commands in its rooms, lead when elected, run tasks, post replies and status cards.",
      )
      .option("--node-id <id>", "this node's id (overrides DAGBOT_NODE_ID and node_id)")
      .option(
        "--state-dir <dir>",
        "where this node keeps its Matrix sync position (overrides DAGBOT_STATE_DIR; default ~/.local/state/dagbot)",
      ),
    "Needs a [matrix] section (homeserver_url, user_id, rooms; the access token preferably in\n" +
      "DAGBOT_ACCESS_TOKEN). Logs are JSON lines on stderr; `matrix intake ready` is logged once the first\n" +
      "sync is in the inbox. The first SIGINT/SIGTERM stops gracefully (leadership handed over at once, running\n" +
      "tasks finish); a second kills running actions. Exit status: 0 after a stop, 2 for a bad config or a\n" +
      "token of another account, 1 when the store cannot be opened.",
  ).action((options: StartOptions) =>
    runCli("start", async () => (await import("../../composition/bot.js")).runStart(options)),
  );
}
