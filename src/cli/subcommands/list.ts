/** `dagbot list [DAG_ID]`: the room's runs, newest first, a page at a time, read from the store (the CLI's `!dag list`). */
import type { Command } from "commander";
import { MAX_LIST_LIMIT } from "../../app/run-list.js";
import { openConfiguredStore } from "../../composition/store-open.js";
import { RUN_STATUSES } from "../../domain/model.js";
import type { RunStatus } from "../../domain/model.js";
import { pickRoom, resolveConfig, withCommonOptions } from "../config-options.js";
import { CliError, runCli } from "../cli-error.js";
import type { CommonOptions } from "../config-options.js";
import { parseLimit, printRuns } from "./status.js";

interface ListOptions extends CommonOptions {
  room?: string;
  limit?: string;
  status?: string;
  cursor?: string;
  json?: boolean;
}

export function registerList(program: Command): void {
  withCommonOptions(
    program
      .command("list")
      .description(
        "List the room's runs, newest first: run id, status, tasks succeeded and what else happened. " +
          "With DAG_ID, the runs of that published DAG.",
      )
      .argument("[dag_id]", "only the runs of this published DAG (a run's id or uuid: that run)")
      .option("--room <room>", "the room (default: the config's only room)")
      .option(
        "--status <statuses>",
        `only runs in these statuses, comma-separated (${RUN_STATUSES.join(", ")})`,
      )
      .option("--limit <n>", `how many runs on a page (1 to ${MAX_LIST_LIMIT})`, "20")
      .option("--cursor <cursor>", "the next page: the cursor the previous page printed")
      .option("--json", "print JSON: { room, runs: [...], next } (next: the next page's cursor, or null)"),
    "Reads only the store. A page with more after it ends with the next page's cursor (on stderr;\n" +
      "`next` with --json); runs created meanwhile do not shift the pages. Exit status: 0 shown, 1 no\n" +
      "such DAG or store error, 2 bad option or config.",
  ).action((dagId: string | undefined, options: ListOptions) => runCli("list", () => list(dagId, options)));
}

/** `--status`: comma-separated run statuses. */
export function parseStatuses(text: string | undefined): RunStatus[] | null {
  if (text === undefined) return null;
  const statuses = text.split(",").map((s) => s.trim());
  const known: readonly string[] = RUN_STATUSES;
  const unknown = statuses.filter((s) => !known.includes(s));
  if (unknown.length > 0 || statuses.length === 0)
    throw new CliError(`--status takes run statuses (${RUN_STATUSES.join(", ")}); not ${unknown.join(", ")}`);
  return statuses as RunStatus[];
}

async function list(dagId: string | undefined, options: ListOptions): Promise<number> {
  const config = resolveConfig(options, {}, { storeOnly: true });
  const roomId = pickRoom(config, options.room);
  const limit = parseLimit(options.limit);
  const statuses = parseStatuses(options.status);
  const store = await openConfiguredStore(config, { existing: true });
  try {
    await printRuns(
      store,
      roomId,
      { dag: dagId ?? null, statuses, limit, cursor: options.cursor ?? null },
      options.json === true,
    );
    return 0;
  } finally {
    await store.close();
  }
}
