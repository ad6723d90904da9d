/** `!dag retry <id>`: a new run of the part of an ended run that did not succeed. */
import { RUN_ID_ARG } from "../../../domain/command-grammar.js";
import type { ParsedDag } from "../../../domain/model.js";
import { dagHash } from "../../../domain/canonical-hash.js";
import { carryOutputs } from "../../../domain/outputs.js";
import { retriedTaskIds } from "../../../domain/fan-out.js";
import { appliedDag } from "../../../domain/params.js";
import { runSource, runStartVerdict } from "../../../domain/run-authority.js";
import { isTerminalRun } from "../../../domain/run-states.js";
import type { Rendered } from "../../render/html.js";
import { join, r, text } from "../../render/html.js";
import { plural, RUN_SAID, RUN_WORD } from "../../render/words.js";
import type { HandlerContext } from "../context.js";
import type { Outcome, RunSummary } from "../outcome.js";
import { summarizeRun } from "../outcome.js";
import {
  awaiting,
  createAndDescribe,
  freeId,
  invalidDag,
  retryCandidates,
  unknownActions,
} from "../run-creation.js";
import { notFoundRun } from "../shared.js";
import { defineVerb } from "../verb.js";
import { findRun } from "../../run-ref.js";
import type { Idiom } from "../face.js";
import { codeIn, commandIn, markIn } from "../face.js";

export const retry = defineVerb<{ verb: "retry"; id: string }, "retried" | "nothing-to-retry">({
  verb: "retry",
  args: [RUN_ID_ARG],
  summary: "start a new run of the part of a run that did not succeed",
  group: "run",
  permission: "operator",
  details: [],
  handle: (ctx, c): Promise<Outcome> => handleRetry(ctx, c.id),
  render: {
    retried: renderRetried,
    "nothing-to-retry": (o, say) => renderNothingToRetry(o.run, o.why, say),
  },
  writes: true,
  cli: {
    description: "Start a new run of the part of an ended run that did not succeed.",
    confirmOption: true,
  },
  http: (s) => ({
    method: "POST",
    path: "/v1/runs/:id/retry",
    summary: "Start a new run of the part of a run that did not succeed",
    params: s.runParams,
    body: s.emptyBody,
    response: s.retriedSchema,
    command: ({ params }) => ({ verb: "retry", id: params["id"] ?? "" }),
    answer: (o) =>
      o.kind === "retried"
        ? { from: o.from, run: o.run, taskIds: o.taskIds, needsConfirmation: o.needsConfirmation }
        : null,
  }),
});

async function handleRetry(ctx: HandlerContext, dagId: string): Promise<Outcome> {
  const from = await findRun(ctx.store, ctx.roomId, dagId);
  if (from === null) return notFoundRun(ctx, dagId);
  if (!isTerminalRun(from.status))
    return { kind: "nothing-to-retry", run: summarizeRun(from), why: "not-ended" };
  // Rejected, expired, or canceled before anyone confirmed it: nobody approved it, and a retry (a
  // new run its author may then confirm) would get round the confirmation it never had. The same
  // rule as every new run's (docs/architecture.md §3, "Authority"), asked of the run it repeats.
  const source = runSource(from);
  if (runStartVerdict(true, [source]).kind !== "start")
    return { kind: "nothing-to-retry", run: summarizeRun(from), why: "never-confirmed" };
  const tasks = await ctx.store.listTasks(from.runId);
  // What did not succeed, and a fan-out (with its producer) whose instances did not all succeed.
  const again = retriedTaskIds(from.dag, tasks);
  // What the tasks that are not run again published feeds their dependents in the retry.
  const published = new Map(
    tasks.flatMap((t) =>
      t.status === "succeeded" && t.outputValues !== null && !again.has(t.taskId)
        ? [[t.taskId, t.outputValues]]
        : [],
    ),
  );
  if (again.size === 0) return { kind: "nothing-to-retry", run: summarizeRun(from), why: "succeeded" };
  const newId = await freeId(ctx.store, ctx.roomId, retryCandidates(from.dagId));
  if (newId === null) {
    return {
      kind: "command-error",
      message: `no free retry id is left for "${dagId}"`,
      helpLine: `usage: ${retry.usage}`,
    };
  }
  // A retry is one more run of the same definition, started by hand: no schedule of its own (it
  // would fire beside the definition's), no slot (it is no slot's record, and gets its card) and no
  // webhook origin (a person started it).
  const { schedule: _schedule, slot: _slot, hook: _hook, ...base } = from.dag;
  const dag: ParsedDag = {
    ...base,
    definition: from.dag.definition ?? from.dagId,
    id: newId,
    // Needs on tasks that already succeeded are met: dropping them lets those tasks start at once,
    // and the outputs they published are put into the arguments that refer to them. A task keeps
    // its run condition (`when`, run-when.ts), and dropping a succeeded need changes none of its
    // verdicts: such a need has ended, and neither failed nor was denied.
    tasks: from.dag.tasks
      .filter((t) => again.has(t.id))
      .map((t) => ({
        ...t,
        args: carryOutputs(t.args, published),
        needs: t.needs.filter((n) => again.has(n)),
      })),
  };
  const unknown = await unknownActions(ctx, appliedDag(dag));
  if (unknown.length > 0) return invalidDag(`for the retry of "${dagId}"`, unknown);
  return createAndDescribe(ctx, dag, dagHash(dag), from, [source]);
}

function renderRetried(outcome: Extract<Outcome, { kind: "retried" }>, say: Idiom): Rendered {
  const shown = outcome.taskIds.slice(0, 20).map((t) => codeIn(say, t));
  const more =
    outcome.taskIds.length > shown.length
      ? text(` and ${outcome.taskIds.length - shown.length} more`)
      : text("");
  const how = outcome.needsConfirmation ? ", for confirmation" : "; it started";
  const head = r`${markIn(say, "🔁")}Retrying the part of ${codeIn(say, outcome.from.dagId)} that did not succeed as ${codeIn(
    say,
    outcome.run.dagId,
  )}: ${plural(outcome.taskIds.length, "task")} (${join(shown, ", ")}${more})${how}.`;
  // One line, like a publish's answer: in chat the card (in this message's thread) says what to do
  // next; elsewhere no card is shown, so the answer says how to confirm it.
  if (say.chat === true) return r`${head} Its card is in the thread.`;
  return outcome.needsConfirmation ? r`${head} ${awaiting(outcome.run, false, say)}` : head;
}

function renderNothingToRetry(
  run: RunSummary,
  why: Extract<Outcome, { kind: "nothing-to-retry" }>["why"],
  say: Idiom,
): Rendered {
  const id = codeIn(say, run.dagId);
  switch (why) {
    case "succeeded":
      return r`${id} succeeded: nothing to retry.`;
    case "not-ended":
      return r`${id} is still ${RUN_WORD[run.status]}; retry is for a run that ended. Stop it first with ${commandIn(
        say,
        "cancel",
        [run.dagId],
      )}.`;
    case "never-confirmed":
      return r`${markIn(say, "⛔")}${id} cannot be retried: nobody confirmed it (it ${RUN_SAID[run.status]}), and retry is for a run that was confirmed and ran. To run it, publish it again under a new id; it then awaits confirmation like any new DAG.`;
  }
}
