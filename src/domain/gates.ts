/**
 * Approval gates (docs/architecture.md §3, "Gate"): a task that runs no action but waits, once its
 * needs succeeded, for N distinct allowed people to approve it (with the values of its form), or
 * for one to deny it, or for its timeout. Pure: who may decide, what a decision does to a gate's
 * state, and how a form's values are checked. The stores apply these verdicts in one guarded write.
 *
 * A gate's life, kept on its task row (`gate` is the spec, `gate_state` the state):
 *   task blocked, no state ──(needs succeeded; scheduler)──▶ open (blocked, state.openedAt set)
 *   open ──(Nth distinct approval; leader)──▶ task succeeded (state.decision "approved")
 *   open ──(a deny; leader)──▶ task failed (state.decision "denied")
 *   open ──(deadline; reaper)──▶ task timed_out or skipped (on_timeout), state.decision "timed_out"
 * An open gate stays `blocked`: never claimable by a worker, never counted against caps.
 */
import type { CheckBudget } from "./params.js";
import { newCheckBudget, paramValueProblem, PARAM_LIMITS } from "./params.js";
import type { GateSpec, GateWho } from "./model.js";
import { holdsReference } from "./references.js";

// The declaration's shapes live with the rest of the model (model.ts); they are named here too.
export type { GateSpec, GateWho } from "./model.js";

/** The outbox txnId of a gate's message: one per (run, gate), whichever leader queues it. */
export const gateTxnId = (runId: string, taskId: string): string => `gate.${runId}.${taskId}`;

/** The face a decision came from. */
export type GateFace = "chat" | "cli" | "http";

export interface GateApproval {
  by: string;
  face: GateFace;
  at: number;
  /** The form values this approval gave (possibly none). */
  values: Record<string, string>;
}

export interface GateState {
  openedAt: number;
  /** When the reaper times it out; null without a timeout. */
  deadline: number | null;
  approvals: GateApproval[];
  /** Every form value given so far, merged (a field keeps the first value given for it). */
  values: Record<string, string>;
  decision: null | {
    kind: "approved" | "denied" | "timed_out";
    by: string | null;
    face: GateFace | null;
    at: number;
    reason: string | null;
  };
  /** The chat message that announced it (its event id once sent), so a reaction to it decides. */
  messageTxnId?: string;
}

export function openGateState(now: number, spec: GateSpec): GateState {
  return {
    openedAt: now,
    deadline: spec.timeoutMs === null ? null : now + spec.timeoutMs,
    approvals: [],
    values: {},
    decision: null,
  };
}

/** What the permission oracle says of a sender, as a gate reads it. */
export type Decider =
  | { kind: "local-operator"; id: string }
  | { kind: "room-member"; id: string; powerLevel: number; operator: boolean };

/** The run facts the two-person rule reads. */
export interface GateRunFacts {
  publisher: string;
  confirmedBy: string | null;
  twoPersonRule: boolean;
}

/** Null when `who` may decide on the gate (approve or deny); else why not, in words. */
export function gateDeciderProblem(spec: GateSpec, who: Decider, run: GateRunFacts): string | null {
  // The local operator holds the store's credentials: as for confirm, no rule would stop them.
  if (who.kind === "local-operator") return null;
  const allowed =
    spec.who === "operators"
      ? who.operator
      : typeof spec.who === "number"
        ? who.powerLevel >= spec.who
        : spec.who.includes(who.id);
  if (!allowed) return `only ${whoWords(spec.who)} may decide on this gate`;
  const ownRun = who.id === run.publisher || (run.confirmedBy !== null && who.id === run.confirmedBy);
  if (ownRun && !(spec.publisherMayApprove && !run.twoPersonRule)) {
    const role = who.id === run.publisher ? "published" : "confirmed";
    return run.twoPersonRule
      ? `you ${role} this run, and the two-person rule is on here: someone else must decide on its gate`
      : `you ${role} this run, and its gate does not let its publisher or confirmer decide (publisher_may_approve)`;
  }
  return null;
}

/** `who` in words: "the room's operators", "@a:x or @b:x", "members with power level 50 or more". */
export function whoWords(who: GateWho): string {
  if (who === "operators") return "the room's operators";
  if (typeof who === "number") return `members with power level ${who} or more`;
  return who.length === 1 ? who[0]! : `${who.slice(0, -1).join(", ")} or ${who[who.length - 1]!}`;
}

/**
 * Why the values an approver gives cannot be taken, or null: each name a field of the form, each
 * value matching its field's pattern, within the parameters' limits (one check budget for all).
 */
export function gateValuesProblem(
  spec: GateSpec,
  values: Readonly<Record<string, string>>,
  budget: CheckBudget = newCheckBudget(),
): string | null {
  const names = Object.keys(values);
  if (names.length > PARAM_LIMITS.maxParams)
    return `${names.length} values given; a form has at most ${PARAM_LIMITS.maxParams}`;
  for (const name of names) {
    if (!Object.hasOwn(spec.form, name)) {
      const fields = Object.keys(spec.form);
      return fields.length === 0
        ? `this gate has no form, so "${name}=…" means nothing; approve without values`
        : `this gate's form has no field "${name}"; its fields: ${fields.join(", ")}`;
    }
    const value = values[name]!;
    // A form value is the gate's output, and an output may hold no reference at all: a {params.…}
    // approved as text would become another parameter's value where a retry carries it into an
    // argument, past every pattern (docs/architecture.md §6, "Outputs", step 5).
    if (holdsReference(value))
      return `field "${name}" holds a {params.…}, {tasks.…} or {item} reference, which a form value may not: it becomes the gate's output`;
    if (/[\r\n]/.test(value)) return `field "${name}" spans more than one line; a value is one line`;
    const problem = paramValueProblem(name, { pattern: spec.form[name]!, default: null }, value, budget);
    if (problem !== null) return problem.replace(/^parameter /, "field ");
  }
  return null;
}

/**
 * Whether two senders are one approver. A room member is one person per Matrix user id. The CLI
 * (`local:<user>`) and every HTTP token (`http:<name>`) are the local operator, who holds the
 * store's or the node's credentials: whatever the user or token name, they are one principal and
 * count as one approver, so `approvers = 2` always means two people, at least one of them a room
 * member (docs/architecture.md §3, "Gate").
 */
export function sameApprover(a: string, b: string): boolean {
  return isPersonId(a) || isPersonId(b) ? a === b : true;
}

const isPersonId = (sender: string): boolean => sender.startsWith("@");

export type GateVerdict =
  /** The approval counts; the gate still waits for `missing` more. */
  | { kind: "recorded"; state: GateState; missing: number }
  /** This approval was the last one needed: the task succeeds with `state.values` as its outputs. */
  | { kind: "approved"; state: GateState }
  | { kind: "denied"; state: GateState }
  /** This person approved already; nothing changes. */
  | { kind: "already"; state: GateState }
  /**
   * The gate is decided (or timed out, or its run canceled), or its deadline passed: nothing
   * changes. `message` says which when it is not the plain "decided already".
   */
  | { kind: "closed"; state: GateState | null; message?: string }
  /** Its needs have not all succeeded yet: nothing to decide. */
  | { kind: "not-open" }
  /** A value differs from one another approver gave, or the last approval leaves fields empty. */
  | { kind: "form"; message: string };

export interface GateDecisionInput {
  decision: "approve" | "deny";
  by: string;
  face: GateFace;
  values: Record<string, string>;
  reason: string | null;
}

/**
 * A gate decision as the inbox row keeps it: the store writes it with the decision, and the answer
 * (and its reply after a restart) is read from it, so it is built once, here.
 */
// A type, not an interface: the store keeps it as JSON (a Record<string, unknown>).
export type GateDecisionRecord = {
  decision: GateDecisionInput["decision"];
  kind: GateVerdict["kind"];
  runId: string;
  dagId: string;
  taskId: string;
  by: string;
  /** Approvals still needed after a recorded one. */
  missing?: number;
  /** Why a form refused the approval, or why the gate is closed. */
  message?: string;
  /** The form's values once approved. */
  values?: Record<string, string>;
};

export function gateDecisionRecord(
  verdict: GateVerdict,
  input: Pick<GateDecisionInput, "decision" | "by">,
  run: { runId: string; dagId: string },
  taskId: string,
): GateDecisionRecord {
  return {
    decision: input.decision,
    kind: verdict.kind,
    runId: run.runId,
    dagId: run.dagId,
    taskId,
    by: input.by,
    ...(verdict.kind === "recorded" ? { missing: verdict.missing } : {}),
    ...(verdict.kind === "form" || (verdict.kind === "closed" && verdict.message !== undefined)
      ? { message: verdict.message }
      : {}),
    ...(verdict.kind === "approved" ? { values: verdict.state.values } : {}),
  };
}

/**
 * What a decision does to a gate: `status` is its task's status now. A deny ends it at once; an
 * approval counts once per person, and the one that reaches `approvers` approves it, provided every
 * field of the form has a value by then. A field keeps the first value given: an approver who gives
 * another is refused, so no one's approval stands behind a value they did not see.
 */
export function decideGate(
  spec: GateSpec,
  status: string,
  state: GateState | null,
  input: GateDecisionInput,
  now: number,
): GateVerdict {
  if (state === null) return status === "blocked" ? { kind: "not-open" } : { kind: "closed", state };
  // Whoever approved already hears so, even once the gate is decided: their approval counted.
  if (input.decision === "approve" && state.approvals.some((a) => sameApprover(a.by, input.by)))
    return { kind: "already", state };
  if (state.decision !== null || status !== "blocked") return { kind: "closed", state };
  // The deadline is judged here, on the store's clock of the decision's own transaction, not by
  // whether the reaper came first: a leader that handles its inbox before it reaps (or was paused
  // across the deadline) must not pass a gate on an approval that came too late. The reaper then
  // times it out, as it would have.
  if (state.deadline !== null && now >= state.deadline)
    return {
      kind: "closed",
      state,
      message: `its deadline passed at ${hhmm(state.deadline)} UTC; it times out`,
    };
  if (input.decision === "deny") {
    return {
      kind: "denied",
      state: {
        ...state,
        decision: { kind: "denied", by: input.by, face: input.face, at: now, reason: input.reason },
      },
    };
  }
  const values = { ...state.values };
  for (const [name, value] of Object.entries(input.values)) {
    const before = values[name];
    if (before !== undefined && before !== value) {
      const giver = state.approvals.find((a) => a.values[name] !== undefined)?.by ?? "another approver";
      return {
        kind: "form",
        message: `${giver} approved with ${name}=${before}; approve with that value (or without ${name}), or deny`,
      };
    }
    values[name] = value;
  }
  const approvals = [...state.approvals, { by: input.by, face: input.face, at: now, values: input.values }];
  const missing = spec.approvers - approvals.length;
  if (missing > 0) return { kind: "recorded", state: { ...state, approvals, values }, missing };
  const empty = Object.keys(spec.form).filter((f) => values[f] === undefined);
  if (empty.length > 0)
    return {
      kind: "form",
      message: `this approval would open the gate, but its form still needs ${empty.map((f) => `${f}=…`).join(" ")}: approve with ${empty.length === 1 ? "it" : "them"}`,
    };
  return {
    kind: "approved",
    state: {
      ...state,
      approvals,
      values,
      decision: { kind: "approved", by: input.by, face: input.face, at: now, reason: null },
    },
  };
}

/** The reaper's verdict on an open gate past its deadline: the task's end and the state kept. */
export function timeOutGate(
  spec: GateSpec,
  state: GateState,
  now: number,
): { to: "timed_out" | "skipped"; state: GateState } {
  return {
    to: spec.onTimeout === "skip" ? "skipped" : "timed_out",
    state: { ...state, decision: { kind: "timed_out", by: null, face: null, at: now, reason: null } },
  };
}

const hhmm = (at: number): string => new Date(at).toISOString().slice(11, 16);

/**
 * A decided gate in words, for status lines: `approved by @a:x (chat 21:50), local:op (cli 21:51)`,
 * `denied by @b:x (chat 21:50): not today`, `timed out at 21:50 UTC`.
 */
export function gateDecisionWords(state: GateState): string {
  const d = state.decision;
  if (d === null) return "";
  if (d.kind === "timed_out") return `timed out at ${hhmm(d.at)} UTC`;
  if (d.kind === "denied")
    return `denied by ${d.by ?? "?"} (${d.face ?? "?"} ${hhmm(d.at)} UTC)${d.reason === null ? "" : `: ${d.reason}`}`;
  return `approved by ${state.approvals.map((a) => `${a.by} (${a.face} ${hhmm(a.at)} UTC)`).join(", ")}`;
}

/** The face a sender's command came from: a Matrix user id is chat; the CLI's `local:`, HTTP's `http:`. */
export function faceOfSender(sender: string): GateFace {
  if (sender.startsWith("@")) return "chat";
  return sender.startsWith("http:") ? "http" : "cli";
}

/** What the event log keeps of a gate's opening: who may decide, how many, until when. */
export function gateOpenedData(spec: GateSpec, state: GateState): Record<string, unknown> {
  return {
    who: spec.who,
    approvers: spec.approvers,
    deadline: state.deadline,
    onTimeout: spec.onTimeout,
    form: Object.keys(spec.form),
  };
}

/** The error a gate that timed out keeps, as its task's error. */
export function gateTimeoutError(spec: GateSpec): string {
  return spec.onTimeout === "skip"
    ? "nobody decided on the gate in time; skipped with what needs it (on_timeout = skip)"
    : "nobody decided on the gate in time";
}
