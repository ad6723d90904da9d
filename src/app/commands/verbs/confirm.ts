/** `!dag confirm`: start a published DAG run. A leader decision (run-decisions.ts). */
import { RUN_ID_ARG } from "../../../domain/command-grammar.js";
import { decisionRoute, handleDecision, renderDecision, renderHashMismatch } from "../run-decisions.js";
import type { Outcome } from "../outcome.js";
import { defineVerb } from "../verb.js";

export const confirm = defineVerb<
  { verb: "confirm"; id: string; hash: string | null },
  "decision" | "hash-mismatch"
>({
  verb: "confirm",
  args: [RUN_ID_ARG, { name: "hash", kind: "hash", about: "the content hash", optional: true }],
  summary: "start a published DAG run",
  group: "run",
  permission: "operator",
  details: [
    "<hash> is the content hash its status card shows (8 or more of its first hex digits).",
    "Given, the run starts only if its content has that hash: what you confirm is what you saw.",
  ],
  handle: (ctx, c): Promise<Outcome> => handleDecision(ctx, "confirm", confirm.usage, c.id, c.hash),
  render: { decision: renderDecision, "hash-mismatch": renderHashMismatch },
  writes: true,
  cli: {
    description: "Confirm a run that awaits confirmation, so it starts.",
    about:
      "With <hash> (the content hash its answer or card shows), it starts only if its content has that hash.",
  },
  http: decisionRoute("confirm", (id, body) => ({
    verb: "confirm",
    id,
    hash: (body as { hash?: string } | null | undefined)?.hash?.toLowerCase() ?? null,
  })),
});
