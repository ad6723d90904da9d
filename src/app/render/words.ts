/** The words and symbols every message uses for statuses, times and durations. */
import type { RunStatus, TaskStatus } from "../../domain/model.js";
import { formatDuration } from "../../domain/duration.js";
import { TASK_STATUS_WORD } from "../../domain/run-counts.js";

export const TASK_EMOJI: Readonly<Record<TaskStatus, string>> = {
  // Neutral: waiting for its needs is normal, not paused or stuck.
  blocked: "⚪",
  queued: "🕒",
  running: "🔄",
  canceling: "🛑",
  succeeded: "✅",
  failed: "❌",
  timed_out: "⏱️",
  canceled: "🚫",
  skipped: "⏭️",
};

export const TASK_WORD = TASK_STATUS_WORD;

export const RUN_EMOJI: Readonly<Record<RunStatus, string>> = {
  pending: "⏳",
  running: "🔄",
  canceling: "🛑",
  succeeded: "✅",
  failed: "❌",
  canceled: "🚫",
  rejected: "✋",
  expired: "⌛",
};

export const RUN_WORD: Readonly<Record<RunStatus, string>> = {
  pending: "awaiting confirmation",
  running: "running",
  canceling: "canceling",
  succeeded: "succeeded",
  failed: "failed",
  canceled: "canceled",
  rejected: "rejected",
  expired: "expired (not confirmed in time)",
};

/**
 * A run's status said of it after "it": `it is running`, `it succeeded`, `it was canceled` (never
 * "it is succeeded").
 */
export const RUN_SAID: Readonly<Record<RunStatus, string>> = {
  pending: "is awaiting confirmation",
  running: "is running",
  canceling: "is canceling",
  succeeded: "succeeded",
  failed: "failed",
  canceled: "was canceled",
  rejected: "was rejected",
  expired: "expired (not confirmed in time)",
};

export { formatDuration };

/**
 * `no failed runs in room local (3 runs in other states)`: an empty list in words, so a filter that
 * matched nothing is not read as a room without runs. `others`: what the filter left out, counted
 * up to a page (`more`: past it).
 */
export function emptyListWords(
  statuses: readonly string[] | undefined,
  others: { count: number; more: boolean } | undefined,
  where: string,
): string {
  const which = statuses === undefined ? "" : `${statuses.join(" or ")} `;
  if (others === undefined || others.count === 0) return `no ${which}runs ${where}`;
  const n = others.more ? `more than ${others.count}` : String(others.count);
  return `no ${which}runs ${where} (${n} ${others.count === 1 && !others.more ? "run" : "runs"} in other states)`;
}

/** `12:00:03 UTC`: the one time zone every reader of a shared room can convert from. */
export function clockTime(ms: number): string {
  return `${new Date(ms).toISOString().slice(11, 19)} UTC`;
}

/** `2024-05-01 12:00 UTC`. */
export function dateTime(ms: number): string {
  const iso = new Date(ms).toISOString();
  return `${iso.slice(0, 10)} ${iso.slice(11, 16)} UTC`;
}

/** `3 tasks`, `1 task`. */
export function plural(n: number, word: string, pluralWord = `${word}s`): string {
  return `${n} ${n === 1 ? word : pluralWord}`;
}

/** A ten-cell progress bar: ▰▰▰▱▱▱▱▱▱▱. */
export function progressBar(percent: number): string {
  const filled = Math.max(0, Math.min(10, Math.floor(percent / 10)));
  return "▰".repeat(filled) + "▱".repeat(10 - filled);
}

/**
 * The first 8 characters of a run id: enough to tell a room's runs apart, short enough to read.
 * People type DAG ids, never run ids, so messages show this; `dagbot status --json` has the full one.
 */
export function shortRunId(runId: string): string {
  return runId.slice(0, 8);
}
