/** `!dag reject`: drop a published DAG run that waits for confirmation. A leader decision (run-decisions.ts). */
import { RUN_ID_ARG } from "../../../domain/command-grammar.js";
import { decisionRoute, handleDecision, renderDecision } from "../run-decisions.js";
import type { Outcome } from "../outcome.js";
import { defineVerb } from "../verb.js";

export const reject = defineVerb<{ verb: "reject"; id: string }, "decision">({
  verb: "reject",
  args: [RUN_ID_ARG],
  summary: "drop a published DAG run that waits for confirmation",
  group: "run",
  permission: "operator",
  details: [],
  handle: (ctx, c): Promise<Outcome> => handleDecision(ctx, "reject", reject.usage, c.id),
  render: { decision: renderDecision },
  writes: true,
  cli: {
    description: "Reject a run that awaits confirmation: it will not run.",
  },
  http: decisionRoute("reject", (id) => ({ verb: "reject", id })),
});
