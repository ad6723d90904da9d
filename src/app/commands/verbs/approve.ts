/** `!dag approve <run> <gate> [name=value ...]`: approve an open approval gate (gate-decisions.ts). */
import { gateVerbParts } from "../gate-decisions.js";
import type { GateCommand } from "../gate-decisions.js";
import { defineVerb } from "../verb.js";
import { cliPair } from "../../../domain/name-values.js";

const USAGE = "!dag approve <run> <gate> [<name>=<value> ...]";

export const approve = defineVerb<GateCommand & { verb: "approve" }, "gate">({
  verb: "approve",
  group: "run",
  usage: USAGE,
  summary: "approve an open approval gate of a run, with values for its form",
  // Anyone may ask; the gate's own `who` decides (checked in the handler, on the oracle's standing).
  permission: "open",
  details: [
    "The gate opens when what it needs has succeeded; it passes once as many distinct people as it asks",
    "for (approvers) approved. Who may: the gate's `who` (the room's operators, listed people, or a power",
    "level); under the two-person rule, not the run's publisher or confirmer. Each <name> is a field of",
    "the gate's form; a value is one word matching the field's pattern, and becomes the gate's output",
    "{tasks.<gate>.outputs.<name>}. A ✅ on the gate's message approves as well.",
  ],
  ...gateVerbParts("approve", USAGE),
  cli: {
    description: "Approve an open approval gate of a run, with values for its form.",
    about: "Counts once per person; the gate passes when as many people as it asks for approved.",
    args: [
      { name: "run", about: "the run's id" },
      { name: "gate", about: "the gate task's id" },
      {
        name: "values",
        about: "name=value for a field of the gate's form (a value is one word)",
        variadic: true,
      },
    ],
    command: ([id, gate, pairs]) => ({
      verb: "approve",
      id: typeof id === "string" ? id : "",
      gate: typeof gate === "string" ? gate : "",
      values: (Array.isArray(pairs) ? (pairs as readonly string[]) : []).map(cliPair),
    }),
  },
});
