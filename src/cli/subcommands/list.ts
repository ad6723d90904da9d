/** `dagbot list`: the room's latest runs, newest first, read from the store (the CLI's `!dag list`). */
import type { Command } from "commander";
import { openConfiguredStore } from "../../composition/store-open.js";
import { pickRoom, resolveConfig, withCommonOptions } from "../config-options.js";
import { runCli } from "../cli-error.js";
import type { CommonOptions } from "../config-options.js";
import { parseLimit, printRuns } from "./status.js";

interface ListOptions extends CommonOptions {
  room?: string;
  limit?: string;
  json?: boolean;
}

export function registerList(program: Command): void {
  withCommonOptions(
    program
      .command("list")
      .description("List the room's latest runs: run id, status, tasks succeeded and what else happened.")
      .option("--room <room>", "the room (default: the config's only room)")
      .option("--limit <n>", "how many recent runs to list", "20")
      .option("--json", "print JSON: { room, runs: [...] }"),
    "Reads only the store. Exit status: 0 shown, 1 store error, 2 bad config.",
  ).action((options: ListOptions) => runCli("list", () => list(options)));
}

async function list(options: ListOptions): Promise<number> {
  const config = resolveConfig(options, {}, { storeOnly: true });
  const roomId = pickRoom(config, options.room);
  const limit = parseLimit(options.limit);
  const store = await openConfiguredStore(config, { existing: true });
  try {
    await printRuns(store, roomId, limit, options.json === true);
    return 0;
  } finally {
    await store.close();
  }
}
