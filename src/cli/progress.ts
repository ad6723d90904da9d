/**
 * Live progress of one run for `dagbot run` (and `status --watch`-like uses): on a TTY a task list
 * redrawn in place; otherwise one plain line per task transition, so logs and CI output stay
 * readable. Also the end-of-run summary with durations.
 */
import { exitWords } from "../domain/exit-status.js";
import { againWords } from "../domain/failure-words.js";
import { formatDuration, runTimeWords } from "../domain/duration.js";
import type { TaskStatus } from "../domain/model.js";
import type { RunRecord, TaskRecord } from "../ports/store.js";
import type { WaitReason } from "../domain/wait-reasons.js";
import { waitText } from "../domain/wait-reasons.js";
import { isTerminalRun } from "../domain/run-states.js";
import { groupWords, matrixGroups } from "../domain/matrix.js";

export interface ProgressOutput {
  write(text: string): unknown;
  isTTY?: boolean;
  rows?: number;
  columns?: number;
}

export interface ProgressView {
  /**
   * Shows the current state; call it whenever the store may have changed. `waiting`: a line saying
   * why the run's tasks have waited for a while (WaitNotice), shown under the list on a terminal
   * and printed once each time it changes otherwise.
   */
  update(run: RunRecord, tasks: readonly TaskRecord[], nowMs: number, waiting?: string): void;
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
  if (task.status !== "succeeded") {
    const ended = exitWords(task.exitCode, task.error).join(", ");
    if (ended !== "") parts.push(waiting ? `last: ${oneLine(ended, 60)}` : oneLine(ended, 80));
  }
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
  private waiting = "";

  constructor(private readonly out: ProgressOutput) {}

  update(run: RunRecord, tasks: readonly TaskRecord[], nowMs: number, waiting = ""): void {
    // A run's end is said after its tasks' last lines (they ended first); its start before them.
    const ended = isTerminalRun(run.status);
    if (this.runStatus !== run.status && !ended) this.runLine(run, nowMs);
    if (waiting !== this.waiting) {
      this.waiting = waiting;
      if (waiting !== "") this.out.write(`${clock(nowMs)} ${oneLine(waiting, 400)}\n`);
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
    if (this.runStatus !== run.status && ended) this.runLine(run, nowMs);
  }

  private runLine(run: RunRecord, nowMs: number): void {
    this.runStatus = run.status;
    this.out.write(`${clock(nowMs)} run ${run.dagId} ${run.status}\n`);
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

  update(run: RunRecord, tasks: readonly TaskRecord[], nowMs: number, waiting = ""): void {
    this.draw(run, tasks, nowMs, waiting);
  }

  finish(run: RunRecord, tasks: readonly TaskRecord[], nowMs: number): void {
    this.draw(run, tasks, nowMs);
    this.drawnLines = 0;
  }

  /**
   * Every frame fits the screen, so that moving up `drawnLines` lands on its first line: at most
   * rows − 1 lines (the cursor rests on the last), each cut to fewer columns than the width so none
   * wraps, and no control character from a task's error text. A line too many or one that wraps
   * scrolls the top of the frame into the scrollback, where the next frame cannot erase it.
   */
  private draw(run: RunRecord, tasks: readonly TaskRecord[], nowMs: number, waiting = ""): void {
    // A size of 0 means unknown (a pseudo-terminal nobody sized): assume the classic 80 × 24.
    const width = Math.max(20, this.out.columns || 80);
    const screen = Math.max(1, (this.out.rows || 24) - 1);
    // The waiting line takes a row of its own, when there is one to spare.
    const showWaiting = waiting !== "" && screen >= 2;
    const budget = showWaiting ? screen - 1 : screen;
    const fitsAll = tasks.length + 1 <= budget;
    const shown = fitsAll ? [...tasks] : pickVisible(tasks, Math.max(0, budget - 2));
    const idWidth = Math.min(32, Math.max(4, ...shown.map((t) => t.taskId.length)));
    const lines = [clip(`run ${run.dagId} ${run.status} — ${counts(tasks)}`, width - 1)];
    for (const t of shown) {
      const color = this.color ? (COLOR[t.status] ?? "") : "";
      const id = t.taskId.length > idWidth ? `${t.taskId.slice(0, idWidth - 1)}…` : t.taskId.padEnd(idWidth);
      const text = clip(`  ${MARK[t.status]} ${id} ${t.status.padEnd(9)} ${taskDetail(t, nowMs)}`, width - 1);
      lines.push(`${color}${text}${color === "" ? "" : RESET}`);
    }
    if (!fitsAll && lines.length < budget)
      lines.push(clip(`  … and ${tasks.length - shown.length} more`, width - 1));
    if (showWaiting) lines.push(clip(waiting, width - 1));
    const up = this.drawnLines > 0 ? `\x1b[${this.drawnLines}F` : "";
    this.out.write(`${up}\x1b[0J${lines.join("\n")}\n`);
    this.drawnLines = lines.length;
  }
}

/** Columns a code point takes on a terminal: 2 for East Asian wide and emoji ranges (erring wide), else 1. */
function columnsOf(cp: number): number {
  for (const [lo, hi] of WIDE) {
    if (cp < lo) return 1;
    if (cp <= hi) return 2;
  }
  return 1;
}

// Sorted, inclusive. Erring wide only cuts a line a little early; erring narrow would let it wrap.
const WIDE: ReadonlyArray<readonly [number, number]> = [
  [0x1100, 0x115f],
  [0x231a, 0x231b],
  [0x2329, 0x232a],
  [0x23e9, 0x23ec],
  [0x23f0, 0x23f0],
  [0x23f3, 0x23f3],
  [0x25fd, 0x25fe],
  [0x2614, 0x2615],
  [0x2648, 0x2653],
  [0x267f, 0x267f],
  [0x2693, 0x2693],
  [0x26a1, 0x26a1],
  [0x26aa, 0x26ab],
  [0x26bd, 0x26be],
  [0x26c4, 0x26c5],
  [0x26ce, 0x26ce],
  [0x26d4, 0x26d4],
  [0x26ea, 0x26ea],
  [0x26f2, 0x26f3],
  [0x26f5, 0x26f5],
  [0x26fa, 0x26fa],
  [0x26fd, 0x26fd],
  [0x2705, 0x2705],
  [0x270a, 0x270b],
  [0x2728, 0x2728],
  [0x274c, 0x274c],
  [0x274e, 0x274e],
  [0x2753, 0x2755],
  [0x2757, 0x2757],
  [0x2795, 0x2797],
  [0x27b0, 0x27b0],
  [0x27bf, 0x27bf],
  [0x2b1b, 0x2b1c],
  [0x2b50, 0x2b50],
  [0x2b55, 0x2b55],
  [0x2e80, 0x303e],
  [0x3041, 0x33ff],
  [0x3400, 0x4dbf],
  [0x4e00, 0x9fff],
  [0xa000, 0xa4cf],
  [0xa960, 0xa97f],
  [0xac00, 0xd7a3],
  [0xf900, 0xfaff],
  [0xfe10, 0xfe19],
  [0xfe30, 0xfe6f],
  [0xff00, 0xff60],
  [0xffe0, 0xffe6],
  [0x1f000, 0x1faff],
  [0x20000, 0x3fffd],
];

/** `text` without control characters, cut to at most `max` terminal columns (with "…" when cut). */
export function clip(text: string, max: number): string {
  let out = "";
  let used = 0;
  const chars = [...text].map((ch) => {
    const cp = ch.codePointAt(0) ?? 0;
    return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) ? " " : ch;
  });
  const total = chars.reduce((n, ch) => n + columnsOf(ch.codePointAt(0) ?? 0), 0);
  if (total <= max) return chars.join("");
  for (const ch of chars) {
    const w = columnsOf(ch.codePointAt(0) ?? 0);
    if (used + w > max - 1) break;
    out += ch;
    used += w;
  }
  return `${out}…`;
}

function waitOf(waits: ReadonlyMap<string, WaitReason> | undefined, taskId: string): string {
  const reason = waits?.get(taskId);
  return reason === undefined ? "" : `waits: ${waitText(reason)}`;
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

/**
 * The end-of-run table: every task with its status, attempts, node and duration, then the total.
 * `waits`: why tasks wait, shown after their status (`dagbot status` of a run in flight).
 */
export function renderSummary(
  run: RunRecord,
  tasks: readonly TaskRecord[],
  nowMs: number,
  waits?: ReadonlyMap<string, WaitReason>,
): string {
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
      BAD.has(t.status) ? oneLine(exitWords(t.exitCode, t.error).join(", "), 100) : (againWords(t) ?? ""),
      waitOf(waits, t.taskId),
    ];
    lines.push(`  ${cols.filter((c, i) => i < 3 || c !== "").join("  ")}`.trimEnd());
  }
  // A matrix task as one line over its instances' lines (domain/matrix.ts).
  for (const g of matrixGroups(tasks)) lines.push(groupWords(g));
  lines.push(
    `run ${run.dagId} (${run.runId}) ${runTimeWords(run.status, run.createdAt, run.updatedAt, nowMs)}: ${counts(tasks)}`,
  );
  return `${lines.join("\n")}\n`;
}

/**
 * Whether output to `stream` may be coloured: only on a terminal, and not when NO_COLOR is set to
 * anything but the empty string (https://no-color.org).
 */
export function colorFor(stream: { isTTY?: boolean }): boolean {
  return stream.isTTY === true && (process.env["NO_COLOR"] ?? "") === "";
}
