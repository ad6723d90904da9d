/** `!dag schedules`: the room's scheduled DAGs and when each fires next. */
import { nextSlot } from "../../../domain/schedule.js";
import { paragraphs } from "../../render/blocks.js";
import type { Rendered } from "../../render/html.js";
import { code, r } from "../../render/html.js";
import { plural } from "../../render/words.js";
import { isApprovedSchedule, isDroppedSchedule } from "../../schedules.js";
import type { HandlerContext } from "../context.js";
import type { Outcome, ScheduleLine } from "../outcome.js";
import { MAX_LISTED_RUNS } from "../shared.js";
import { defineVerb } from "../verb.js";
import { byLayout } from "../face.js";

export const schedules = defineVerb<{ verb: "schedules" }, "schedules">({
  verb: "schedules",
  args: [],
  summary: "list the room's schedules: state, owner, when each fires next",
  group: "room",
  permission: "open",
  details: [
    'A DAG declares schedule = "<cron>" (5 fields, or 6 with seconds first), timezone (default UTC)',
    'and missed = "skip" or "run_once". Only the leader fires it, each slot once.',
    "Each shows its state (active or paused, with who paused it, when and why); see !dag schedule.",
  ],
  handle: (ctx) => handleSchedules(ctx),
  cli: {
    description: "List the room's schedules: state (paused by whom, when, why), owner, next slot.",
  },
  http: (s) => ({
    method: "GET",
    path: "/v1/schedules",
    summary: "The room's schedules: state, owner, expression, time zone, missed policy, next slot",
    response: s.schedulesSchema,
    command: () => ({ verb: "schedules" }),
    answer: (o) => (o.kind === "schedules" ? { at: o.at, schedules: o.schedules } : null),
  }),
  render: {
    schedules: byLayout(
      (o) => renderSchedules(o.schedules),
      (o) =>
        o.schedules.length === 0
          ? "no scheduled DAGs"
          : o.schedules
              .map((l) => `${l.dagId}  ${l.cron} ${l.timezone}  missed: ${l.missed}  ${scheduleState(l)}`)
              .join("\n"),
    ),
  },
});

/** Scheduled definitions read for `!dag schedules` (the reply shows the first 30 still in force). */
const MAX_LISTED_SCHEDULES = 200;

/** `!dag schedules`: the room's scheduled definitions, the next slot of each and the newest fired. */
async function handleSchedules(ctx: HandlerContext): Promise<Outcome> {
  const at = await ctx.store.now();
  const definitions = await ctx.store.listScheduledDefinitions(ctx.roomId, { limit: MAX_LISTED_SCHEDULES });
  const schedules: ScheduleLine[] = [];
  for (const def of definitions) {
    const spec = def.schedule;
    const origin = def.origin;
    if (spec === null || origin === null || isDroppedSchedule(def)) continue;
    const status = def.scheduleState;
    if (status.state === "deleted") continue;
    const paused = status.state === "paused";
    schedules.push({
      dagId: def.dagId,
      cron: spec.cron,
      timezone: spec.timezone,
      missed: spec.missed,
      next: paused ? null : nextSlot(spec, at),
      last: def.lastSlotAt,
      active: isApprovedSchedule(def),
      state: status.state,
      pausedBy: paused ? status.by : null,
      pausedAt: paused ? status.at : null,
      reason: paused ? status.reason : null,
      owner: def.publisher,
    });
  }
  return { kind: "schedules", schedules: schedules.slice(0, MAX_LISTED_RUNS * 2), at };
}

/** A slot's time to the second (schedules may fire every second). */
const toSecond = (ms: number): string => `${new Date(ms).toISOString().slice(0, 19).replace("T", " ")} UTC`;

function renderSchedules(lines: readonly ScheduleLine[]): Rendered {
  if (lines.length === 0)
    return r`No scheduled DAGs in this room. A DAG declares one with ${code('schedule = "0 2 * * *"')}.`;
  return paragraphs([
    r`${plural(lines.length, "scheduled DAG")}:`,
    ...lines.map((l) => {
      const paused = l.state === "paused";
      const next = paused ? "paused" : l.next === null ? "no next slot" : `next ${toSecond(l.next)}`;
      const last = l.last === null ? "" : `, last fired for ${toSecond(l.last)}`;
      const waiting = l.active ? "" : " (fires once confirmed)";
      const owner = l.owner === undefined ? "" : ` · owner ${l.owner}`;
      const by = l.pausedBy === null || l.pausedBy === undefined ? "" : ` by ${l.pausedBy}`;
      const when = l.pausedAt === null || l.pausedAt === undefined ? "" : ` at ${toSecond(l.pausedAt)}`;
      const why = l.reason === null || l.reason === undefined ? "" : `: ${l.reason}`;
      const pause = paused ? ` — paused${by}${when}${why}` : "";
      return r`${paused ? "⏸️" : "⏰"} ${code(l.dagId)} — ${code(l.cron)} ${l.timezone}, missed: ${l.missed} · ${next}${last}${waiting}${pause}${owner}`;
    }),
  ]);
}

/** A schedule's state in a line: paused (by whom, when, why) or its next slot; its owner. */
function scheduleState(l: ScheduleLine): string {
  const owner = l.owner === undefined ? "" : `  owner ${l.owner}`;
  if (l.state === "paused") {
    const by = l.pausedBy === null || l.pausedBy === undefined ? "" : ` by ${l.pausedBy}`;
    const at =
      l.pausedAt === null || l.pausedAt === undefined ? "" : ` at ${new Date(l.pausedAt).toISOString()}`;
    const why = l.reason === null || l.reason === undefined ? "" : `: ${l.reason}`;
    return `paused${by}${at}${why}${owner}`;
  }
  const next = l.next === null ? "no next slot" : `next ${new Date(l.next).toISOString()}`;
  return `${next}${l.active ? "" : "  (fires once confirmed)"}${owner}`;
}
