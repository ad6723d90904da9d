/**
 * `!dag triggers`: the room's DAGs that run after another DAG's runs, what fires each and
 * its newest firing; schedules are counted and left to `!dag schedules`.
 */
import { afterWords } from "../../../domain/after.js";
import { paragraphs } from "../../render/blocks.js";
import type { Rendered } from "../../render/html.js";
import { code, r } from "../../render/html.js";
import { dateTime, plural } from "../../render/words.js";
import { isApprovedAfter } from "../../after.js";
import { isDroppedSchedule } from "../../schedules.js";
import type { HandlerContext } from "../context.js";
import type { Outcome, TriggerLine } from "../outcome.js";
import { defineVerb } from "../verb.js";
import type { Idiom } from "../face.js";
import { byLayout } from "../face.js";

export const triggers = defineVerb<{ verb: "triggers" }, "triggers">({
  verb: "triggers",
  args: [],
  summary: "list the DAGs that run after another DAG's runs, and what each did last",
  group: "room",
  permission: "open",
  details: [
    'A DAG declares after = { dag = "build", status = "succeeded" } (status: succeeded, failed,',
    'canceled, finished for any, or a list), and params = { version = "params.version" } to take values',
    "from the upstream run. The leader starts one run of it per upstream run that ends so.",
    "Schedules are listed by !dag schedules.",
  ],
  handle: (ctx) => handleTriggers(ctx),
  cli: {
    description: "List the DAGs that run after another DAG's runs: what fires each, its newest firing.",
  },
  http: (s) => ({
    method: "GET",
    path: "/v1/triggers",
    summary: "The room's DAGs that run after another DAG: upstream, statuses, mapping, newest firing",
    response: s.triggersSchema,
    command: () => ({ verb: "triggers" }),
    answer: (o) =>
      o.kind === "triggers" ? { at: o.at, triggers: o.triggers, schedules: o.schedules } : null,
  }),
  render: { triggers: byLayout((o) => renderTriggers(o.triggers, o.schedules), triggersText) },
});

/** Definitions read for `!dag triggers`; the reply shows the first MAX_SHOWN. */
const MAX_READ = 200;
const MAX_SHOWN = 30;

async function handleTriggers(ctx: HandlerContext): Promise<Outcome> {
  const at = await ctx.store.now();
  const definitions = await ctx.store.listAfterDefinitions(ctx.roomId, { limit: MAX_READ });
  const lines: TriggerLine[] = [];
  for (const def of definitions) {
    const after = def.dag.after;
    const origin = def.origin;
    if (after === undefined || origin === null) continue;
    if (origin.status === "rejected" || origin.status === "expired" || origin.status === "canceled") continue;
    if (lines.length >= MAX_SHOWN) break;
    const [last] = await ctx.store.listAfterFirings(ctx.roomId, { dagId: def.dagId, limit: 1 });
    lines.push({
      dagId: def.dagId,
      after: after.dag,
      status: [...after.status],
      params: { ...after.params },
      active: isApprovedAfter(def),
      owner: def.publisher,
      last:
        last === undefined
          ? null
          : {
              upstream: last.upstreamDagId,
              status: last.upstreamStatus,
              run: last.runDagId,
              reason: last.reason,
              at: last.at,
            },
    });
  }
  const scheduled = await ctx.store.listScheduledDefinitions(ctx.roomId, { limit: MAX_READ });
  const schedules = scheduled.filter(
    (d) => !isDroppedSchedule(d) && d.scheduleState.state !== "deleted",
  ).length;
  return { kind: "triggers", triggers: lines, schedules, at };
}

function renderTriggers(lines: readonly TriggerLine[], schedules: number): Rendered {
  const tail =
    schedules === 0
      ? []
      : [r`This room also has ${plural(schedules, "schedule")}: ${code("!dag schedules")} lists them.`];
  if (lines.length === 0)
    return paragraphs([
      r`No DAG in this room runs after another. A DAG declares one with ${code('after = { dag = "build", status = "succeeded" }')}.`,
      ...tail,
    ]);
  return paragraphs([
    r`${plural(lines.length, "DAG")} run after another DAG:`,
    ...lines.map((l) => {
      const words = afterWords({ dag: l.after, status: l.status as never, params: l.params });
      const mapped = Object.entries(l.params);
      const params = mapped.length === 0 ? "" : ` · ${mapped.map(([k, v]) => `${k} ← ${v}`).join(", ")}`;
      const waiting = l.active ? "" : " (fires once confirmed)";
      const last =
        l.last === null
          ? " · not fired yet"
          : l.last.run !== null
            ? ` · last: ${l.last.run} after ${l.last.upstream} ${l.last.status} (${dateTime(l.last.at)})`
            : ` · last: skipped after ${l.last.upstream} ${l.last.status} (${dateTime(l.last.at)}): ${l.last.reason ?? ""}`;
      return r`🔗 ${code(l.dagId)} — ${words}${params}${waiting}${last} · owner ${l.owner}`;
    }),
    ...tail,
  ]);
}

/** One line per DAG that runs after another: what fires it, its newest firing, its owner. */
function triggersText(o: Extract<Outcome, { kind: "triggers" }>, say: Idiom): string {
  const lines = o.triggers.map((t) => {
    const last =
      t.last === null
        ? "not fired yet"
        : t.last.run !== null
          ? `last: ${t.last.run} after ${t.last.upstream} ${t.last.status}`
          : `last: skipped after ${t.last.upstream} ${t.last.status}: ${t.last.reason ?? ""}`;
    const waiting = t.active ? "" : "  (fires once confirmed)";
    return `${t.dagId}  after ${t.after} ${t.status.join("|")}  ${last}${waiting}  owner ${t.owner}`;
  });
  const schedules =
    o.schedules === 0 ? [] : [`${o.schedules} schedule(s): ${say.command("schedules", [])} lists them`];
  return [...(lines.length === 0 ? ["no DAG runs after another in this room"] : lines), ...schedules].join(
    "\n",
  );
}
