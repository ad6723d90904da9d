/**
 * What confirm, reject and cancel share: a leader decision on a run, one fenced store call that
 * answers done / already / wrong-status (repeats are answers, not errors), its outcome and its reply.
 * Confirm adds the two-person rule and the content hash check.
 */
import { SHORT_HASH_LENGTH, shortHash } from "../../domain/command-grammar.js";
import { isNotFound } from "../../ports/errors.js";
import type { SenderStanding } from "../../ports/permissions.js";
import type { RunDecisionResult } from "../../ports/store.js";
import type { RunDecision } from "../../domain/run-states.js";
import type { Rendered } from "../render/html.js";
import type { VerbHttp, Shapes } from "./verb.js";
import { r, text } from "../render/html.js";
import type { Idiom } from "./face.js";
import { codeIn, commandIn, markIn, userIn } from "./face.js";
import { RUN_SAID, RUN_WORD } from "../render/words.js";
import type { CommandPolicy, HandlerContext } from "./context.js";
import type { Outcome } from "./outcome.js";
import { summarizeRun } from "./outcome.js";
import { findRun } from "../run-ref.js";
import type { PermissionCheck } from "./permissions.js";
import { commandContext, notFoundRun } from "./shared.js";

export type DecisionVerb = RunDecision;

/**
 * `hash` (confirm only): a prefix of the content hash the confirmer saw. A run's content never
 * changes under its id (the same id with other content is a conflict, never a new run), so checking
 * it here, before the fenced confirm, is enough: a confirmation given for other content than the
 * run's is refused and changes nothing. `usage`: the verb's usage line, for a refusal.
 */
export async function handleDecision(
  ctx: HandlerContext,
  verb: DecisionVerb,
  usage: string,
  ref: string,
  hash: string | null = null,
): Promise<Outcome> {
  const answer = (result: RunDecisionResult): Outcome => describeDecision(verb, result, ctx.sender);
  const cmd = commandContext(ctx, answer);
  if (cmd === null) return { kind: "not-leader", roomId: ctx.roomId };
  const run = await findRun(ctx.store, ctx.roomId, ref);
  if (run === null) return notFoundRun(ctx, ref);
  // The store decides by the run's canonical id, whichever id the command named it by.
  const dagId = run.dagId;
  if (verb === "confirm") {
    // Only a pending run is confirmed; "already confirmed" answers stay open to the publisher.
    if (run.status === "pending") {
      const rule = checkTwoPersonRule(run.publisher, ctx.sender, ctx.standing, ctx.policy);
      if (!rule.ok) return { kind: "refused", verb, reason: rule.reason, helpLine: `usage: ${usage}` };
      // Its own outcome, not a refusal: the policy allows the confirmer; the content is another.
      if (hash !== null && !run.hash.startsWith(hash.toLowerCase()))
        return { kind: "hash-mismatch", run: summarizeRun(run), given: hash.toLowerCase() };
    }
  }
  let result: RunDecisionResult;
  try {
    const apply = { confirm: ctx.store.confirmRun, reject: ctx.store.rejectRun, cancel: ctx.store.cancelRun }[
      verb
    ];
    result = await apply.call(ctx.store, cmd, ctx.roomId, dagId, ctx.sender);
  } catch (err) {
    if (isNotFound(err)) return notFoundRun(ctx, dagId);
    throw err;
  }
  return answer(result);
}

/** The outcome of a decision: what the store keeps on the command's row in the decision's transaction. */
export function describeDecision(verb: DecisionVerb, result: RunDecisionResult, by: string): Outcome {
  return { kind: "decision", verb, result: result.kind, run: summarizeRun(result.run), by };
}

/**
 * The two-person rule: with it on, a chat user may not confirm a run they published. The local
 * operator (CLI, HTTP token) is exempt: whoever holds the node's own credentials can change the
 * store directly, so the rule would only get in their way, not stop them.
 */
export function checkTwoPersonRule(
  publisher: string,
  sender: string,
  standing: SenderStanding,
  policy: CommandPolicy,
): PermissionCheck {
  if (!policy.twoPersonRule || standing.kind === "local-operator" || publisher !== sender)
    return { ok: true };
  return {
    ok: false,
    reason: "the two-person rule is on here: someone other than the publisher must confirm it",
  };
}

/** The HTTP route of a decision: `POST /v1/runs/{id}/<verb>`, answered with the run as it is now. */
export function decisionRoute<C extends { verb: DecisionVerb }>(
  verb: DecisionVerb,
  command: (id: string, body: unknown) => C,
): (s: Shapes) => VerbHttp<C> {
  return (s) => ({
    method: "POST",
    path: `/v1/runs/:id/${verb}`,
    summary: `${verb[0]!.toUpperCase()}${verb.slice(1)} a run`,
    params: s.runParams,
    body: verb === "confirm" ? s.confirmBody : s.emptyBody,
    response: s.decisionSchema,
    command: ({ params, body }) => command(params["id"] ?? "", body),
    answer: (o) =>
      o.kind === "decision" && o.result !== "wrong-status" ? { result: o.result, run: o.run } : null,
  });
}

/** A confirmation by hash that names other content than the run's: nothing was started. */
export function renderHashMismatch(
  outcome: Extract<Outcome, { kind: "hash-mismatch" }>,
  say: Idiom,
): Rendered {
  const { run } = outcome;
  return r`${markIn(say, "⛔")}${codeIn(say, run.dagId)} has content hash ${shortHash(run.hash ?? "")}, not ${outcome.given.slice(
    0,
    SHORT_HASH_LENGTH,
  )}: it is not the DAG you confirmed, so it was not started. Read its ${say.chat === true ? "status card" : "status"}, then confirm the hash shown there (${commandIn(
    say,
    "confirm",
    [run.dagId, shortHash(run.hash ?? "")],
  )}).`;
}

export function renderDecision(outcome: Extract<Outcome, { kind: "decision" }>, say: Idiom): Rendered {
  const { run, verb, result } = outcome;
  const id = codeIn(say, run.dagId);
  const by = userIn(say, outcome.by);
  const now = RUN_WORD[run.status];
  // Said as what happened, not as a state: an answer in the main timeline stays true after the run
  // moves on, and the run's card (in its thread) says where it is now.
  if (result === "done") {
    if (verb === "confirm")
      return run.registered === true
        ? r`${markIn(say, "▶️")}${by} confirmed ${id}: registered, nothing runs now.`
        : r`${markIn(say, "▶️")}${by} confirmed ${id}; it started.`;
    if (verb === "reject") return r`${markIn(say, "✋")}${by} rejected ${id}; it will not run.`;
    return run.status === "canceled"
      ? r`${markIn(say, "🚫")}${by} canceled ${id}; none of its tasks was running.`
      : r`${markIn(say, "🛑")}${by} canceled ${id}: tasks that had not started were canceled, running ones were told to stop.`;
  }
  if (result === "already") {
    if (verb === "confirm") {
      const confirmer = run.confirmedBy === null ? text("") : r` by ${userIn(say, run.confirmedBy)}`;
      return r`${id} is already confirmed${confirmer}; it ${RUN_SAID[run.status]}.`;
    }
    return verb === "reject" ? r`${id} is already rejected.` : r`${id} is already ${now}.`;
  }
  const hint =
    verb === "reject" && (run.status === "running" || run.status === "canceling")
      ? r` To stop it, use ${commandIn(say, "cancel", [run.dagId])}.`
      : text("");
  return r`${id} cannot be ${verb === "cancel" ? "canceled" : `${verb}ed`}: it ${RUN_SAID[run.status]}.${hint}`;
}
