/** `!dag cap <n>`: the room's cap on active tasks, set by its leader together with the inbox mark. */
import { MAX_CAP } from "../../../domain/command-grammar.js";
import { r } from "../../render/html.js";
import { commandContext } from "../shared.js";
import { defineVerb } from "../verb.js";

export const cap = defineVerb<{ verb: "cap"; n: number }, "cap">({
  verb: "cap",
  args: [{ name: "n", kind: "cap", about: `a whole number from 0 to ${MAX_CAP}` }],
  summary: "set the room's cap on active tasks",
  group: "room",
  permission: "operator",
  details: [
    `<n> is a whole number from 0 to ${MAX_CAP}; 0 pauses the room (nothing new starts).`,
    "Raising the cap starts waiting tasks at once; lowering it never interrupts a running task.",
  ],
  handle: async (ctx, c) => {
    const answer = ({ previous }: { previous: number }) => ({ kind: "cap" as const, cap: c.n, previous });
    const cmd = commandContext(ctx, answer);
    if (cmd === null) return { kind: "not-leader", roomId: ctx.roomId };
    // The cap and the inbox mark commit together: a crash cannot apply one command twice.
    return answer(await ctx.store.setRoomCap(ctx.roomId, c.n, cmd));
  },
  writes: true,
  cli: {
    description: "Set the room's cap on active (queued or running) tasks, effective at once.",
    about:
      "Raising the cap lets the leader queue waiting tasks at once; lowering it never interrupts a running\n" +
      "task (admission stops until enough tasks finish); 0 pauses the room.",
    queuesWithoutNode: true,
  },
  http: (s) => ({
    method: "PUT",
    path: "/v1/rooms/:room/cap",
    summary: "Set the room's cap on active tasks (0 pauses the room)",
    params: s.roomParams,
    body: s.capBody,
    response: s.capSchema,
    command: ({ body }) => ({ verb: "cap", n: (body as { cap: number }).cap }),
    answer: (o) => (o.kind === "cap" ? { cap: o.cap, previous: o.previous } : null),
  }),
  render: {
    cap: (o) =>
      r`The room's cap on active tasks is now ${String(o.cap)} (it was ${String(o.previous)}). ${
        o.cap >= o.previous
          ? "Waiting tasks are queued as soon as slots are free."
          : "Running tasks are not interrupted; new ones start as they finish."
      }`,
  },
});
