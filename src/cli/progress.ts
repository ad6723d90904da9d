/**
 * Live progress of one run for `dagbot run` (and `status --watch`-like uses): on a TTY a task list
 * redrawn in place; otherwise one plain line per task transition, so logs and CI output stay
 * readable. Also the end-of-run summary with durations.
 */
import { formatDuration } from "../domain/duration.js";
import type { TaskStatus } from "../domain/model.js";
import type { RunRecord, TaskRecord } from "../ports/store.js";

export interface ProgressOutput {
  write(text: string): unknown;
  isTTY?: boolean;
  rows?: number;
  columns?: number;
}

export interface ProgressView {
  /** Shows the current state; call it whenever the store may have changed. */
  update(run: RunRecord, tasks: readonly TaskRecord[], nowMs: number): void;
  /** Leaves the last state on screen (TTY) and stops redrawing. */
  finish(run: RunRecord, tasks: readonly TaskRecord[], nowMs: number): void;
}

const MARK: Record<TaskStatus, string> = {
  blocked: "·",
  queued: "○",
  running: "▶",
  canceling: "■",
  succeeded: "✓",
  failed: "✗",
  timed_out: "⌛",
  canceled: "⊘",
  skipped: "-",
};

const COLOR: Partial<Record<TaskStatus, string>> = {
  running: "\x1b[36m",
  canceling: "\x1b[33m",
  succeeded: "\x1b[32m",
  failed: "\x1b[31m",
  timed_out: "\x1b[31m",
  canceled: "\x1b[33m",
  skipped: "\x1b[2m",
};
const RESET = "\x1b[0m";

/**
 * A view for `out`: redrawn in place on a terminal, plain lines otherwise. `color`: whether task
 * states may be coloured (the caller decides from the terminal and NO_COLOR); never off a terminal.
 */
export function createProgress(out: ProgressOutput, options: { color?: boolean } = {}): ProgressView {
  return out.isTTY === true ? new TtyProgress(out, options.color ?? true) : new LineProgress(out);
}

/** How long a task has run or ran, or null if it never started. */
export function taskDurationMs(task: TaskRecord, nowMs: number): number | null {
  if (task.startedAt === null) return null;
  return (task.finishedAt ?? nowMs) - task.startedAt;
}

function counts(tasks: readonly TaskRecord[]): string {
  const by = new Map<TaskStatus, number>();
  for (const t of tasks) by.set(t.status, (by.get(t.status) ?? 0) + 1);
  return [...by.entries()].map(([status, n]) => `${n} ${status.replace("_", " ")}`).join(", ");
}

function taskDetail(task: TaskRecord, nowMs: number): string {
  const parts: string[] = [];
  const waiting = task.status === "queued" || task.status === "blocked";
  const duration = waiting ? null : taskDurationMs(task, nowMs);
  if (duration !== null) parts.push(formatDuration(duration));
  if (task.executor !== null && !waiting) parts.push(`on ${task.executor.nodeId}`);
  if (task.attempt > 1 || task.maxAttempts > 1) parts.push(`attempt ${task.attempt}/${task.maxAttempts}`);
  if (task.error !== null && task.status !== "succeeded") {
    parts.push(waiting ? `last: ${oneLine(task.error, 60)}` : oneLine(task.error, 80));
  } else if (task.exitCode !== null && task.exitCode !== 0) parts.push(`exit ${task.exitCode}`);
  return parts.join(", ");
}

function oneLine(text: string, max: number): string {
  const line = text.split("\n", 1)[0] ?? "";
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

function clock(nowMs: number): string {
  return new Date(nowMs).toISOString().slice(11, 19);
}

/** One line per change of a task's (status, attempt), for pipes and log files. */
class LineProgress implements ProgressView {
  private readonly seen = new Map<string, string>();
  private runStatus: string | null = null;

  constructor(private readonly out: ProgressOutput) {}

  update(run: RunRecord, tasks: readonly TaskRecord[], nowMs: number): void {
    if (this.runStatus !== run.status) {
      this.runStatus = run.status;
      this.out.write(`${clock(nowMs)} run ${run.dagId} ${run.status}\n`);
    }
    for (const t of tasks) {
      const state = `${t.status}#${t.attempt}`;
      if (this.seen.get(t.taskId) === state) continue;
      const first = !this.seen.has(t.taskId);
      this.seen.set(t.taskId, state);
      if (first && t.status === "blocked") continue;
      const detail = taskDetail(t, nowMs);
      this.out.write(`${clock(nowMs)} task ${t.taskId} ${t.status}${detail === "" ? "" : ` (${detail})`}\n`);
    }
  }

  finish(run: RunRecord, tasks: readonly TaskRecord[], nowMs: number): void {
    this.update(run, tasks, nowMs);
  }
}

/** A list redrawn in place, cut to the terminal's height with the active tasks kept in view. */
class TtyProgress implements ProgressView {
  private drawnLines = 0;

  constructor(
    private readonly out: ProgressOutput,
    private readonly color: boolean,
  ) {}

  update(run: RunRecord, tasks: readonly TaskRecord[], nowMs: number): void {
    this.draw(run, tasks, nowMs);
  }

  finish(run: RunRecord, tasks: readonly TaskRecord[], nowMs: number): void {
    this.draw(run, tasks, nowMs);
    this.drawnLines = 0;
  }

  private draw(run: RunRecord, tasks: readonly TaskRecord[], nowMs: number): void {
    const width = Math.max(40, this.out.columns ?? 80);
    const room = Math.max(3, (this.out.rows ?? 24) - 3);
    const shown = pickVisible(tasks, room);
    const idWidth = Math.min(32, Math.max(4, ...shown.map((t) => t.taskId.length)));
    const lines = [`run ${run.dagId} ${run.status} — ${counts(tasks)}`];
    for (const t of shown) {
      const color = this.color ? (COLOR[t.status] ?? "") : "";
      const id = t.taskId.length > idWidth ? `${t.taskId.slice(0, idWidth - 1)}…` : t.taskId.padEnd(idWidth);
      const text = `  ${MARK[t.status]} ${id} ${t.status.padEnd(9)} ${taskDetail(t, nowMs)}`;
      lines.push(`${color}${text.slice(0, width - 1)}${color === "" ? "" : RESET}`);
    }
    if (shown.length < tasks.length) lines.push(`  … and ${tasks.length - shown.length} more`);
    const up = this.drawnLines > 0 ? `\x1b[${this.drawnLines}F` : "";
    this.out.write(`${up}\x1b[0J${lines.join("\n")}\n`);
    this.drawnLines = lines.length;
  }
}

const ACTIVE: ReadonlySet<TaskStatus> = new Set(["running", "canceling", "queued"]);
const BAD: ReadonlySet<TaskStatus> = new Set(["failed", "timed_out"]);

/** At most `max` tasks in DAG order: active and failed first, then the rest. */
export function pickVisible(tasks: readonly TaskRecord[], max: number): TaskRecord[] {
  if (tasks.length <= max) return [...tasks];
  const keep = new Set<TaskRecord>();
  for (const t of tasks) if (keep.size < max && (ACTIVE.has(t.status) || BAD.has(t.status))) keep.add(t);
  for (const t of tasks) if (keep.size < max) keep.add(t);
  return tasks.filter((t) => keep.has(t));
}

/** The end-of-run table: every task with its status, attempts, node and duration, then the total. */
export function renderSummary(run: RunRecord, tasks: readonly TaskRecord[], nowMs: number): string {
  const idWidth = Math.min(40, Math.max(4, ...tasks.map((t) => t.taskId.length)));
  const lines: string[] = [];
  for (const t of tasks) {
    const duration = taskDurationMs(t, nowMs);
    const cols = [
      t.taskId.padEnd(idWidth),
      t.status.padEnd(9),
      (duration === null ? "-" : formatDuration(duration)).padStart(8),
      t.executor === null ? "" : t.executor.nodeId,
      t.attempt > 1 ? `attempts ${t.attempt}` : "",
      BAD.has(t.status) && t.error !== null ? oneLine(t.error, 100) : "",
    ];
    lines.push(`  ${cols.filter((c, i) => i < 3 || c !== "").join("  ")}`.trimEnd());
  }
  const total = (run.status === "running" ? nowMs : run.updatedAt) - run.createdAt;
  lines.push(`run ${run.dagId} (${run.runId}) ${run.status} in ${formatDuration(total)}: ${counts(tasks)}`);
  return `${lines.join("\n")}\n`;
}
