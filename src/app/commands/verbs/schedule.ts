/**
 * `!dag schedule pause|resume|delete <dag_id> [reason]`: stop a schedule, start it again,
 * or end it for good. A leader write, fenced by its term; the state change, its event and the inbox
 * mark commit together (DefinitionStore.changeSchedule). Slots that fall while a schedule is paused
 * never fire: a resume counts from the moment it is made (docs/architecture.md §3, "Schedule").
 */
import type { Parsed } from "../../../domain/command-grammar.js";
import { arity, checkId, fail, ok, unquote } from "../../../domain/command-grammar.js";
import { quoteInput } from "../../../domain/command-text.js";
import { isNotFound } from "../../../ports/errors.js";
import type { ScheduleAction, ScheduleChangeResult } from "../../../ports/store.js";
import type { Rendered } from "../../render/html.js";
import { r } from "../../render/html.js";
import type { Idiom } from "../face.js";
import { codeIn, commandIn, markIn } from "../face.js";
import type { HandlerContext } from "../context.js";
import type { Outcome } from "../outcome.js";
import type { Shapes } from "../verb.js";
import { commandContext } from "../shared.js";
import type { VerbHttp } from "../verb.js";
import { defineVerb } from "../verb.js";

export interface ScheduleCommand {
  verb: "schedule";
  action: ScheduleAction;
  id: string;
  /** Why (pause, delete): kept with the state and shown by `!dag schedules`. */
  reason: string | null;
}

export const SCHEDULE_ACTIONS: readonly ScheduleAction[] = ["pause", "resume", "delete"];
/** The most of a reason that is kept. */
export const MAX_REASON_CHARS = 200;

export const schedule = defineVerb<ScheduleCommand, "schedule-changed" | "no-schedule">({
  verb: "schedule",
  usage:
    "!dag schedule pause <id> [<reason>] | !dag schedule resume <id> | !dag schedule delete <id> [<reason>]",
  summary: "pause, resume or delete a DAG's schedule",
  group: "room",
  permission: "operator",
  details: [
    "pause: no slot fires until resumed; resume: the next slot after now fires (slots that fell",
    "while paused are skipped, whatever its missed policy); delete: it never fires again (a later",
    "publish that creates the DAG anew schedules it afresh). The reason is kept and shown by",
    "!dag schedules. A schedule also pauses itself when its publisher (or, under the two-person",
    "rule, its confirmer) is no longer allowed to run it.",
  ],
  parse: (args): Parsed<ScheduleCommand> => {
    const err = arity("schedule", args.slice(0, 2), 2, 2, "pause, resume or delete and the DAG id");
    if (err !== null) return err;
    const action = unquote(args[0] ?? "").toLowerCase();
    if (!SCHEDULE_ACTIONS.includes(action as ScheduleAction))
      return fail(
        "bad-argument",
        "schedule",
        `bad action ${quoteInput(args[0] ?? "")}: expected pause, resume or delete`,
      );
    const id = checkId("schedule", "id", args[1] ?? "");
    if (typeof id !== "string") return id;
    const reason = keptReason(args.slice(2).join(" "));
    return ok({ verb: "schedule", action: action as ScheduleAction, id, reason });
  },
  fromData: (data) => scheduleFromData(data),
  handle: (ctx, c) => handleSchedule(ctx, c),
  writes: true,
  cli: {
    description: "Pause, resume or delete a DAG's schedule.",
    about:
      "pause: no slot fires until it is resumed. resume: the next slot after now fires (the slots of the\n" +
      "pause are skipped, whatever its missed policy). delete: it never fires again. The reason is kept\n" +
      "and shown by `dagbot schedules`.",
    args: [
      { name: "action", about: "pause, resume or delete" },
      { name: "dag_id", about: "the scheduled DAG's id (as `dagbot schedules` shows it)" },
      { name: "reason", about: "why (pause, delete)", variadic: true },
    ],
    command: ([action, id, reason]) => {
      const why = (Array.isArray(reason) ? (reason as readonly string[]) : []).join(" ").trim();
      return {
        verb: "schedule",
        action: (typeof action === "string" ? action : "") as ScheduleAction,
        id: typeof id === "string" ? id : "",
        reason: why === "" ? null : why,
      };
    },
  },
  http: (s) => [
    changeRoute(
      s,
      "POST",
      "/v1/schedules/:id/pause",
      "Pause a DAG's schedule: no slot fires until it is resumed",
      "pause",
    ),
    changeRoute(
      s,
      "POST",
      "/v1/schedules/:id/resume",
      "Resume a paused schedule: the next slot after now fires (the pause's slots never do)",
      "resume",
    ),
    changeRoute(s, "DELETE", "/v1/schedules/:id", "Delete a DAG's schedule: it never fires again", "delete"),
  ],
  render: {
    "schedule-changed": renderChanged,
    "no-schedule": (o, say) =>
      r`${codeIn(say, o.dagId)} has no schedule in this room. ${commandIn(say, "schedules", [])} lists the room's schedules.`,
  },
});

/** The route of one action: the DAG id in the path, an optional reason in the body. */
function changeRoute(
  s: Shapes,
  method: "POST" | "DELETE",
  path: string,
  summary: string,
  action: ScheduleAction,
): VerbHttp<ScheduleCommand> {
  return {
    method,
    path,
    summary,
    params: s.scheduleParams,
    ...(action === "resume" ? { body: s.emptyBody } : { body: s.scheduleReasonBody }),
    response: s.scheduleChangedSchema,
    command: ({ params, body }) => {
      const reason = (body as { reason?: string } | null | undefined)?.reason;
      return { verb: "schedule", action, id: params["id"] ?? "", reason: reason ?? null };
    },
    answer: (o) =>
      o.kind === "schedule-changed" && o.result !== "wrong-state"
        ? { action: o.action, result: o.result, dagId: o.dagId, state: o.state, by: o.by }
        : null,
  };
}

/** `{ verb: "schedule", action, id, reason? }`, with the rules of the typed command. */
function scheduleFromData(data: Readonly<Record<string, unknown>>): Parsed<ScheduleCommand> {
  const extra = Object.keys(data).find((k) => !["verb", "action", "id", "reason"].includes(k));
  if (extra !== undefined)
    return fail(
      "extra-argument",
      "schedule",
      `unexpected field ${quoteInput(extra)}: schedule takes action, id and reason`,
    );
  const action = data["action"];
  if (typeof action !== "string" || !SCHEDULE_ACTIONS.includes(action as ScheduleAction))
    return fail(
      "bad-argument",
      "schedule",
      `bad action ${quoteInput(String(action ?? ""))}: expected pause, resume or delete`,
    );
  const rawId = data["id"];
  if (typeof rawId !== "string")
    return fail("missing-argument", "schedule", "missing id, the id of a scheduled DAG");
  const id = checkId("schedule", "id", rawId);
  if (typeof id !== "string") return id;
  const rawReason = data["reason"] ?? null;
  if (rawReason !== null && typeof rawReason !== "string")
    return fail("bad-argument", "schedule", "reason is text");
  const reason = rawReason === null ? null : keptReason(rawReason);
  return ok({ verb: "schedule", action: action as ScheduleAction, id, reason });
}

/** A reason as kept: one line, at most MAX_REASON_CHARS characters; null when empty. */
function keptReason(text: string): string | null {
  const line = text.replace(/\s+/g, " ").trim();
  return line === "" ? null : Array.from(line).slice(0, MAX_REASON_CHARS).join("");
}

async function handleSchedule(ctx: HandlerContext, c: ScheduleCommand): Promise<Outcome> {
  const answer = (done: ScheduleChangeResult): Outcome => ({
    kind: "schedule-changed",
    action: c.action,
    result: done.kind,
    dagId: c.id,
    state: done.definition.scheduleState.state,
    by: ctx.sender,
  });
  const cmd = commandContext(ctx, answer);
  if (cmd === null) return { kind: "not-leader", roomId: ctx.roomId };
  const def = await ctx.store.getDefinition(ctx.roomId, c.id);
  if (def === null || def.schedule === null) return { kind: "no-schedule", dagId: c.id };
  try {
    return answer(
      await ctx.store.changeSchedule(cmd, ctx.roomId, c.id, {
        action: c.action,
        by: ctx.sender,
        reason: c.reason,
      }),
    );
  } catch (err) {
    if (isNotFound(err)) return { kind: "no-schedule", dagId: c.id };
    throw err;
  }
}

const DONE: Record<ScheduleAction, readonly [mark: string, words: string]> = {
  pause: ["⏸️", "The schedule of %ID% is paused: no slot fires until it is resumed."],
  resume: ["▶️", "The schedule of %ID% is active again: its next slot after now fires."],
  delete: ["🗑️", "The schedule of %ID% is deleted: it never fires again."],
};

const ALREADY: Record<ScheduleAction, string> = {
  pause: "The schedule of %ID% was already paused.",
  resume: "The schedule of %ID% was already active.",
  delete: "The schedule of %ID% was already deleted.",
};

function renderChanged(o: Extract<Outcome, { kind: "schedule-changed" }>, say: Idiom): Rendered {
  const template =
    o.result === "done"
      ? `${markIn(say, DONE[o.action][0])}${DONE[o.action][1]}`
      : o.result === "already"
        ? ALREADY[o.action]
        : "The schedule of %ID% is deleted: it cannot be paused or resumed.";
  const [before, after] = template.split("%ID%") as [string, string];
  return r`${before}${codeIn(say, o.dagId)}${after}`;
}
