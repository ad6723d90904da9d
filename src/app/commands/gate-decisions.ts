/**
 * What approve and deny share (docs/architecture.md §3, "Gate"): find the run and its gate, judge
 * the sender with the gate's own rule (gates.ts: who, the two-person rule) on the standing the
 * permission oracle gave, check the form's values, then one fenced store call that applies the
 * domain's verdict and marks the inbox row. Refusals change nothing.
 */
import type { Parsed } from "../../domain/command-grammar.js";
import { checkId, checkTaskId, fail, ok } from "../../domain/command-grammar.js";
import type { Pair, PairWords } from "../../domain/name-values.js";
import { pairsFromData, pairsFromWords } from "../../domain/name-values.js";
import { quoteInput } from "../../domain/command-text.js";
import type { Decider, GateDecisionRecord, GateVerdict } from "../../domain/gates.js";
import {
  faceOfSender,
  gateDecisionRecord,
  gateDeciderProblem,
  gateTxnId,
  gateValuesProblem,
} from "../../domain/gates.js";
import { isNotFound } from "../../ports/errors.js";
import type { Rendered } from "../render/html.js";
import { r } from "../render/html.js";
import type { Idiom } from "./face.js";
import { codeIn, markIn, userIn } from "./face.js";
import { findRun } from "../run-ref.js";
import type { CommandStore, HandlerContext } from "./context.js";
import type { GateDecisionResult, RunRecord } from "../../ports/store.js";
import type { Outcome } from "./outcome.js";
import { isOperator } from "./permissions.js";
import { commandContext, notFoundRun, notFoundTask } from "./shared.js";
import type { VerbHttp, Shapes } from "./verb.js";

export type GateVerb = "approve" | "deny";

export interface GateCommand {
  verb: GateVerb;
  id: string;
  gate: string;
  /** approve: name=value pairs in the order given (checked against the gate's form later). */
  values: Array<[string, string]>;
  /** deny: why, as typed (at most MAX_REASON characters). */
  reason: string | null;
}

export const MAX_REASON = 500;
/** How a gate form's name=value words are called in refusals. */
const FORM: PairWords = {
  verb: "approve",
  word: "value",
  plural: "values",
  nameOf: "a field of the gate's form",
  valueOf: "a form value",
  each: "field",
};

/** `!dag approve <run> <gate> [name=value ...]` / `!dag deny <run> <gate> [reason ...]`. */
export function parseGateCommand(verb: GateVerb, args: string[], after: string): Parsed<GateCommand> {
  const [rawId, rawGate, ...rest] = args;
  if (rawId === undefined)
    return fail("missing-argument", verb, `missing <run>, the id of a DAG run: !dag ${verb} needs it`);
  if (rawGate === undefined)
    return fail("missing-argument", verb, `missing <gate>, the id of the gate task: !dag ${verb} needs it`);
  const id = checkId(verb, "run id", rawId);
  if (typeof id !== "string") return id;
  const gate = checkTaskId(verb, "gate id", rawGate);
  if (typeof gate !== "string") return gate;
  if (verb === "deny") {
    // The reason is the rest of the text as typed, spaces and all.
    const text = rest.length === 0 ? null : after.trim().split(/\s+/).slice(2).join(" ");
    return reasonOf(text, id, gate);
  }
  return valuesOf(pairsFromWords(rest, FORM), id, gate);
}

function reasonOf(text: string | null, id: string, gate: string): Parsed<GateCommand> {
  if (text !== null && text.length > MAX_REASON)
    return fail(
      "bad-argument",
      "deny",
      `the reason is ${text.length} characters long; at most ${MAX_REASON}`,
    );
  return ok({ verb: "deny", id, gate, values: [], reason: text === null || text === "" ? null : text });
}

function valuesOf(values: Parsed<Pair[]>, id: string, gate: string): Parsed<GateCommand> {
  if (values.kind === "error") return values;
  return ok({ verb: "approve", id, gate, values: values.command, reason: null });
}

/** The command given as data (CLI, HTTP), by the same rules as the typed one. */
export function gateCommandFromData(
  verb: GateVerb,
  data: Readonly<Record<string, unknown>>,
): Parsed<GateCommand> {
  const allowed = verb === "approve" ? ["verb", "id", "gate", "values"] : ["verb", "id", "gate", "reason"];
  // The command's other field travels empty (a deny's values, an approval's reason).
  const other = verb === "approve" ? "reason" : "values";
  const empty = (v: unknown): boolean =>
    v === null || v === undefined || (Array.isArray(v) && v.length === 0);
  const extra = Object.keys(data).find((k) => !allowed.includes(k) && !(k === other && empty(data[k])));
  if (extra !== undefined)
    return fail(
      "extra-argument",
      verb,
      `unexpected field ${quoteInput(extra)}: ${verb} takes ${allowed.slice(1).join(", ")}`,
    );
  const { id: rawId, gate: rawGate } = data;
  if (typeof rawId !== "string") return fail("missing-argument", verb, "missing id, the id of a DAG run");
  if (typeof rawGate !== "string")
    return fail("missing-argument", verb, "missing gate, the id of the gate task");
  const id = checkId(verb, "run id", rawId);
  if (typeof id !== "string") return id;
  const gate = checkTaskId(verb, "gate id", rawGate);
  if (typeof gate !== "string") return gate;
  if (verb === "deny") {
    const reason = data["reason"] ?? null;
    if (reason !== null && typeof reason !== "string")
      return fail("bad-argument", verb, "reason is a string");
    return reasonOf(reason, id, gate);
  }
  return valuesOf(pairsFromData(data["values"], "values", FORM), id, gate);
}

/**
 * The open gate whose chat message `targetEventId` is (render/gate-messages.ts), among the room's
 * running runs; null when it is no open gate's message (a decided gate's reactions do nothing).
 */
export async function findGateMessage(
  store: Pick<CommandStore, "listRuns" | "listTasks"> & {
    getOutbox(txnId: string): Promise<{ sentEventId: string | null } | null>;
  },
  roomId: string,
  targetEventId: string,
): Promise<{ run: RunRecord; taskId: string } | null> {
  for (const run of await store.listRuns(roomId, { statuses: ["running"], limit: 50 })) {
    if (!run.dag.tasks.some((t) => t.gate !== undefined)) continue;
    for (const t of await store.listTasks(run.runId)) {
      if (t.gate === null || t.gateState === null || t.gateState.decision !== null || t.status !== "blocked")
        continue;
      const message = await store.getOutbox(gateTxnId(run.runId, t.taskId));
      if (message?.sentEventId === targetEventId) return { run, taskId: t.taskId };
    }
  }
  return null;
}

/** The handler of approve and deny. */
export async function handleGateDecision(
  ctx: HandlerContext,
  c: GateCommand,
  usage: string,
): Promise<Outcome> {
  if (ctx.fence === null) return { kind: "not-leader", roomId: ctx.roomId };
  const run = await findRun(ctx.store, ctx.roomId, c.id);
  if (run === null) return notFoundRun(ctx, c.id);
  const task = await ctx.store.getTask(run.runId, c.gate);
  if (task === null)
    return notFoundTask(
      run.dagId,
      c.gate,
      run.dag.tasks.map((t) => t.id),
    );
  const helpLine = `usage: ${usage}`;
  if (task.gate === null) {
    const gates = run.dag.tasks.filter((t) => t.gate !== undefined).map((t) => t.id);
    const hint = gates.length === 0 ? "this run has no gates" : `its gates: ${gates.join(", ")}`;
    return { kind: "refused", verb: c.verb, reason: `${c.gate} is not an approval gate (${hint})`, helpLine };
  }
  const decider: Decider =
    ctx.standing.kind === "local-operator"
      ? { kind: "local-operator", id: ctx.sender }
      : {
          kind: "room-member",
          id: ctx.sender,
          powerLevel: ctx.standing.powerLevel,
          operator: isOperator(ctx.standing, ctx.policy),
        };
  const problem = gateDeciderProblem(task.gate, decider, {
    publisher: run.publisher,
    confirmedBy: run.confirmedBy,
    twoPersonRule: ctx.policy.twoPersonRule,
  });
  if (problem !== null) return { kind: "refused", verb: c.verb, reason: problem, helpLine };
  const values = Object.fromEntries(c.values);
  const bad = gateValuesProblem(task.gate, values);
  if (bad !== null) return { kind: "command-error", message: bad, helpLine };
  const answer = (result: GateDecisionResult): Outcome =>
    gateOutcomeOf(c.verb, result.verdict, run, c.gate, ctx.sender);
  const cmd = commandContext(ctx, answer);
  if (cmd === null) return { kind: "not-leader", roomId: ctx.roomId };
  try {
    const result = await ctx.store.decideGate(cmd, ctx.roomId, run.dagId, c.gate, {
      decision: c.verb,
      by: ctx.sender,
      face: faceOfSender(ctx.sender),
      values,
      reason: c.reason,
    });
    return answer(result);
  } catch (err) {
    if (isNotFound(err)) return notFoundRun(ctx, c.id);
    throw err;
  }
}

export function gateOutcomeOf(
  verb: GateVerb,
  verdict: GateVerdict,
  run: { runId: string; dagId: string; publishEventId: string | null },
  gate: string,
  by: string,
): Outcome {
  return gateOutcomeFromStored(
    gateDecisionRecord(verdict, { decision: verb, by }, run, gate),
    run.publishEventId,
  );
}

/** The outcome of a gate decision's record (gates.ts gateDecisionRecord): as decided, or read from a row of an older release. */
export function gateOutcomeFromStored(stored: GateDecisionRecord, publishEventId: string | null): Outcome {
  return {
    kind: "gate",
    verb: stored.decision,
    result: stored.kind,
    runId: stored.runId,
    dagId: stored.dagId,
    publishEventId,
    gate: stored.taskId,
    by: stored.by,
    ...(stored.missing === undefined ? {} : { missing: stored.missing }),
    ...(stored.message === undefined ? {} : { message: stored.message }),
    ...(stored.values === undefined ? {} : { values: stored.values }),
  };
}

type GateOutcome = Extract<Outcome, { kind: "gate" }>;

/** Whether the gate outcome is a success on the CLI and over HTTP (it counted, or was already counted). */
export function gateSucceeded(o: GateOutcome): boolean {
  return (
    o.result === "recorded" || o.result === "approved" || o.result === "denied" || o.result === "already"
  );
}

/** A gate outcome in the face's words (chat, CLI, HTTP). */
export function renderGate(o: GateOutcome, say: Idiom): Rendered {
  const gate = codeIn(say, `${o.dagId}/${o.gate}`);
  const by = userIn(say, o.by);
  switch (o.result) {
    case "recorded":
      return r`${markIn(say, "👍")}${by} approved ${gate}; it waits for ${String(o.missing ?? 1)} more ${
        o.missing === 1 ? "approval" : "approvals"
      }.`;
    case "approved": {
      const values = Object.entries(o.values ?? {});
      const given = values.length === 0 ? "" : ` with ${values.map(([n, v]) => `${n}=${v}`).join(" ")}`;
      return r`${markIn(say, "✅")}${by} approved ${gate}${given}: the gate is open, what needs it runs now.`;
    }
    case "denied":
      return r`${markIn(say, "❌")}${by} denied ${gate}: the gate failed, and what needs it is skipped.`;
    case "already":
      return o.by.startsWith("@")
        ? r`${by} already approved ${gate}; an approval counts once per person.`
        : r`the local operator already approved ${gate}; the CLI and every HTTP token are the local operator and count as one approver, so another must be a room member.`;
    case "closed":
      return o.message === undefined
        ? r`${gate} is decided already (or its run ended): nothing changed.`
        : r`${gate} is closed: ${o.message}. Nothing changed.`;
    case "not-open":
      return r`${gate} is not open yet: what it needs has not all succeeded. Nothing changed.`;
    case "form":
      return r`${gate} was not approved: ${o.message ?? "its form is incomplete"}.`;
  }
}

/** The HTTP route of approve and deny: `POST /v1/runs/{id}/gates/{task}/approve|deny`. */
export function gateRoute(verb: GateVerb, s: Shapes): VerbHttp<GateCommand> {
  return {
    method: "POST",
    path: `/v1/runs/:id/gates/:task/${verb}`,
    summary:
      verb === "approve" ? "Approve an open approval gate of a run" : "Deny an open approval gate of a run",
    params: s.taskParams,
    body: s.gateBody(verb),
    response: s.gateDecisionSchema,
    command: ({ params, body }) => {
      const b = (body ?? {}) as { values?: Record<string, string>; reason?: string };
      return {
        verb,
        id: params["id"] ?? "",
        gate: params["task"] ?? "",
        values: Object.entries(b.values ?? {}),
        reason: b.reason ?? null,
      };
    },
    answer: (o) =>
      o.kind === "gate" && gateSucceeded(o)
        ? {
            result: o.result,
            runId: o.runId,
            dagId: o.dagId,
            gate: o.gate,
            by: o.by,
            ...(o.missing === undefined ? {} : { missing: o.missing }),
            ...(o.values === undefined ? {} : { values: o.values }),
          }
        : null,
  };
}

/**
 * What approve's and deny's declarations share: the chat grammar, the command as data, the handler,
 * the rendering and the HTTP route, each for `verb`. Both write (a fenced decision).
 */
export function gateVerbParts<V extends GateVerb>(verb: V, usage: string) {
  type C = GateCommand & { verb: V };
  return {
    parse: (args: string[], after: string) => parseGateCommand(verb, args, after) as Parsed<C>,
    fromData: (data: Readonly<Record<string, unknown>>) => gateCommandFromData(verb, data) as Parsed<C>,
    handle: (ctx: HandlerContext, c: C) => handleGateDecision(ctx, c, usage),
    render: { gate: renderGate },
    writes: true,
    http: (s: Shapes) => gateRoute(verb, s) as unknown as VerbHttp<C>,
  } as const;
}
