/** Durations as people write them in configs and DAGs ("500ms", "30s", "10m", "1h30m"), in milliseconds. */
import type { RunStatus } from "./model.js";

const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

// One or more <number><unit> parts, largest first is not enforced: "90s" and "1m30s" both read naturally.
const WHOLE = /^(?:\d+(?:\.\d+)?(?:ms|s|m|h|d))+$/;
const PART = /(\d+(?:\.\d+)?)(ms|s|m|h|d)/g;

/**
 * Parses a duration such as `500ms`, `30s`, `10m`, `1h`, `2d` or `1h30m` (decimals allowed: `1.5s`)
 * into whole milliseconds. Returns null for anything else, including plain numbers, signs, spaces,
 * and values beyond Number.MAX_SAFE_INTEGER.
 */
export function parseDuration(text: string): number | null {
  if (typeof text !== "string" || text.length > 64 || !WHOLE.test(text)) return null;
  let total = 0;
  for (const match of text.matchAll(PART)) {
    const value = Number(match[1]);
    const unit = UNIT_MS[match[2] ?? ""];
    if (unit === undefined || !Number.isFinite(value)) return null;
    total += value * unit;
  }
  const ms = Math.round(total);
  return Number.isSafeInteger(ms) ? ms : null;
}

/** Renders milliseconds compactly for people: `850ms`, `1.5s`, `2m05s`, `1h02m`. */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return "?";
  if (ms < 1_000) return `${Math.round(ms)}ms`;
  if (ms < 60_000) {
    const seconds = ms / 1_000;
    return `${seconds < 10 ? Math.floor(seconds * 10) / 10 : Math.floor(seconds)}s`;
  }
  const totalSeconds = Math.floor(ms / 1_000);
  if (totalSeconds < 3_600) {
    return `${Math.floor(totalSeconds / 60)}m${String(totalSeconds % 60).padStart(2, "0")}s`;
  }
  const totalMinutes = Math.floor(totalSeconds / 60);
  if (totalMinutes < 24 * 60) {
    return `${Math.floor(totalMinutes / 60)}h${String(totalMinutes % 60).padStart(2, "0")}m`;
  }
  return `${Math.floor(totalMinutes / 1_440)}d${String(Math.floor((totalMinutes % 1_440) / 60)).padStart(2, "0")}h`;
}

/**
 * A duration as chat shows it on a task or a run: null under a second (not worth a
 * word), else rounded to the second: `3s`, `59s`, `1m05s`, `1h02m`.
 */
export function shownDuration(ms: number): string | null {
  if (!Number.isFinite(ms) || ms < 1_000) return null;
  return formatDuration(Math.round(ms / 1_000) * 1_000);
}

/**
 * A run's status with its time, for the one-line run summaries (`dagbot status`, `dagbot run`):
 * `succeeded in 7s` for an ended run, `running for 41s` for one in flight, `pending for 2m` for
 * one awaiting confirmation (never "pending in 0ms": it has not taken any time, it has waited).
 */
export function runTimeWords(status: RunStatus, createdAt: number, updatedAt: number, nowMs: number): string {
  if (status === "pending" || status === "running" || status === "canceling")
    return `${status} for ${formatDuration(Math.max(0, nowMs - createdAt))}`;
  const took = formatDuration(Math.max(0, updatedAt - createdAt));
  return status === "rejected" || status === "expired" ? `${status} after ${took}` : `${status} in ${took}`;
}
