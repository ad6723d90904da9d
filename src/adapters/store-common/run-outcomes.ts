/**
 * The run commands' answers, shared by both store adapters: how a publish meets an existing run,
 * which answer a confirm, reject or cancel gets for the run's status, and the outcome each command
 * stores as its inbox row's result (a StoreCommandResult, the same from either store).
 */
import type { RunStatus } from "../../domain/model.js";
import type { RunDecision } from "../../domain/run-states.js";
import type { CreateRunResult, RoomPolicy, RunRecord, StoreCommandResult } from "../../ports/store.js";

export type { RunDecision };

/** Publishing a dag_id the room already has: the same content is "exists", other content a conflict. */
export function againstExisting(existing: RunRecord, hash: string): CreateRunResult {
  return existing.hash === hash ? { kind: "exists", run: existing } : { kind: "conflict", existing };
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

/** The inbox result of a publish command. */
export function publishOutcome(
  result: CreateRunResult,
  dagId: string,
  hash: string,
  verb?: string,
): StoreCommandResult {
  const run = result.kind === "conflict" ? result.existing : result.run;
  return {
    op: "publish",
    ...(verb === undefined ? {} : { verb }),
    kind: result.kind,
    runId: run.runId,
    dagId,
    status: run.status,
    ...(result.kind === "conflict" ? { existingHash: run.hash, hash } : {}),
  };
}

/** The inbox result of a confirm, reject or cancel. */
export function decisionOutcome(
  decision: RunDecision,
  kind: "done" | "already" | "wrong-status",
  run: RunRecord,
  dagId: string,
  by: string,
): StoreCommandResult {
  return { op: decision, kind, runId: run.runId, dagId, status: run.status, by };
}

/** The inbox result of a `cap` command. */
export function capOutcome(cap: number, previous: number): StoreCommandResult {
  return { op: "cap", kind: "set", cap, previous };
}

/** The inbox result of a `policy` command. */
export function policyOutcome(policy: RoomPolicy, previous: RoomPolicy | null): StoreCommandResult {
  return { op: "policy", kind: "set", policy, previous };
}
