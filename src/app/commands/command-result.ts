/**
 * Reading a handled command's stored result back as the CommandResult union (src/ports/store.ts):
 * once, here, instead of probing fields where it is used. Rows written by older versions have the
 * same shapes; anything else is null (the caller says the result cannot be shown).
 */
import { isRunDecision, isRunStatus } from "../../domain/run-states.js";
import { isMarkTarget } from "../../domain/task-mark.js";
import { isTaskStatus } from "../../domain/task-states.js";
import type { CommandResult, PolicyProposal, RoomPolicy, StoreCommandResult } from "../../ports/store.js";

const str = (v: unknown): v is string => typeof v === "string";
const num = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v);
const obj = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

const MARK_VERDICT_KINDS = ["marked", "running", "wrong-status", "run-not-running"] as const;
const isMarkVerdictKind = (v: unknown): v is (typeof MARK_VERDICT_KINDS)[number] =>
  typeof v === "string" && (MARK_VERDICT_KINDS as readonly string[]).includes(v);

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

export function readCommandResult(json: Record<string, unknown> | null): CommandResult | null {
  if (json === null) return null;
  const op = json["op"];
  if (op === undefined) {
    const outcome = json["dagbotOutcome"];
    if (!obj(outcome) || !str(outcome["kind"])) return null;
    const root = json["threadRoot"];
    return {
      dagbotOutcome: { ...outcome, kind: outcome["kind"] },
      ...(str(root) || root === null ? { threadRoot: root } : {}),
    };
  }
  return readStoreResult(json);
}

function readStoreResult(r: Record<string, unknown>): StoreCommandResult | null {
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
    case "mark": {
      const { taskId, to, by, reason, revived, runStatus } = r;
      if (!str(runId) || !str(dagId) || !str(taskId) || !str(by) || !isTaskStatus(status)) return null;
      if (!isMarkTarget(to) || !isMarkVerdictKind(kind) || (reason !== null && !str(reason))) return null;
      if (!Array.isArray(revived) || !revived.every(str)) return null;
      return {
        op,
        kind,
        runId,
        dagId,
        taskId,
        to,
        by,
        reason,
        status,
        revived,
        ...(isRunStatus(runStatus) ? { runStatus } : {}),
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
