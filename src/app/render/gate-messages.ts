/**
 * The chat side of an approval gate (docs/architecture.md §3, "Gate"): the one message in the run's
 * thread that says a gate opened, mentioning exactly the people who may decide on it, and its edit
 * once it is decided (who, when) or timed out. ✅ / ❌ on that message decide
 * (inbox-step.ts, findGateMessage).
 */
import type { GateSpec, GateState } from "../../domain/gates.js";
import { gateTxnId, whoWords } from "../../domain/gates.js";
import { formatDuration } from "../../domain/duration.js";
import type { OutboxMessageInput, RunRecord, TaskRecord } from "../../ports/store.js";
import type { Rendered } from "./html.js";
import { code, join, r, text, userPill } from "./html.js";
import { MESSAGE_EVENT_TYPE, runThreadPlacement } from "./messages.js";
import { noticeContent } from "./notice.js";

export { gateTxnId };

const utc = (at: number): string => `${new Date(at).toISOString().slice(0, 16).replace("T", " ")} UTC`;

/** The message that a gate opened, mentioning `approvers` (the people who may decide). */
export function gateOpenMessage(
  run: RunRecord,
  gate: TaskRecord & { gate: GateSpec; gateState: GateState },
  after: readonly string[],
  approvers: readonly string[],
): OutboxMessageInput {
  const spec = gate.gate;
  const id = `${run.dagId}/${gate.taskId}`;
  const what = spec.description === null ? text("") : r` — ${spec.description}`;
  const then =
    after.length === 0
      ? text("")
      : r` Then runs: ${join(
          after.map((t) => code(t)),
          ", ",
        )}.`;
  const who =
    approvers.length > 0
      ? join(
          approvers.map((u) => userPill(u)),
          ", ",
        )
      : text(whoWords(spec.who));
  const fields = Object.keys(spec.form);
  const example = `!dag approve ${run.dagId} ${gate.taskId}${fields.map((f) => ` ${f}=…`).join("")}`;
  const count = spec.approvers === 1 ? "one approval" : `${spec.approvers} approvals by different people`;
  const form = fields.length === 0 ? "" : ` The form needs ${fields.join(", ")}.`;
  const timeout =
    gate.gateState.deadline === null
      ? ""
      : ` Without a decision by ${utc(gate.gateState.deadline)} (${formatDuration(spec.timeoutMs ?? 0)}) it ${spec.onTimeout === "skip" ? "is skipped" : "fails"}.`;
  const rendered: Rendered = r`🚦 Approval needed for ${code(id)}${what}.${then} ${who}: react ✅ to approve or ❌ to deny, or type ${code(example)}. It needs ${count}.${form}${timeout}`;
  const placement = runThreadPlacement(run) ?? { kind: "room" as const };
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

/** The edit of a gate's message once it is decided or timed out: who, when; no one is mentioned. */
export function gateDecidedMessage(
  run: RunRecord,
  gate: TaskRecord & { gateState: GateState },
): OutboxMessageInput | null {
  const decision = gate.gateState.decision;
  if (decision === null) return null;
  const id = code(`${run.dagId}/${gate.taskId}`);
  const at = utc(decision.at);
  const approvers = join(
    gate.gateState.approvals.map((a) => userPill(a.by)),
    ", ",
  );
  const rendered: Rendered =
    decision.kind === "approved"
      ? r`✅ ${id} was approved by ${approvers} (last at ${at}).`
      : decision.kind === "denied"
        ? r`❌ ${id} was denied by ${userPill(decision.by ?? "?")} at ${at}${decision.reason === null ? "" : `: ${decision.reason}`}.`
        : r`⌛ ${id} timed out at ${at}: nobody decided in time.`;
  const txn = gateTxnId(run.runId, gate.taskId);
  const content = noticeContent(rendered, { kind: "room" });
  return {
    txnId: `${txn}.decided`,
    roomId: run.roomId,
    eventType: MESSAGE_EVENT_TYPE,
    content: {
      msgtype: "m.notice",
      body: `* ${rendered.body}`,
      format: content["format"],
      formatted_body: `* ${rendered.html}`,
      "m.mentions": {},
      "m.new_content": content,
      "m.relates_to": { rel_type: "m.replace" },
    },
    replacesTxnId: txn,
  };
}
