/**
 * `dagbot logs RUN TASK`: the kept tail of a task's output and how it ended, read from the store
 * (the CLI's `!dag logs`). A running task's worker writes its output so far about once a second
 * (bounded by its action's `output_limit`); `--follow` prints what is new as it arrives, like
 * `tail -f`, and exits when the task ends. The output (the action's stdout and stderr as they
 * arrived, one stream: domain/output-tail.ts) goes to stdout, the task's state and whether the
 * output's beginning was not kept to stderr, so `dagbot logs r t | grep x` sees only the output.
 */
import type { Command } from "commander";
import { exitWords } from "../../domain/exit-status.js";
import { droppedOutputBytes, droppedWords } from "../../domain/output-tail.js";
import { formatDuration } from "../../domain/duration.js";
import { isTerminalTask } from "../../domain/task-states.js";
import type { RunRecord, Store, TaskRecord } from "../../ports/store.js";
import { findRun } from "../../app/run-ref.js";
import { watchStore } from "../../composition/store-watch.js";
import { CliError, runCli } from "../cli-error.js";
import { openConfiguredStore } from "../../composition/store-open.js";
import { pickRoom, resolveConfig, withCommonOptions } from "../config-options.js";
import type { CommonOptions } from "../config-options.js";
import { taskDurationMs } from "../progress.js";
import { outputValueText } from "../../domain/outputs.js";

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
      .argument("<run>", "the run: its id (as `dagbot status` shows it) or its uuid")
      .argument("<task>", "the task id")
      .option("--room <room>", "the room (default: the config's only room)")
      .option("-f, --follow", "print new output as it arrives until the task ends (like tail -f)")
      .option("--json", "print JSON: the task's state and its output (with --follow: once it ended)"),
    "A running task's output so far is written about once a second; what is kept is the last\n" +
      "`output_limit` bytes, and a line on stderr says when the beginning was cut. The output (the\n" +
      "action's stdout and stderr, merged as they arrived) goes to stdout unchanged, the task's state to\n" +
      "stderr. Reads only\n" +
      "the store. Exit status: 0 shown (whatever the task's status; with --follow, 0 only when the task\n" +
      "succeeded), 1 no such run or task (with --follow: or the task did not succeed), 2 bad config.",
  ).action((run: string, task: string, options: LogsOptions) =>
    runCli("logs", () => logs(run, task, options)),
  );
}

async function logs(runRef: string, taskId: string, options: LogsOptions): Promise<number> {
  const config = resolveConfig(options, {}, { storeOnly: true });
  const roomId = pickRoom(config, options.room);
  const store = await openConfiguredStore(config, { existing: true });
  try {
    const run = await findRun(store, roomId, runRef);
    if (run === null) throw new CliError(`no run "${runRef}" in room ${roomId}`, 1);
    let task = await store.getTask(run.runId, taskId);
    if (task === null) {
      const known = (await store.listTasks(run.runId)).map((t) => t.taskId);
      throw new CliError(`run ${run.dagId} has no task "${taskId}" (its tasks: ${known.join(", ")})`, 1);
    }
    const follow = options.follow === true;
    if (follow && options.json === true && !isTerminalTask(task.status)) {
      task = await untilEnded(store, run, task, () => {});
    }
    if (options.json === true) {
      const json = logsJson(run, task, await store.now());
      process.stdout.write(`${JSON.stringify(json, null, 2)}\n`);
      return follow && task.status !== "succeeded" ? 1 : 0;
    }
    if (follow && !isTerminalTask(task.status)) {
      process.stderr.write(`${stateLine(run, task, await store.now())}\n`);
      const printer = new OutputPrinter();
      printer.show(task);
      task = await untilEnded(store, run, task, (t) => printer.show(t));
      printer.end();
      process.stderr.write(`${stateLine(run, task, await store.now())}\n`);
      return task.status === "succeeded" ? 0 : 1;
    }
    process.stderr.write(`${stateLine(run, task, await store.now())}\n`);
    if (task.output !== null && task.output !== "") {
      const dropped = droppedOutputBytes(task.output, task.outputBytes);
      if (dropped > 0) process.stderr.write(`(${droppedWords(dropped, task.outputBytes ?? 0)})\n`);
      process.stdout.write(task.output.endsWith("\n") ? task.output : `${task.output}\n`);
      if (task.status === "running" || task.status === "canceling") {
        process.stderr.write("(its output so far; --follow shows the rest)\n");
      } else if (!isTerminalTask(task.status)) {
        process.stderr.write(`(the output of attempt ${task.attempt - 1}; it waits for the next)\n`);
      }
    } else if (isTerminalTask(task.status)) {
      process.stderr.write("(no output)\n");
    } else {
      process.stderr.write("(no output yet; --follow shows it as it comes)\n");
    }
    return follow && task.status !== "succeeded" ? 1 : 0;
  } finally {
    await store.close();
  }
}

/** How often a follower reads the task: the worker writes a running task's output about once a second. */
const FOLLOW_POLL_MS = 500;

/**
 * Reads the task until it reaches an end state, handing each read to `seen`; woken early by the
 * store's change feed (a status change), otherwise polling (output writes send no notification).
 */
async function untilEnded(
  store: Store,
  run: RunRecord,
  first: TaskRecord,
  seen: (task: TaskRecord) => void,
): Promise<TaskRecord> {
  // Ctrl-C ends the process; nothing else stops the wait.
  const watch = watchStore(store, run.roomId, ["tasks"]);
  try {
    for (let task = first; ;) {
      if (isTerminalTask(task.status)) return task;
      await watch.wait(FOLLOW_POLL_MS);
      const next = await store.getTask(run.runId, task.taskId);
      if (next === null) throw new CliError(`task ${task.taskId} of run ${run.dagId} is gone`, 1);
      seen(next);
      task = next;
    }
  } finally {
    watch.close();
  }
}

/**
 * Prints only what is new in each read of a task's kept output tail: `outputBytes` says where the
 * tail ends in all the attempt wrote, so a tail that moved on is continued where the last one ended,
 * and output that was written and dropped between two reads is said to be missing.
 */
export class OutputPrinter {
  /** When the attempt whose output was printed started: each claim sets a new start time. */
  private startedAt: number | null = null;
  /** Bytes of the attempt's output already printed (its position in all it wrote). */
  private printed = 0;
  private endsWithNewline = true;

  constructor(
    private readonly out: (text: string | Buffer) => void = (t) => process.stdout.write(t),
    private readonly note: (text: string) => void = (t) => process.stderr.write(t),
  ) {}

  show(task: TaskRecord): void {
    if (this.startedAt !== null && task.startedAt !== this.startedAt) {
      this.end();
      this.note(`(attempt ${task.attempt}/${task.maxAttempts})\n`);
      this.printed = 0;
    }
    this.startedAt = task.startedAt;
    if (task.output === null) return;
    const bytes = Buffer.from(task.output);
    const total = Math.max(task.outputBytes ?? bytes.length, bytes.length);
    if (total < this.printed) return; // an older read than the last one shown
    const start = total - bytes.length;
    if (start > this.printed) {
      this.end();
      this.note(`(${start - this.printed} bytes of output were not kept)\n`);
    }
    const fresh = bytes.subarray(Math.max(0, this.printed - start));
    if (fresh.length > 0) {
      this.out(fresh);
      this.endsWithNewline = fresh[fresh.length - 1] === 0x0a;
    }
    this.printed = total;
  }

  /** Ends a last line the output left open, so what follows starts on a line of its own. */
  end(): void {
    if (!this.endsWithNewline) this.out("\n");
    this.endsWithNewline = true;
  }
}

function stateLine(run: RunRecord, task: TaskRecord, now: number): string {
  const parts = [`task ${task.taskId} of ${run.dagId} (run ${run.runId}): ${task.status}`];
  const [exit, ...error] = exitWords(task.exitCode, task.status === "succeeded" ? null : task.error);
  if (task.exitCode !== null && exit !== undefined) parts.push(exit);
  if (task.attempt > 1 || task.maxAttempts > 1) parts.push(`attempt ${task.attempt}/${task.maxAttempts}`);
  if (task.executor !== null) parts.push(`on ${task.executor.nodeId}`);
  const took = taskDurationMs(task, now);
  if (took !== null) parts.push(formatDuration(took));
  const head = parts.join(", ");
  // The error on a line of its own, unless it only says the exit status again.
  const more = task.exitCode === null ? [exit, ...error] : error;
  // What it published for its dependents, one NAME=value a line.
  const outputs = Object.entries(task.outputValues ?? {}).map(
    ([name, value]) => `output ${name}=${outputValueText(value)}`,
  );
  return [head, ...more.filter((e) => e !== undefined), ...outputs].join("\n");
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
    outputBytes: task.outputBytes,
    /** Bytes written before the kept tail (`output_limit`): 0 when `output` is all of it. */
    droppedBytes: droppedOutputBytes(task.output, task.outputBytes),
    /** The values it published for its dependents (DAGBOT_OUTPUT); null while it has none. */
    outputs: task.outputValues,
    /** True while the task may still write: the output is what it wrote so far. */
    partial: !isTerminalTask(task.status),
  };
}
