/** `dagbot list [DAG_ID]`: the room's runs, newest first, a page at a time, read from the store (the CLI's `!dag list`). */
import type { Command } from "commander";
import { MAX_LIST_LIMIT } from "../../app/run-list.js";
import { openConfiguredStore } from "../../composition/store-open.js";
import { RUN_STATUSES } from "../../domain/model.js";
import type { RunStatus } from "../../domain/model.js";
import { pickRoom, resolveConfig, withCommonOptions } from "../config-options.js";
import { CliError, runCli } from "../cli-error.js";
import type { RunListRequest } from "../../app/run-list.js";
import { listRunPage } from "../../app/run-list.js";
import { outcomeCounts } from "../../domain/run-counts.js";
import { summarizeTasks } from "../../domain/run-status.js";
import type { RunRecord, Store } from "../../ports/store.js";
import type { CommonOptions } from "../config-options.js";

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

/** A page of the room's runs, one line each (or JSON); `dagbot list`. */
export async function printRuns(
  store: Store,
  roomId: string,
  request: RunListRequest,
  json: boolean,
): Promise<void> {
  const answer = await listRunPage(store, roomId, request);
  if (answer.kind === "bad-cursor")
    throw new CliError("--cursor is not a cursor a list printed: start again without it");
  if (answer.kind === "no-such-dag") throw new CliError(`no DAG or run "${answer.ref}" in room ${roomId}`, 1);
  const { runs, next } = answer;
  const rows = await Promise.all(runs.map(async (run) => ({ run, tasks: await store.listTasks(run.runId) })));
  if (json) {
    const out = rows.map(({ run, tasks }) => ({
      ...runJson(run),
      summary: summarizeTasks(tasks.map((t) => t.status)),
    }));
    process.stdout.write(`${JSON.stringify({ room: roomId, runs: out, next }, null, 2)}\n`);
    return;
  }
  if (rows.length === 0) {
    const filtered = [request.dag, request.statuses, request.cursor].some(
      (v) => v !== undefined && v !== null,
    );
    process.stdout.write(filtered ? "no runs\n" : `no runs in room ${roomId}\n`);
  } else {
    for (const { run, tasks } of rows) {
      // What succeeded over the total, then the rest: a failed run never reads as complete.
      const counts = outcomeCounts(tasks.map((t) => t.status));
      // The run's one id, its name; its uuid is in --json (runId) and accepted as input too.
      process.stdout.write(`${run.dagId.padEnd(24)} ${run.status.padEnd(10)} ${counts}\n`);
    }
  }
  // On stderr, so that stdout stays one line per run for scripts.
  if (next !== null) process.stderr.write(`more: the next page with --cursor ${next}\n`);
}

/** `--limit` of the run listings: a page, at most MAX_LIST_LIMIT (go on with --cursor). */
export function parseLimit(text: string | undefined): number {
  const limit = Number(text ?? "20");
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIST_LIMIT)
    throw new CliError(`--limit must be 1 to ${MAX_LIST_LIMIT} (go on with --cursor)`);
  return limit;
}

export function runJson(run: RunRecord): Record<string, unknown> {
  const { dag: _dag, ...rest } = run;
  return { ...rest, taskCount: run.dag.tasks.length };
}
