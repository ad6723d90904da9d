/**
 * A failed run in words: "`migrate` failed (exit 1); `rollout`, `smoke_test` skipped".
 * Each task that did not succeed is named with how it ended, as its record says: its exit status,
 * the signal that killed it, its timeout, its node lost, a start that failed, its outputs refused. Each list fits one
 * line (name-list.ts) and says how many it does not name.
 */
import { exitWords } from "./exit-status.js";
import type { TaskStatus } from "./model.js";
import { TASK_STATUS_WORD } from "./run-counts.js";
import { fitList } from "./name-list.js";
import type { WaitWord } from "./wait-reasons.js";

export interface EndedTask {
  taskId: string;
  status: TaskStatus;
  exitCode: number | null;
  error: string | null;
  /** The last line its action printed (domain/last-line.ts), when known. */
  lastLine?: string | null;
}

/** Characters of a recorded error shown in a sentence; the rest is in `!dag logs`. */
const MAX_REASON_CHARS = 80;
/** Characters of the failed tasks' list, and of the skipped one. */
const FAILED_LINE_CHARS = 100;
const SKIPPED_LINE_CHARS = 72;

/** The reaper's reasons (domain/task-states.ts decideReap) and the queue's, said for people. */
const REASON_WORDS: Readonly<Record<string, string>> = {
  "lease expired": "its node was lost",
  "deadline passed": "its deadline passed",
  "queue timeout": "no node took it within its queue timeout",
};

/**
 * How a task that did not succeed ended, after its status word: `failed (exit 1)`, `failed (killed
 * by signal SIGKILL)`, `timed out after 5s`, `failed (its node was lost)`, `skipped`.
 */
export function endedWords(task: EndedTask): string {
  const word = TASK_STATUS_WORD[task.status];
  const error = task.error === null ? null : (REASON_WORDS[task.error] ?? oneLine(task.error));
  // "timed out after 5s" is the status and its reason in one.
  if (error !== null && error.startsWith(`${word} `)) {
    return task.exitCode === null ? error : `${error} (exit ${task.exitCode})`;
  }
  // An action that exited 0 but whose outputs were refused failed for that reason alone.
  const reason = task.exitCode === 0 && error !== null ? [error] : exitWords(task.exitCode, error);
  return reason.length === 0 ? word : `${word} (${reason.join(", ")})`;
}

function oneLine(error: string): string {
  const line = error.split("\n", 1)[0] ?? "";
  const points = Array.from(line);
  return points.length > MAX_REASON_CHARS || line.length < error.length
    ? `${points.slice(0, MAX_REASON_CHARS).join("")}…`
    : line;
}

const FAILED: ReadonlySet<TaskStatus> = new Set<TaskStatus>(["failed", "timed_out"]);

/**
 * The failed tasks, each with how it ended, then the skipped ones: `migrate` failed (exit 1);
 * `rollout`, `smoke_test` skipped. Empty when none failed or was skipped. Tasks in the run's order.
 */
export function failureWords(tasks: readonly EndedTask[]): WaitWord[] {
  const failed = tasks.filter((t) => FAILED.has(t.status));
  const skipped = tasks.filter((t) => t.status === "skipped");
  const words: WaitWord[] = [];
  if (failed.length > 0) {
    const fitted = fitList(
      failed,
      failed.length,
      (t) => t.taskId.length + 3 + endedWords(t).length,
      FAILED_LINE_CHARS,
    );
    fitted.shown.forEach((t, i) => {
      if (i > 0) words.push(", ");
      words.push({ code: t.taskId }, ` ${endedWords(t)}`);
    });
    if (fitted.more > 0) words.push(` and ${fitted.more} more`);
  }
  if (skipped.length > 0) {
    if (words.length > 0) words.push("; ");
    const fitted = fitList(skipped, skipped.length, (t) => t.taskId.length + 2, SKIPPED_LINE_CHARS);
    fitted.shown.forEach((t, i) => {
      if (i > 0) words.push(", ");
      words.push({ code: t.taskId });
    });
    words.push(`${fitted.more > 0 ? ` and ${fitted.more} more` : ""} skipped`);
  }
  return words;
}

/** Characters of a failed run's headline: its failures with their last lines, then what they skipped. */
const HEADLINE_FAILED_CHARS = 280;
const HEADLINE_SKIPPED_CHARS = 120;

/**
 * Why a failed task failed, without the word "failed" the run's own status already says: `exit 1,
 * ERROR: relation "orders" does not exist`, `timed out after 5s`, `its node was lost`.
 */
export function whyWords(task: EndedTask): string {
  const error = task.error === null ? null : (REASON_WORDS[task.error] ?? oneLine(task.error));
  let why: string[];
  if (task.status !== "failed") why = [endedWords(task)];
  else if (task.exitCode === 0 && error !== null) why = [error];
  else why = exitWords(task.exitCode, error);
  const last = task.lastLine ?? null;
  if (last !== null && !why.some((w) => w.includes(last))) why.push(last);
  return why.length === 0 ? "failed" : why.join(", ");
}

/**
 * The headline of a failed run, outcome first (what a thread summary or a notification keeps when it
 * cuts the line): each failed task and why, with the last line it printed, then the tasks its failure
 * skipped — `migrate`: exit 1, ERROR: relation "orders" does not exist · `deploy`, `smoke_test`
 * skipped. Each list is bounded and says how many it does not name.
 */
export function failureHeadWords(tasks: readonly EndedTask[]): WaitWord[] {
  const failed = tasks.filter((t) => FAILED.has(t.status));
  const skipped = tasks.filter((t) => t.status === "skipped");
  const words: WaitWord[] = [];
  if (failed.length > 0) {
    const fitted = fitList(
      failed,
      failed.length,
      (t) => t.taskId.length + 4 + whyWords(t).length,
      HEADLINE_FAILED_CHARS,
      3,
    );
    fitted.shown.forEach((t, i) => {
      if (i > 0) words.push("; ");
      words.push({ code: t.taskId }, `: ${whyWords(t)}`);
    });
    if (fitted.more > 0) words.push(` and ${fitted.more} more failed`);
  }
  if (skipped.length > 0) {
    if (words.length > 0) words.push(" · ");
    const fitted = fitList(skipped, skipped.length, (t) => t.taskId.length + 2, HEADLINE_SKIPPED_CHARS);
    fitted.shown.forEach((t, i) => {
      if (i > 0) words.push(", ");
      words.push({ code: t.taskId });
    });
    words.push(`${fitted.more > 0 ? ` and ${fitted.more} more` : ""} skipped`);
  }
  return words;
}

/** failureWords as one line of plain text, names in backticks. */
export function failureText(tasks: readonly EndedTask[]): string {
  return failureWords(tasks)
    .map((w) => (typeof w === "string" ? w : `\`${w.code}\``))
    .join("");
}

const ACTIVE_STATUSES: ReadonlySet<TaskStatus> = new Set<TaskStatus>(["queued", "running", "canceling"]);

/**
 * Why a task still in flight is on a later attempt, as its record says (the reaper's words for a
 * lost node: "node n2 was lost; running again"); null for a first attempt or a task that ended,
 * whose own words endedWords gives.
 */
export function againWords(task: {
  status: TaskStatus;
  attempt: number;
  error: string | null;
}): string | null {
  if (!ACTIVE_STATUSES.has(task.status) || task.attempt <= 1 || task.error === null) return null;
  return oneLine(task.error);
}
