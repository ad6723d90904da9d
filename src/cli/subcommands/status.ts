/** `dagbot status [DAG_ID]`: the runs of a room, or one run with every task, read from the store. */
import type { Command } from "commander";
import { showsPaused } from "../../app/render/status-card.js";
import { findRun } from "../../app/run-ref.js";
import type { RunListRequest } from "../../app/run-list.js";
import { listRunPage, MAX_LIST_LIMIT } from "../../app/run-list.js";
import { outcomeCounts } from "../../domain/run-counts.js";
import { summarizeTasks } from "../../domain/run-status.js";
import type { WaitReason } from "../../domain/wait-reasons.js";
import { explained } from "../../domain/wait-reasons.js";
import { readRoomWaits, waitsOf } from "../../app/task-waits.js";
import type { RunRecord, Store, TaskRecord } from "../../ports/store.js";
import { CliError, runCli } from "../cli-error.js";
import { openConfiguredStore } from "../../composition/store-open.js";
import { pickRoom, resolveConfig, withCommonOptions } from "../config-options.js";
import type { CommonOptions } from "../config-options.js";
import { renderSummary, taskDurationMs } from "../progress.js";

interface StatusOptions extends CommonOptions {
  room?: string;
  json?: boolean;
  limit?: string;
}

export function registerStatus(program: Command): void {
  withCommonOptions(
    program
      .command("status")
      .description("Show the runs of the room, or one run and its tasks.")
      .argument("[run]", "the run: its id or uuid")
      .option("--room <room>", "the room (default: the config's only room)")
      .option("--limit <n>", "how many recent runs to list", "20")
      .option("--json", "print JSON (the run and its tasks, or the list of runs)"),
    "Exit status: 0 shown, 1 no such run or store error, 2 bad config.",
  ).action((dagId: string | undefined, options: StatusOptions) =>
    runCli("status", () => status(dagId, options)),
  );
}

async function status(dagId: string | undefined, options: StatusOptions): Promise<number> {
  const config = resolveConfig(options, {}, { storeOnly: true });
  const roomId = pickRoom(config, options.room);
  const limit = parseLimit(options.limit);
  const store = await openConfiguredStore(config, { existing: true });
  try {
    const now = await store.now();
    if (dagId === undefined) {
      await printRuns(store, roomId, { limit }, options.json === true);
      return 0;
    }
    const run = await findRun(store, roomId, dagId);
    if (run === null) throw new CliError(`no run "${dagId}" in room ${roomId}`, 1);
    const tasks = await store.listTasks(run.runId);
    const room = await readRoomWaits(store, roomId, config.retention.nodeGoneAfterMs);
    const roomCap = room.load.cap;
    const waits = waitsOf(run, tasks, room);
    if (options.json === true) {
      const out = {
        run: runJson(run),
        tasks: tasks.map((t) => taskJson(t, now, waits.get(t.taskId))),
        roomCap,
      };
      process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
    } else {
      process.stdout.write(renderSummary(run, tasks, now, waits));
      if (showsPaused(run.status, roomCap)) {
        process.stdout.write(
          `room ${roomId} is paused (cap 0): no task starts until \`dagbot cap N\` raises the cap\n`,
        );
      }
    }
    return 0;
  } finally {
    await store.close();
  }
}

/** A page of the room's runs, one line each (or JSON); shared by `status` without an id and `list`. */
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

/** A task as `--json` prints it; `wait`: why it waits (domain/wait-reasons.ts), when it does. */
export function taskJson(task: TaskRecord, now: number, wait?: WaitReason): Record<string, unknown> {
  const { output: _output, ...rest } = task;
  return {
    ...rest,
    durationMs: taskDurationMs(task, now),
    ...(wait === undefined ? {} : { wait: explained(wait) }),
  };
}
