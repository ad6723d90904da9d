/** `!dag deny <run> <gate> [reason]`: deny an open approval gate; what needs it is skipped (gate-decisions.ts). */
import { gateVerbParts } from "../gate-decisions.js";
import type { GateCommand } from "../gate-decisions.js";
import { defineVerb } from "../verb.js";

const USAGE = "!dag deny <run> <gate> [<reason> ...]";

export const deny = defineVerb<GateCommand & { verb: "deny" }, "gate">({
  verb: "deny",
  group: "run",
  usage: USAGE,
  summary: "deny an open approval gate of a run: it fails and what needs it is skipped",
  permission: "open",
  details: [
    "One deny by anyone the gate lets decide ends it: the gate fails, the tasks that need it are skipped,",
    "other branches of the run go on. The reason (optional, the rest of the line) is kept in the run's",
    "history. A ❌ on the gate's message denies as well.",
  ],
  ...gateVerbParts("deny", USAGE),
  cli: {
    description: "Deny an open approval gate of a run: it fails and what needs it is skipped.",
    args: [
      { name: "run", about: "the run's id" },
      { name: "gate", about: "the gate task's id" },
      { name: "reason", about: "why (the rest of the words)", variadic: true },
    ],
    command: ([id, gate, words]) => {
      const reason = (Array.isArray(words) ? (words as readonly string[]) : []).join(" ");
      return {
        verb: "deny",
        id: typeof id === "string" ? id : "",
        gate: typeof gate === "string" ? gate : "",
        values: [],
        reason: reason === "" ? null : reason,
      };
    },
  },
});
