/**
 * What a decision on an approval gate writes, shared by both stores: the domain decides
 * (decideGate in src/domain/gates.ts); this names the task's new status, its error, and the event-log
 * lines. The stores apply it with one guarded UPDATE in the command's
 * fenced transaction.
 */
import type { GateDecisionInput, GateSpec, GateState, GateVerdict } from "../../domain/gates.js";
import { gateOpenedData } from "../../domain/gates.js";
import type { TaskStatus } from "../../domain/model.js";
import type { LeaderFence } from "../../ports/store.js";
import type { LogLine } from "./records.js";
import { sessionKey } from "./records.js";

/** `gate.opened` on the gate's task, written by the scheduler when what it needs has succeeded. */
export function gateOpenedLine(
  fence: LeaderFence,
  gate: { runId: string; taskId: string },
  spec: GateSpec,
  state: GateState,
): LogLine {
  return {
    kind: "gate.opened",
    runId: gate.runId,
    taskId: gate.taskId,
    term: fence.term,
    actor: sessionKey(fence.session),
    data: gateOpenedData(spec, state),
  };
}

export interface GateWrite {
  /** The task's status after the write; null when nothing is written. */
  status: TaskStatus | null;
  /** Whether the task ends (finished_at is set, the deadline cleared). */
  ends: boolean;
  error: string | null;
  /**
   * The gate's outputs (its task's output values: what dependents read as
   * {tasks.ID.outputs.NAME}), set when it passes; null leaves them as they are.
   */
  outputs: Record<string, string> | null;
  lines: LogLine[];
}

export function gateWrite(verdict: GateVerdict, input: GateDecisionInput): GateWrite {
  const who = { by: input.by, face: input.face };
  switch (verdict.kind) {
    case "recorded":
      return {
        status: "blocked",
        ends: false,
        error: null,
        outputs: null,
        lines: [{ kind: "gate.approval", data: { ...who, values: input.values, missing: verdict.missing } }],
      };
    case "approved":
      return {
        status: "succeeded",
        ends: true,
        error: null,
        outputs: verdict.state.values,
        lines: [
          { kind: "gate.approval", data: { ...who, values: input.values, missing: 0 } },
          {
            kind: "gate.approved",
            data: {
              ...who,
              approvers: verdict.state.approvals.map((a) => a.by),
              values: verdict.state.values,
            },
          },
          { kind: "task.succeeded", data: { gate: true } },
        ],
      };
    case "denied":
      return {
        status: "failed",
        ends: true,
        error: `denied by ${input.by}${input.reason === null ? "" : `: ${input.reason}`}`,
        outputs: null,
        lines: [
          { kind: "gate.denied", data: { ...who, reason: input.reason } },
          { kind: "task.failed", data: { gate: true, reason: "denied" } },
        ],
      };
    default:
      return { status: null, ends: false, error: null, outputs: null, lines: [] };
  }
}
