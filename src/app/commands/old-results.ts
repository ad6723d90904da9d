/**
 * Inbox rows handled by a store of 0.3.1 or earlier (0.2.0, 0.3.x): a store operation that marked its
 * command's row handled kept its own result there (`op`: publish, a decision, cap, policy, schedule,
 * gate), not the app's outcome. Such rows stay in processed_events, and a node of those releases may
 * still write them while a fleet is upgraded (docs/architecture.md §11), so the app reads them here,
 * once, into the outcome every face renders: the old shape is read nowhere else.
 */
import { isRunDecision, isRunStatus } from "../../domain/run-states.js";
import type { RunDecision } from "../../domain/run-states.js";
import type { GateDecisionRecord } from "../../domain/gates.js";
import type { ScheduleAction, ScheduleState } from "../../domain/schedule.js";
import type { RunStatus } from "../../domain/model.js";
import type {
  CreateRunResult,
  InboxEvent,
  PolicyProposal,
  RoomPolicy,
  RunDecisionResult,
  ScheduleChangeResult,
} from "../../ports/store.js";
import type { CommandPolicy, CommandStore } from "./context.js";
import { decodeInboxContent } from "./inbox-intent.js";
import type { Outcome } from "./outcome.js";
import { findRun } from "../run-ref.js";
import { conflictOutcome, creationOutcome } from "./run-creation.js";
import { describeDecision } from "./run-decisions.js";
import { gateOutcomeFromStored } from "./gate-decisions.js";
import { describePolicyDiff, proposedOutcome } from "./verbs/policy.js";
import { parseCommand, parseCommandData } from "./verbs/index.js";

/** The result an old store wrote, by `op`. */
export type OldStoreResult =
  | {
      op: "publish";
      kind: CreateRunResult["kind"];
      runId: string;
      dagId: string;
      /** The run's status when the command was handled (it may have moved on since). */
      status: RunStatus;
      /** A conflict's two hashes. */
      existingHash?: string;
      hash?: string;
      /** The verb of the command that created it (publish, run, retry), when recorded. */
      verb?: string;
    }
  | {
      op: RunDecision;
      kind: RunDecisionResult["kind"];
      runId: string;
      dagId: string;
      status: RunStatus;
      by: string;
    }
  | { op: "cap"; kind: "set"; cap: number; previous: number }
  | {
      op: "schedule";
      action: ScheduleAction;
      kind: ScheduleChangeResult["kind"];
      dagId: string;
      /** The schedule's state after the command. */
      state: ScheduleState;
      by: string;
    }
  | {
      op: "policy";
      kind: "set";
      policy: RoomPolicy;
      previous: RoomPolicy | null;
      /** Set when the change was a proposal that this command confirmed. */
      proposal?: { changeId: string; proposedBy: string };
    }
  | { op: "policy"; kind: "proposed"; proposal: PolicyProposal }
  | ({ op: "gate" } & GateDecisionRecord);

/**
 * The outcome of an old row: what its result says, with the run it names read again (an old result
 * kept only the run's id and status), as those releases' own reply step did. Null for a row that is
 * not of the old shape.
 */
export async function outcomeOfOldResult(
  deps: { store: Pick<CommandStore, "getRunById" | "getRun">; policy: CommandPolicy },
  row: InboxEvent,
): Promise<Outcome | null> {
  if (row.result === null || row.result["op"] === undefined) return null;
  const result = readOldResult(row.result);
  if (result === null) return unreadable(row, `unknown result ${JSON.stringify(row.result).slice(0, 200)}`);
  if (result.op === "cap") return { kind: "cap", cap: result.cap, previous: result.previous };
  if (result.op === "policy") {
    if (result.kind === "proposed") return proposedOutcome(result.proposal);
    const { policy, previous, proposal } = result;
    const changed = describePolicyDiff(previous, policy);
    return {
      kind: "policy",
      policy,
      changed,
      by: row.sender,
      ...(proposal === undefined ? {} : { proposal }),
    };
  }
  if (result.op === "schedule") {
    const { action, kind, dagId, state, by } = result;
    return { kind: "schedule-changed", action, result: kind, dagId, state, by };
  }
  const run = await deps.store.getRunById(result.runId);
  if (run === null) return unreadable(row, "its run is gone");
  if (result.op === "gate") return gateOutcomeFromStored(result, run.publishEventId);
  const recorded = { ...run, status: result.status };
  if (result.op === "publish") {
    const retried = retriedId(row);
    const retryOf = retried === null ? null : await findRun(deps.store, row.roomId, retried);
    return result.kind === "conflict"
      ? conflictOutcome(deps.store, row.roomId, recorded)
      : creationOutcome({ kind: result.kind, run: recorded }, retryOf, deps.policy);
  }
  return describeDecision(result.op, { kind: result.kind, run: recorded }, result.by);
}

/** The answer to a handled row whose result no reader of this release knows. */
export function unreadable(row: InboxEvent, why: string): Outcome {
  return {
    kind: "command-error",
    message: `the command was handled, but its result cannot be shown (${why})`,
    helpLine: `event ${row.eventId}`,
  };
}

/** The run a `retry` command named, read from the row's command (an old result did not keep it). */
function retriedId(row: InboxEvent): string | null {
  const intent = decodeInboxContent(row.content, row.sender);
  if (intent.kind !== "message" && intent.kind !== "data") return null;
  const parsed = intent.kind === "data" ? parseCommandData(intent.data) : parseCommand(intent.input);
  return parsed.kind === "command" && parsed.command.verb === "retry" ? parsed.command.id : null;
}

const str = (v: unknown): v is string => typeof v === "string";
const num = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v);
const obj = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

const GATE_VERDICT_KINDS = [
  "recorded",
  "approved",
  "denied",
  "already",
  "closed",
  "not-open",
  "form",
] as const;
const isGateVerdictKind = (v: unknown): v is (typeof GATE_VERDICT_KINDS)[number] =>
  typeof v === "string" && (GATE_VERDICT_KINDS as readonly string[]).includes(v);

/** An old row's result as its union; null for anything else (a typo'd op, a missing field). */
export function readOldResult(r: Record<string, unknown>): OldStoreResult | null {
  const { op, kind, runId, dagId, status } = r;
  switch (op) {
    case "publish":
      if ((kind !== "created" && kind !== "exists" && kind !== "conflict") || !str(runId) || !str(dagId))
        return null;
      if (!isRunStatus(status)) return null;
      return {
        op,
        kind,
        runId,
        dagId,
        status,
        ...(str(r["existingHash"]) ? { existingHash: r["existingHash"] } : {}),
        ...(str(r["hash"]) ? { hash: r["hash"] } : {}),
        ...(str(r["verb"]) ? { verb: r["verb"] } : {}),
      };
    case "cap": {
      const { cap, previous } = r;
      return kind === "set" && num(cap) && num(previous) ? { op, kind, cap, previous } : null;
    }
    case "policy": {
      const { policy, previous, proposal } = r;
      if (kind === "proposed") {
        if (!obj(proposal) || !str(proposal["changeId"]) || !obj(proposal["change"])) return null;
        return { op, kind, proposal: proposal as unknown as PolicyProposal };
      }
      if (kind !== "set" || !obj(policy) || (previous !== null && !obj(previous))) return null;
      const confirmed =
        obj(proposal) && str(proposal["changeId"]) && str(proposal["proposedBy"])
          ? { proposal: { changeId: proposal["changeId"], proposedBy: proposal["proposedBy"] } }
          : {};
      return {
        op,
        kind,
        policy: policy as unknown as RoomPolicy,
        previous: previous as RoomPolicy | null,
        ...confirmed,
      };
    }
    case "schedule": {
      const { action, state, by } = r;
      if (kind !== "done" && kind !== "already" && kind !== "wrong-state") return null;
      if (action !== "pause" && action !== "resume" && action !== "delete") return null;
      if (state !== "active" && state !== "paused" && state !== "deleted") return null;
      return str(dagId) && str(by) ? { op, action, kind, dagId, state, by } : null;
    }
    case "gate": {
      const { decision, taskId, by, missing, message, values } = r;
      if (decision !== "approve" && decision !== "deny") return null;
      if (!str(runId) || !str(dagId) || !str(taskId) || !str(by) || !isGateVerdictKind(kind)) return null;
      return {
        op,
        decision,
        kind,
        runId,
        dagId,
        taskId,
        by,
        ...(num(missing) ? { missing } : {}),
        ...(str(message) ? { message } : {}),
        ...(obj(values) && Object.values(values).every(str)
          ? { values: values as Record<string, string> }
          : {}),
      };
    }
    default: {
      if (!isRunDecision(op)) return null;
      const by = r["by"];
      if (kind !== "done" && kind !== "already" && kind !== "wrong-status") return null;
      if (!str(runId) || !str(dagId) || !isRunStatus(status) || !str(by)) return null;
      return { op, kind, runId, dagId, status, by };
    }
  }
}
