/**
 * `dagbot logs RUN TASK`: the kept tail of a task's output and how it ended, read from the store
 * (the CLI's `!dag logs`). The output is recorded when the task finishes, bounded by its action's
 * `output_limit`; `--follow` waits for that. The output goes to stdout as it was written, the
 * task's state to stderr, so `dagbot logs r t | grep x` sees only the output.
 */
import type { Command } from "commander";
import { systemClock } from "../adapters/clock/system-clock.js";
import { formatDuration } from "../domain/duration.js";
import { isTerminalTask } from "../domain/task-states.js";
import type { RunRecord, Store, TaskRecord } from "../ports/store.js";
import { Waker, wakeOnChange } from "../app/wake.js";
import {
  CliError,
  openConfiguredStore,
  pickRoom,
  resolveConfig,
  runCli,
  withCommonOptions,
} from "./engine-setup.js";
import type { CommonOptions } from "./engine-setup.js";
import { taskDurationMs } from "./progress.js";

interface LogsOptions extends CommonOptions {
  room?: string;
  follow?: boolean;
  json?: boolean;
}

export function registerLogs(program: Command): void {
  withCommonOptions(
    program
      .command("logs")
      .description("Show a task's kept output (the tail) and how it ended: status, exit status, error.")
      .argument("<run>", "the run: its DAG id (as in `dagbot status`) or its run id")
      .argument("<task>", "the task id")
      .option("--room <room>", "the room (default: the config's only room)")
      .option("-f, --follow", "wait until the task has ended, then show it")
      .option("--json", "print JSON: the task's state and its output"),
    "The output is recorded when the task ends (its last `output_limit` bytes); a task still waiting or\n" +
      "running has none yet. The output goes to stdout unchanged, the task's state to stderr. Reads only\n" +
      "the store. Exit status: 0 shown (whatever the task's status), 1 no such run or task, 2 bad config.",
  ).action((run: string, task: string, options: LogsOptions) =>
    runCli("logs", () => logs(run, task, options)),
  );
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

async function findRun(store: Store, roomId: string, ref: string): Promise<RunRecord | null> {
  const byDag = await store.getRun(roomId, ref);
  if (byDag !== null || !UUID.test(ref)) return byDag;
  const byId = await store.getRunById(ref);
  return byId !== null && byId.roomId === roomId ? byId : null;
}

async function logs(runRef: string, taskId: string, options: LogsOptions): Promise<number> {
  const config = resolveConfig(options, {}, { storeOnly: true });
  const roomId = pickRoom(config, options.room);
  const store = await openConfiguredStore(config);
  try {
    const run = await findRun(store, roomId, runRef);
    if (run === null) throw new CliError(`no run "${runRef}" in room ${roomId}`, 1);
    let task = await store.getTask(run.runId, taskId);
    if (task === null) {
      const known = (await store.listTasks(run.runId)).map((t) => t.taskId);
      throw new CliError(`run ${run.dagId} has no task "${taskId}" (its tasks: ${known.join(", ")})`, 1);
    }
    if (options.follow === true && !isTerminalTask(task.status)) task = await untilEnded(store, run, taskId);
    const now = await store.now();
    if (options.json === true) {
      process.stdout.write(`${JSON.stringify(logsJson(run, task, now), null, 2)}\n`);
      return 0;
    }
    process.stderr.write(`${stateLine(run, task, now)}\n`);
    if (task.output !== null && task.output !== "") {
      process.stdout.write(task.output.endsWith("\n") ? task.output : `${task.output}\n`);
    } else if (isTerminalTask(task.status)) {
      process.stderr.write("(no output)\n");
    } else {
      process.stderr.write("(its output is kept when it ends; --follow waits for that)\n");
    }
    return 0;
  } finally {
    await store.close();
  }
}

/** Waits for the task to reach an end state, woken by the store's change feed. */
async function untilEnded(store: Store, run: RunRecord, taskId: string): Promise<TaskRecord> {
  const waker = new Waker(systemClock, 50);
  const unsubscribe = wakeOnChange(store, waker, ["tasks"], [run.roomId]);
  // Ctrl-C ends the process; nothing else stops the wait.
  const never = new AbortController().signal;
  try {
    for (;;) {
      const task = await store.getTask(run.runId, taskId);
      if (task === null) throw new CliError(`task ${taskId} of run ${run.dagId} is gone`, 1);
      if (isTerminalTask(task.status)) return task;
      await waker.wait(2_000, never);
    }
  } finally {
    unsubscribe();
  }
}

function stateLine(run: RunRecord, task: TaskRecord, now: number): string {
  const parts = [`task ${task.taskId} of ${run.dagId} (run ${run.runId}): ${task.status}`];
  if (task.exitCode !== null) parts.push(`exit ${task.exitCode}`);
  if (task.attempt > 1 || task.maxAttempts > 1) parts.push(`attempt ${task.attempt}/${task.maxAttempts}`);
  if (task.executor !== null) parts.push(`on ${task.executor.nodeId}`);
  const took = taskDurationMs(task, now);
  if (took !== null) parts.push(formatDuration(took));
  const head = parts.join(", ");
  return task.error !== null && task.status !== "succeeded" ? `${head}\n${task.error}` : head;
}

function logsJson(run: RunRecord, task: TaskRecord, now: number): Record<string, unknown> {
  return {
    runId: run.runId,
    dagId: run.dagId,
    taskId: task.taskId,
    status: task.status,
    attempt: task.attempt,
    maxAttempts: task.maxAttempts,
    exitCode: task.exitCode,
    error: task.error,
    node: task.executor?.nodeId ?? null,
    startedAt: task.startedAt,
    finishedAt: task.finishedAt,
    durationMs: taskDurationMs(task, now),
    output: task.output,
  };
}
