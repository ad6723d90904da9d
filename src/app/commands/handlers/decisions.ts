/**
 * `!dag confirm`, `reject`, `cancel` and `cap`: leader decisions, each one fenced store call. The
 * store answers done / already / wrong-status; repeats are answers, not errors.
 */
import { isNotFound } from "../../../ports/errors.js";
import type { RunDecisionResult } from "../../../ports/store.js";
import type { HandlerContext } from "../context.js";
import type { Outcome } from "../outcome.js";
import { summarizeRun } from "../outcome.js";
import { checkTwoPersonRule } from "../permissions.js";
import { commandContext, notFoundRun } from "./shared.js";
import { commandInfo } from "../../../domain/command-table.js";
import { SHORT_HASH_LENGTH, shortHash } from "../../../domain/commands.js";

export type DecisionVerb = "confirm" | "reject" | "cancel";

/**
 * `hash` (confirm only): a prefix of the content hash the confirmer saw. A run's content never
 * changes under its id (the same id with other content is a conflict, never a new run), so checking
 * it here, before the fenced confirm, is enough: a confirmation given for other content than the
 * run's is refused and changes nothing.
 */
export async function handleDecision(
  ctx: HandlerContext,
  verb: DecisionVerb,
  dagId: string,
  hash: string | null = null,
): Promise<Outcome> {
  const cmd = commandContext(ctx);
  if (cmd === null) return { kind: "not-leader", roomId: ctx.roomId };
  if (verb === "confirm") {
    const run = await ctx.store.getRun(ctx.roomId, dagId);
    if (run === null) return notFoundRun(ctx, dagId);
    // Only a pending run is confirmed; "already confirmed" answers stay open to the publisher.
    if (run.status === "pending") {
      const rule = checkTwoPersonRule(run.publisher, ctx.sender, ctx.standing, ctx.policy);
      if (!rule.ok)
        return { kind: "refused", verb, reason: rule.reason, helpLine: `usage: ${commandInfo(verb).usage}` };
      if (hash !== null && !run.hash.startsWith(hash.toLowerCase())) {
        return {
          kind: "refused",
          verb,
          reason: `\`${dagId}\` has content hash ${shortHash(run.hash)}, not ${hash.slice(0, SHORT_HASH_LENGTH)}: it is not the DAG you confirmed, so it was not started. Read its status card, then confirm the hash shown there.`,
          helpLine: `usage: ${commandInfo(verb).usage}`,
        };
      }
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
  return describeDecision(verb, result, ctx.sender);
}

/** The outcome of a decision; the inbox step rebuilds it the same way from the stored result. */
export function describeDecision(verb: DecisionVerb, result: RunDecisionResult, by: string): Outcome {
  return { kind: "decision", verb, result: result.kind, run: summarizeRun(result.run), by };
}

export async function handleCap(ctx: HandlerContext, cap: number): Promise<Outcome> {
  const cmd = commandContext(ctx);
  if (cmd === null) return { kind: "not-leader", roomId: ctx.roomId };
  // The cap and the inbox mark commit together: a crash cannot apply one command twice.
  const { previous } = await ctx.store.setRoomCap(ctx.roomId, cap, cmd);
  return { kind: "cap", cap, previous };
}
