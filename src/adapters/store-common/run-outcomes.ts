/**
 * The run commands' answers, shared by both store adapters: how a publish meets an existing run, and
 * the outcome each command stores as its inbox row's result (a StoreCommandResult, the same from
 * either store). Which answer a decision gets for the run's status is the domain's (decisionVerdict).
 */
import type { RunDecision } from "../../domain/run-states.js";
// The rule is the domain's (one place for every decision); both stores apply it.
export { decisionVerdict, runStatusAt } from "../../domain/run-states.js";
import type {
  CreateRunResult,
  PolicyProposal,
  RoomPolicy,
  RunRecord,
  SetPolicyOptions,
  StoreCommandResult,
} from "../../ports/store.js";

export type { RunDecision };

/** Publishing a dag_id the room already has: the same content is "exists", other content a conflict. */
export function againstExisting(existing: RunRecord, hash: string): CreateRunResult {
  return existing.hash === hash ? { kind: "exists", run: existing } : { kind: "conflict", existing };
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

/** The inbox result of a `policy` command that changed the policy (confirming `proposal`, if given). */
export function policyOutcome(
  policy: RoomPolicy,
  previous: RoomPolicy | null,
  proposal?: { changeId: string; proposedBy: string },
): StoreCommandResult {
  return { op: "policy", kind: "set", policy, previous, ...(proposal === undefined ? {} : { proposal }) };
}

/** The inbox result of a `policy` command that proposed a change under the two-person rule. */
export function proposalOutcome(proposal: PolicyProposal): StoreCommandResult {
  return { op: "policy", kind: "proposed", proposal };
}

/** The `policy.set` event's data: who, from what, to what, and whose proposal it was. */
export function policySetEvent(
  policy: RoomPolicy,
  previous: RoomPolicy | null,
  by: string,
  options: SetPolicyOptions,
  proposal: { changeId: string; proposedBy: string } | undefined,
): Record<string, unknown> {
  return {
    policy,
    previous,
    by,
    ...(options.change === undefined ? {} : { change: options.change }),
    ...(proposal === undefined ? {} : { proposal }),
  };
}
