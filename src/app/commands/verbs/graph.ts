/** `!dag graph <id>`: a picture of a run, posted in its thread. */
import { RUN_ID_ARG } from "../../../domain/command-grammar.js";
import { code, r } from "../../render/html.js";
import type { CommandPolicy, HandlerContext } from "../context.js";
import type { Outcome } from "../outcome.js";
import { summarizeRun } from "../outcome.js";
import { notFoundRun } from "../shared.js";
import { defineVerb } from "../verb.js";
import { isOperator } from "../permissions.js";
import { findRun } from "../../run-ref.js";
import { byLayout } from "../face.js";

/** The room's policy `graph operators`. */
function picturesForOperators(policy: CommandPolicy): boolean {
  return policy.graph === "operators";
}

export const graph = defineVerb<{ verb: "graph"; id: string }, "graph">({
  verb: "graph",
  args: [RUN_ID_ARG],
  summary: "post a picture of a run: its DAG, each task in its state's colour",
  group: "follow",
  permission: "open",
  closedWhen: picturesForOperators,
  details: [
    "The picture goes into the run's thread. `dagbot graph <id>` draws the same on a node.",
    "Anyone in the room, unless the room's policy says `graph operators` (see `!dag help policy`);",
    "at most 3 pictures per member and 10 per room a minute.",
  ],
  handle: (ctx, c) => handleGraph(ctx, c.id),
  render: {
    // Asked in the main timeline, the picture goes into the run's thread and this answers here;
    // asked in the thread, the picture itself is the answer (inbox-step.ts, render/pictures.ts).
    graph: byLayout(
      (o) => r`🖼️ The picture of ${code(o.run.dagId)} goes into its thread.`,
      (o, say) => `${say.command("graph", [o.run.dagId])} draws ${o.run.dagId}.`,
    ),
  },
});

async function handleGraph(ctx: HandlerContext, dagId: string): Promise<Outcome> {
  // Drawing costs the leader more than any other read: a room may keep it to operators.
  if (picturesForOperators(ctx.policy) && !isOperator(ctx.standing, ctx.policy)) {
    const have = ctx.standing.kind === "room-member" ? ctx.standing.powerLevel : 0;
    return {
      kind: "refused",
      verb: "graph",
      reason: `this room's policy keeps pictures to operators (graph operators): you need power level ${ctx.policy.requiredPowerLevel} (or a place on the allowlist); you have ${have}`,
      helpLine: "usage: !dag graph <id>",
    };
  }
  const run = await findRun(ctx.store, ctx.roomId, dagId);
  if (run === null) return notFoundRun(ctx, dagId);
  return { kind: "graph", run: summarizeRun(run) };
}
