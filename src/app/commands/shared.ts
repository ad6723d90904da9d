/** Small helpers the verbs' handlers share: the fenced command context, "no such run" answers, list sizes. */
import type { CommandContext } from "../../ports/store.js";
import type { HandlerContext } from "./context.js";
import type { Outcome } from "./outcome.js";
import { wrapOutcome } from "./outcome.js";

/** Runs a listing shows at most. */
export const MAX_LISTED_RUNS = 15;

/**
 * The CommandContext of a state change: the fence, and the inbox row the store marks handled in the
 * same transaction, keeping the outcome `answer` gives for the store's result: the one the handler
 * returns too, so every face reads the outcome the handler decided (docs/architecture.md §4). Null
 * from `answer`: the result changed nothing and its outcome needs more reads; the row stays new and
 * the inbox step stores the handler's outcome (inbox-step.ts). Null without a fence (not the leader).
 */
export function commandContext<R>(
  ctx: HandlerContext,
  answer: (result: R) => Outcome | null,
): CommandContext<R> | null {
  if (ctx.fence === null) return null;
  if (ctx.eventId === null) return { fence: ctx.fence };
  return {
    fence: ctx.fence,
    inboxEventId: ctx.eventId,
    answer: (result) => {
      const outcome = answer(result);
      return outcome === null ? null : wrapOutcome(outcome);
    },
  };
}

/** "No run named x", with the closest recent id when one is near. */
export async function notFoundRun(
  ctx: Pick<HandlerContext, "store" | "roomId">,
  dagId: string,
): Promise<Outcome> {
  const recent = await ctx.store.listRuns(ctx.roomId, { limit: 50 });
  return {
    kind: "not-found",
    dagId,
    taskId: null,
    didYouMean: closest(
      dagId,
      recent.map((r) => r.dagId),
    ),
    known: [],
  };
}

/** "Run x has no task y", with the run's task ids. */
export function notFoundTask(dagId: string, taskId: string, taskIds: readonly string[]): Outcome {
  return {
    kind: "not-found",
    dagId,
    taskId,
    didYouMean: closest(taskId, taskIds),
    known: taskIds.slice(0, 30),
  };
}

function closest(word: string, candidates: readonly string[]): string | null {
  return (
    candidates.find((c) => c.toLowerCase() === word.toLowerCase()) ??
    candidates.find((c) => similar(c, word)) ??
    null
  );
}

/** One edit apart (a typo), for ids up to 64 characters. */
function similar(a: string, b: string): boolean {
  if (Math.abs(a.length - b.length) > 1) return false;
  let i = 0;
  let j = 0;
  let edits = 0;
  while (i < a.length && j < b.length) {
    if (a[i] === b[j]) {
      i++;
      j++;
      continue;
    }
    if (++edits > 1) return false;
    if (a.length > b.length) i++;
    else if (b.length > a.length) j++;
    else {
      i++;
      j++;
    }
  }
  return edits + (a.length - i) + (b.length - j) <= 1;
}
