/**
 * The DAG run state machine of docs/architecture.md §3, as data: every legal move with who may make it.
 *
 *   pending → running | rejected | expired        (the confirmation step)
 *   running → succeeded | failed                  (derived from the task set, see run-status.ts)
 *   running → canceling → canceled                (cancel; canceled once every task is terminal)
 *   pending | running → canceled                  (cancel of a run with no task running: at once)
 *
 * Every actor runs on the room's leader and every write is fenced by its term: `leader` is a command
 * handler (confirm, reject, cancel) or the loop that derives a run's outcome from its tasks, `reaper`
 * expires runs whose confirmation window passed. Terminal states never change.
 */
import type { RunStatus } from "./model.js";
import { RUN_STATUSES } from "./model.js";
import { canMove, targetsOf } from "./transition-table.js";

/** The decisions a command takes on a run (confirm, reject, cancel): the one list of them. */
export const RUN_DECISIONS = ["confirm", "reject", "cancel"] as const;
export type RunDecision = (typeof RUN_DECISIONS)[number];

export function isRunDecision(value: unknown): value is RunDecision {
  return (RUN_DECISIONS as readonly unknown[]).includes(value);
}

/** Whether a run in `status` takes the decision now ("apply"), has already had it, or cannot have it. */
export function decisionVerdict(
  decision: RunDecision,
  status: RunStatus,
): "apply" | "already" | "wrong-status" {
  switch (decision) {
    case "confirm":
      if (status === "pending") return "apply";
      return ["running", "canceling", "succeeded", "failed"].includes(status) ? "already" : "wrong-status";
    case "reject":
      if (status === "pending") return "apply";
      return status === "rejected" ? "already" : "wrong-status";
    case "cancel":
      if (status === "canceling" || status === "canceled") return "already";
      return status === "pending" || status === "running" ? "apply" : "wrong-status";
  }
}

/**
 * A run's status as of `now` (the store's clock of the transaction deciding on it): a pending run
 * whose confirmation deadline passed is expired, whether or not the reaper wrote it yet. A leader
 * that handles its inbox before it reaps (or was paused across the deadline) so judges a late
 * confirmation as one of an expired run, and the reaper then writes the expiry as always.
 */
export function runStatusAt(
  run: { status: RunStatus; confirmDeadline: number | null },
  now: number,
): RunStatus {
  return run.status === "pending" && run.confirmDeadline !== null && now >= run.confirmDeadline
    ? "expired"
    : run.status;
}

export const RUN_ACTORS = ["leader", "reaper"] as const;
export type RunActor = (typeof RUN_ACTORS)[number];

export interface RunTransition {
  readonly from: RunStatus;
  readonly to: RunStatus;
  readonly who: readonly RunActor[];
  readonly condition: string;
}

export const RUN_TRANSITIONS: readonly RunTransition[] = [
  { from: "pending", to: "running", who: ["leader"], condition: "an authorised confirm" },
  { from: "pending", to: "rejected", who: ["leader"], condition: "an authorised reject" },
  { from: "pending", to: "expired", who: ["reaper"], condition: "the confirmation window passed" },
  { from: "running", to: "succeeded", who: ["leader"], condition: "derived: every task succeeded" },
  {
    from: "running",
    to: "failed",
    who: ["leader"],
    condition: "derived: every task terminal, some task not succeeded",
  },
  { from: "running", to: "canceling", who: ["leader"], condition: "an authorised cancel" },
  // The event-log oracle of the store contract found these two: the stores always did them, the
  // table (and the design it was written from) left them out. A cancel with nothing running has nothing to wait for.
  {
    from: "pending",
    to: "canceled",
    who: ["leader"],
    condition: "an authorised cancel of a run awaiting confirmation",
  },
  {
    from: "running",
    to: "canceled",
    who: ["leader"],
    condition: "an authorised cancel while no task of the run is running or canceling",
  },
  { from: "canceling", to: "canceled", who: ["leader"], condition: "derived: every task terminal" },
];

export const TERMINAL_RUN_STATUSES: ReadonlySet<RunStatus> = new Set<RunStatus>([
  "succeeded",
  "failed",
  "canceled",
  "rejected",
  "expired",
]);

export function isTerminalRun(status: RunStatus): boolean {
  return TERMINAL_RUN_STATUSES.has(status);
}

export function isRunStatus(value: unknown): value is RunStatus {
  return typeof value === "string" && (RUN_STATUSES as readonly string[]).includes(value);
}

export function canTransitionRun(from: RunStatus, to: RunStatus, actor: RunActor): boolean {
  return canMove(RUN_TRANSITIONS, from, to, actor);
}

/**
 * The status a decision the verdict applies moves a run in `from` to: confirm → running, reject →
 * rejected, cancel → canceling while some task of the run is still live (its process must stop
 * first), else canceled. Asked of the table: a move it does not allow throws, and nothing is written.
 */
export function decisionTarget(decision: RunDecision, from: RunStatus, liveTasks: number): RunStatus {
  const to: RunStatus =
    decision === "confirm"
      ? "running"
      : decision === "reject"
        ? "rejected"
        : liveTasks > 0
          ? "canceling"
          : "canceled";
  if (!canTransitionRun(from, to, "leader"))
    throw new Error(`a ${decision} cannot move a run from ${from} to ${to} (src/domain/run-states.ts)`);
  return to;
}

/** The statuses `actor` may move a run to from `from` (every actor when none is given), in table order. */
export function runTargets(from: RunStatus, actor?: RunActor): RunStatus[] {
  return targetsOf(RUN_TRANSITIONS, from, actor);
}
