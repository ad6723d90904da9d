/**
 * The chat side of an approval gate (docs/architecture.md §3, "Gate"): the one message in the run's
 * thread that says a gate opened, mentioning exactly the people who may decide on it, edited as
 * approvals come in and once it is decided (who, when) or timed out. ✅ / ❌ on that message decide
 * (inbox-step.ts, findGateMessage), and its edit is their answer: one announcement per decision.
 *
 * The message is at most three short lines, what to do first, so that a notification or a preview
 * that keeps one line still says it: who must act on what (with the values already known from what
 * the gate needs), how, and until when and what runs after.
 */
import type { GateSpec, GateState } from "../../domain/gates.js";
import { gateTxnId, whoWords } from "../../domain/gates.js";
import type { OutboxMessageInput, RunRecord, TaskRecord } from "../../ports/store.js";
import type { Rendered } from "./html.js";
import { code, join, lines, r, text, truncate, userPill } from "./html.js";
import { HTML_FORMAT, MESSAGE_EVENT_TYPE, noticeContent, runThreadPlacement } from "./messages.js";

export { gateTxnId };

/** Values shown on the first line, and characters of each: enough to say what is approved. */
const MAX_SHOWN_INPUTS = 4;
const MAX_INPUT_CHARS = 60;

type OpenGate = TaskRecord & { gate: GateSpec; gateState: GateState };

/** `11:21 UTC`, or with its date when it is not within the next 20 hours of `from`. */
export function gateTime(at: number, from: number): string {
  const iso = new Date(at).toISOString();
  const clock = `${iso.slice(11, 16)} UTC`;
  return Math.abs(at - from) < 20 * 3_600_000 ? clock : `${iso.slice(0, 10)} ${clock}`;
}

/** `4h`, `35m`, `2d`: how long until a deadline, rounded to its largest unit. */
export function roughDuration(ms: number): string {
  const minutes = Math.max(1, Math.round(ms / 60_000));
  if (minutes < 60) return `${minutes}m`;
  const hours = Math.round(minutes / 60);
  if (hours < 48) return `${hours}h`;
  return `${Math.round(hours / 24)}d`;
}

/**
 * The gate's three lines as its state says: open with the approvals so far, before any decision.
 * `now` is when the text is written: "in 4h" counts from it, not from when the gate opened, since a
 * message sent or edited later (a new leader's catch-up, an approval hours on) must not promise time
 * that has passed.
 */
export function gateOpenWords(
  run: Pick<RunRecord, "dagId">,
  gate: OpenGate,
  after: readonly string[],
  approvers: readonly string[],
  inputs: Readonly<Record<string, string>>,
  now: number,
): Rendered {
  const spec = gate.gate;
  const state = gate.gateState;
  const who =
    approvers.length > 0
      ? join(
          approvers.map((u) => userPill(u)),
          ", ",
        )
      : text(whoWords(spec.who));
  const what = spec.description === null ? text("") : r` — ${spec.description}`;
  const shown = Object.entries(inputs).slice(0, MAX_SHOWN_INPUTS);
  const known =
    shown.length === 0
      ? text("")
      : r` · ${join(
          shown.map(([k, v]) => code(`${k}=${truncate(v, MAX_INPUT_CHARS)}`)),
          " ",
        )}`;
  const first = r`🚦 ${who}: approve ${code(`${run.dagId}/${gate.taskId}`)}${what}${known}`;

  const fields = Object.keys(spec.form);
  const example = `!dag approve ${run.dagId} ${gate.taskId}${fields.map((f) => ` ${f}=…`).join("")}`;
  const notes: Rendered[] = [];
  if (spec.approvers > 1) notes.push(text(`${spec.approvers} approvals by different people`));
  if (fields.length > 0)
    notes.push(
      r`the form needs ${join(
        fields.map((f) => code(f)),
        ", ",
      )}`,
    );
  if (state.approvals.length > 0)
    notes.push(
      r`approved so far by ${join(
        state.approvals.map((a) => userPill(a.by)),
        ", ",
      )} (${String(state.approvals.length)} of ${String(spec.approvers)})`,
    );
  const second = r`React ✅ to approve or ❌ to deny, or send ${code(example)}${join(
    notes.map((n) => r` · ${n}`),
  )}`;

  const then =
    after.length === 0
      ? null
      : r`${join(
          after.map((t) => code(t)),
          ", ",
        )} ${after.length === 1 ? "runs" : "run"}`;
  const until =
    state.deadline === null
      ? null
      : r`Expires at ${gateTime(state.deadline, now)} (${
          state.deadline > now ? `in ${roughDuration(state.deadline - now)}` : "due now"
        }): then it ${spec.onTimeout === "skip" ? "is skipped" : "fails"}`;
  const third =
    until === null
      ? then === null
        ? null
        : r`Once approved, ${then}`
      : then === null
        ? until
        : r`${until}; once approved, ${then}`;
  return lines(third === null ? [first, second] : [first, second, third]);
}

/**
 * The message that a gate opened, mentioning `approvers` (the people who may decide), written at
 * `now` (gateOpenWords).
 */
export function gateOpenMessage(
  run: RunRecord,
  gate: OpenGate,
  after: readonly string[],
  approvers: readonly string[],
  inputs: Readonly<Record<string, string>>,
  now: number,
): OutboxMessageInput {
  const rendered = gateOpenWords(run, gate, after, approvers, inputs, now);
  const placement = runThreadPlacement(run);
  return {
    txnId: gateTxnId(run.runId, gate.taskId),
    roomId: run.roomId,
    eventType: MESSAGE_EVENT_TYPE,
    content: noticeContent(rendered, placement, {
      msgtype: "m.text",
      "m.mentions": { user_ids: [...approvers] },
    }),
  };
}

/**
 * The edit of an open gate's message after an approval that did not pass it: the same lines with
 * who approved so far, so a ✅ shows on the message it was given on. Nobody is mentioned again.
 */
export function gateProgressMessage(
  run: RunRecord,
  gate: OpenGate,
  after: readonly string[],
  approvers: readonly string[],
  inputs: Readonly<Record<string, string>>,
  now: number,
): OutboxMessageInput | null {
  const n = gate.gateState.approvals.length;
  if (gate.gateState.decision !== null || n === 0) return null;
  const rendered = gateOpenWords(run, gate, after, approvers, inputs, now);
  const txn = gateTxnId(run.runId, gate.taskId);
  return gateEdit(`${txn}.a${n}`, txn, run.roomId, rendered, { user_ids: [...approvers] });
}

/** The edit of a gate's message once it is decided or timed out: who, when; no one is mentioned. */
export function gateDecidedMessage(
  run: RunRecord,
  gate: TaskRecord & { gateState: GateState; gate?: GateSpec | null },
): OutboxMessageInput | null {
  const state = gate.gateState;
  const decision = state.decision;
  if (decision === null) return null;
  const id = code(`${run.dagId}/${gate.taskId}`);
  const at = gateTime(decision.at, state.openedAt);
  const approvals = state.approvals;
  const values = Object.entries(state.values);
  const given =
    values.length === 0
      ? text("")
      : r` · ${join(
          values.map(([k, v]) => code(`${k}=${truncate(v, MAX_INPUT_CHARS)}`)),
          " ",
        )}`;
  const by = join(
    approvals.map((a) => userPill(a.by)),
    ", ",
  );
  const skip = gate.gate?.onTimeout === "skip";
  const rendered: Rendered =
    decision.kind === "approved"
      ? approvals.length === 1
        ? r`✅ ${id} approved by ${by} at ${at}${given}.`
        : r`✅ ${id} approved by ${by}, the last at ${at}${given}.`
      : decision.kind === "denied"
        ? r`❌ ${id} denied by ${userPill(decision.by ?? "?")} at ${at}${decision.reason === null ? "" : `: ${decision.reason}`}.`
        : r`⌛ ${id} timed out at ${at}: nobody decided in time, so it ${skip ? "was skipped" : "failed"}.`;
  const txn = gateTxnId(run.runId, gate.taskId);
  return gateEdit(`${txn}.decided`, txn, run.roomId, rendered, {});
}

function gateEdit(
  txnId: string,
  original: string,
  roomId: string,
  rendered: Rendered,
  mentions: Record<string, unknown>,
): OutboxMessageInput {
  const content = noticeContent(rendered, { kind: "room" }, { "m.mentions": mentions });
  const fallback = rendered.body.split("\n", 1)[0] ?? "";
  return {
    txnId,
    roomId,
    eventType: MESSAGE_EVENT_TYPE,
    content: {
      msgtype: "m.notice",
      body: `* ${fallback}`,
      format: HTML_FORMAT,
      formatted_body: `* ${text(fallback).html}`,
      // The edit itself pings nobody; its new content says whom the message mentions.
      "m.mentions": {},
      "m.new_content": content,
      "m.relates_to": { rel_type: "m.replace" },
    },
    replacesTxnId: original,
    coalesceKey: original,
  };
}
