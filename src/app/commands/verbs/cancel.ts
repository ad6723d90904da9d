/** `!dag cancel`: cancel a running DAG run; running tasks are stopped. A leader decision (run-decisions.ts). */
import { RUN_ID_ARG } from "../../../domain/command-grammar.js";
import { decisionRoute, handleDecision, renderDecision } from "../run-decisions.js";
import type { Outcome } from "../outcome.js";
import { defineVerb } from "../verb.js";

export const cancel = defineVerb<{ verb: "cancel"; id: string }, "decision">({
  verb: "cancel",
  args: [RUN_ID_ARG],
  summary: "cancel a running DAG run; running tasks are stopped",
  group: "run",
  permission: "operator",
  details: [],
  handle: (ctx, c): Promise<Outcome> => handleDecision(ctx, "cancel", cancel.usage, c.id),
  render: { decision: renderDecision },
  writes: true,
  cli: {
    description: "Cancel a run: tasks not started are canceled, running ones are stopped by their workers.",
    about: "The run moves to canceling at once and ends canceled when no task of it is running.",
  },
  http: decisionRoute("cancel", (id) => ({ verb: "cancel", id })),
});
