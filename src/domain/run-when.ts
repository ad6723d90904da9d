/**
 * Run conditions (`when`, docs/dag-format.md "Run conditions"; docs/architecture.md §4 step 4):
 * whether a blocked task waits, runs or is skipped, judged from how its needs ended. Pure; the one
 * place the rule lives: the scheduler's reference (scheduling.ts), the leader's view
 * (schedule-view.ts), the store's re-check before it queues (ops/schedule-step.ts) and the `why`
 * reasons (wait-reasons.ts) all ask here.
 *
 * - "succeeded" (the default): runs once every need succeeded; skipped as soon as one ended failed,
 *   timed_out, canceled or skipped.
 * - "failed": waits until every need ended; runs if one ended failed or timed_out and is not a
 *   denied approval gate; otherwise skipped.
 * - "denied": waits until every need ended; runs if one is an approval gate that was denied;
 *   otherwise skipped.
 * - "done": waits until every need ended, then runs whatever they ended as.
 *
 * A need missing from what the caller knows never ends: its task waits (parseDag rejects unknown
 * needs; this is defence only).
 */
import type { TaskStatus } from "./model.js";
import { SKIPPING_TASK_STATUSES, isTerminalTask } from "./task-states.js";

export const RUN_WHENS = ["succeeded", "failed", "denied", "done"] as const;
export type RunWhen = (typeof RUN_WHENS)[number];

export function isRunWhen(value: unknown): value is RunWhen {
  return typeof value === "string" && (RUN_WHENS as readonly string[]).includes(value);
}

/** A task that waits for its needs to end rather than to succeed. */
export function isConditional(when: RunWhen | null | undefined): boolean {
  return isRunWhen(when) && when !== "succeeded";
}

/** How one need stands: its status (undefined when unknown) and whether it is an approval gate. */
export interface NeedEnd {
  status: TaskStatus | undefined;
  isGate?: boolean;
}

/**
 * An approval gate that was denied. A gate ends `failed` only by a deny (task-states.ts: the one
 * move of a gate to failed is "an open approval gate: denied"; its timeout ends it timed_out or
 * skipped, and a mark never moves anything to failed), so the status and the gate flag say it
 * without reading the gate's state.
 */
export function isDeniedGate(need: NeedEnd): boolean {
  return need.isGate === true && need.status === "failed";
}

/** A need that ended failed or timed out, a denied approval gate aside. */
export function isFailedNeed(need: NeedEnd): boolean {
  return (need.status === "failed" || need.status === "timed_out") && !isDeniedGate(need);
}

export type WhenVerdict = "wait" | "run" | "skip";

/** What a blocked task of a running run does, given its condition and how its needs stand. */
export function judgeWhen(when: RunWhen | undefined, needs: readonly NeedEnd[]): WhenVerdict {
  if (!isConditional(when)) {
    if (needs.some((n) => n.status !== undefined && SKIPPING_TASK_STATUSES.has(n.status))) return "skip";
    return needs.every((n) => n.status === "succeeded") ? "run" : "wait";
  }
  if (!needs.every((n) => n.status !== undefined && isTerminalTask(n.status))) return "wait";
  if (when === "done") return "run";
  if (when === "failed") return needs.some(isFailedNeed) ? "run" : "skip";
  return needs.some(isDeniedGate) ? "run" : "skip";
}

/** The condition in words, for `why` and the picture: "runs if one failed". */
export function whenWords(when: RunWhen): string {
  switch (when) {
    case "succeeded":
      return "runs if all succeeded";
    case "failed":
      return "runs if one failed";
    case "denied":
      return "runs if an approval was denied";
    case "done":
      return "runs whatever they ended as";
  }
}

/** Why a conditional task was skipped: its condition was not met. */
export function whenNotMetWords(when: RunWhen): string {
  switch (when) {
    case "failed":
      return 'its condition when = "failed" was not met: no need failed';
    case "denied":
      return 'its condition when = "denied" was not met: no approval it needs was denied';
    default:
      return `its condition when = "${when}" was not met`;
  }
}
