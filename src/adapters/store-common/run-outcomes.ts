/**
 * The run commands' answers, shared by both store adapters: how a publish meets an existing run, and
 * the `policy.set` event's data. Which answer a decision gets for the run's status is the domain's
 * (decisionVerdict); what a command's inbox row keeps is the app's answer (ports/store.ts CommandContext).
 */
import type { RunDecision } from "../../domain/run-states.js";
// The rule is the domain's (one place for every decision); both stores apply it.
export { decisionVerdict, runStatusAt } from "../../domain/run-states.js";
import type { CreateRunResult, RoomPolicy, RunRecord, SetPolicyOptions } from "../../ports/store.js";

export type { RunDecision };

/** Publishing a dag_id the room already has: the same content is "exists", other content a conflict. */
export function againstExisting(existing: RunRecord, hash: string): CreateRunResult {
  return existing.hash === hash ? { kind: "exists", run: existing } : { kind: "conflict", existing };
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
