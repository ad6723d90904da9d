/**
 * `!dag mark <run> <task> succeeded|skipped [reason ...]`: an operator's override of a task that
 * failed, timed out, was denied or still waits, so that what needs it may go on (docs/architecture.md
 * §3, "Mark"). The domain decides (decideMark in src/domain/task-mark.ts); the leader applies it in
 * one fenced store call (src/adapters/store-common/ops/mark-task.ts) that marks the inbox row too.
 */
import { z } from "zod";
import type { Parsed } from "../../../domain/command-grammar.js";
import { checkId, checkTaskId, fail, ok } from "../../../domain/command-grammar.js";
import { quoteInput } from "../../../domain/command-text.js";
import { faceOfSender } from "../../../domain/gates.js";
import type { RunStatus, TaskStatus } from "../../../domain/model.js";
import { runSource, runStartVerdict } from "../../../domain/run-authority.js";
import { isTerminalRun } from "../../../domain/run-states.js";
import type { MarkRecord, MarkTarget } from "../../../domain/task-mark.js";
import { MARK_TARGETS, MAX_MARK_REASON, isMarkTarget, markRecord } from "../../../domain/task-mark.js";
import { isNotFound } from "../../../ports/errors.js";
import type { MarkTaskResult } from "../../../ports/store.js";
import type { Rendered } from "../../render/html.js";
import { r, text } from "../../render/html.js";
import { RUN_SAID } from "../../render/words.js";
import { findRun } from "../../run-ref.js";
import type { HandlerContext } from "../context.js";
import type { Idiom } from "../face.js";
import { codeIn, commandIn, markIn, userIn } from "../face.js";
import type { Outcome } from "../outcome.js";
import { commandContext, notFoundRun, notFoundTask } from "../shared.js";
import { defineVerb } from "../verb.js";
import type { Shapes } from "../verb.js";

const USAGE = "!dag mark <run> <task> succeeded|skipped [<reason> ...]";

export interface MarkCommand {
  verb: "mark";
  id: string;
  task: string;
  to: MarkTarget;
  /** Why, as typed (at most MAX_MARK_REASON characters); kept in the run's history and on the card. */
  reason: string | null;
}

/** The outcome of a mark: what the store kept on the inbox row, and the run's thread in chat. */
export type MarkOutcome = Extract<Outcome, { kind: "mark" }>;

/** A mark's outcome, from what the domain recorded of it. */
export function markOutcome(record: MarkRecord, publishEventId: string | null): MarkOutcome {
  const { kind, ...rest } = record;
  return { kind: "mark", result: kind, publishEventId, ...rest };
}

function parseMark(args: string[], after: string): Parsed<MarkCommand> {
  const [rawId, rawTask, rawTo, ...rest] = args;
  if (rawId === undefined)
    return fail("missing-argument", "mark", "missing <run>, the id of a DAG run: !dag mark needs it");
  if (rawTask === undefined)
    return fail("missing-argument", "mark", "missing <task>, the id of the task to mark: !dag mark needs it");
  if (rawTo === undefined)
    return fail("missing-argument", "mark", "missing succeeded or skipped: what the task is to count as");
  // The reason is the rest of the text as typed, spaces and all.
  const reason = rest.length === 0 ? null : after.trim().split(/\s+/).slice(3).join(" ");
  return commandOf(rawId, rawTask, rawTo, reason);
}

function commandOf(
  rawId: string,
  rawTask: string,
  rawTo: string,
  reason: string | null,
): Parsed<MarkCommand> {
  const id = checkId("mark", "run id", rawId);
  if (typeof id !== "string") return id;
  const task = checkTaskId("mark", "task id", rawTask);
  if (typeof task !== "string") return task;
  if (!isMarkTarget(rawTo))
    return fail("bad-argument", "mark", `${quoteInput(rawTo)} is not succeeded or skipped`);
  if (reason !== null && reason.length > MAX_MARK_REASON)
    return fail(
      "bad-argument",
      "mark",
      `the reason is ${reason.length} characters long; at most ${MAX_MARK_REASON}`,
    );
  return ok({ verb: "mark", id, task, to: rawTo, reason: reason === "" ? null : reason });
}

function markFromData(data: Readonly<Record<string, unknown>>): Parsed<MarkCommand> {
  const allowed = ["verb", "id", "task", "to", "reason"];
  const extra = Object.keys(data).find((k) => !allowed.includes(k));
  if (extra !== undefined)
    return fail(
      "extra-argument",
      "mark",
      `unexpected field ${quoteInput(extra)}: mark takes id, task, to, reason`,
    );
  const { id, task, to } = data;
  const reason = data["reason"] ?? null;
  if (typeof id !== "string") return fail("missing-argument", "mark", "missing id, the id of a DAG run");
  if (typeof task !== "string") return fail("missing-argument", "mark", "missing task, the id of the task");
  if (typeof to !== "string") return fail("missing-argument", "mark", "missing to: succeeded or skipped");
  if (reason !== null && typeof reason !== "string")
    return fail("bad-argument", "mark", "reason is a string");
  return commandOf(id, task, to, reason);
}

async function handleMark(ctx: HandlerContext, c: MarkCommand): Promise<Outcome> {
  if (ctx.fence === null) return { kind: "not-leader", roomId: ctx.roomId };
  const run = await findRun(ctx.store, ctx.roomId, c.id);
  if (run === null) return notFoundRun(ctx, c.id);
  const task = await ctx.store.getTask(run.runId, c.task);
  if (task === null)
    return notFoundTask(
      run.dagId,
      c.task,
      run.dag.tasks.map((t) => t.id),
    );
  // A mark lets the run's content go on: only on the authority the run already has (§3, "Authority").
  if (run.status === "running" && runStartVerdict(true, [runSource(run)]).kind !== "start")
    return {
      kind: "refused",
      verb: "mark",
      reason: `${run.dagId} was never approved`,
      helpLine: `usage: ${USAGE}`,
    };
  const input = { to: c.to, by: ctx.sender, face: faceOfSender(ctx.sender), reason: c.reason };
  const answer = (result: MarkTaskResult): Outcome =>
    markOutcome(
      markRecord(result.verdict, input, result.run, c.task, result.task.status),
      run.publishEventId,
    );
  const cmd = commandContext(ctx, answer);
  if (cmd === null) return { kind: "not-leader", roomId: ctx.roomId };
  try {
    return answer(await ctx.store.markTask(cmd, ctx.roomId, run.dagId, c.task, input));
  } catch (err) {
    if (isNotFound(err)) return notFoundRun(ctx, c.id);
    throw err;
  }
}

const STATUS_WORD: Readonly<Record<TaskStatus, string>> = {
  blocked: "waits",
  queued: "is queued",
  running: "is running",
  canceling: "is being canceled",
  succeeded: "succeeded",
  failed: "failed",
  timed_out: "timed out",
  canceled: "was canceled",
  skipped: "was skipped",
};

/** A mark's answer in the face's words. */
export function renderMark(o: MarkOutcome, say: Idiom): Rendered {
  const task = codeIn(say, `${o.dagId}/${o.taskId}`);
  const by = userIn(say, o.by);
  const why = o.reason === null ? text("") : r` (${o.reason})`;
  switch (o.result) {
    case "marked": {
      if (o.to === "skipped")
        return r`${markIn(say, "⏭️")}${by} marked ${task} skipped${why}: what needs it is skipped.`;
      const n = o.revived.length;
      const back =
        n === 0 ? text("") : r`; ${text(o.revived.join(", "))} ${n === 1 ? "is" : "are"} no longer skipped`;
      return r`${markIn(say, "✅")}${by} marked ${task} succeeded${why}: what needs it may run now${back}.`;
    }
    case "running":
      return r`${task} ${STATUS_WORD[o.status]}: a mark would not stop its action. Wait for it to end, or cancel the run (${commandIn(
        say,
        "cancel",
        [o.dagId],
      )}). Nothing changed.`;
    case "wrong-status":
      return r`${task} ${STATUS_WORD[o.status]}: only a task that failed, timed out, was denied or waits can be marked ${o.to}. Nothing changed.`;
    case "run-not-running":
      return runNotRunning(o, say, task, o.runStatus ?? "running");
  }
}

function runNotRunning(o: MarkOutcome, say: Idiom, task: Rendered, runStatus: RunStatus): Rendered {
  const hint = isTerminalRun(runStatus)
    ? r` A mark cannot change how a run ended; ${commandIn(say, "retry", [o.dagId])} runs again what did not succeed.`
    : text("");
  return r`${task} cannot be marked: its run ${RUN_SAID[runStatus]}.${hint} Nothing changed.`;
}

/** The answer's shape, made with the route (verb.ts, Shapes). */
const markedSchema = (s: Shapes) =>
  z.object({
    ...s.commandAnswer,
    result: z.literal("marked"),
    runId: z.string(),
    dagId: z.string(),
    taskId: z.string(),
    from: z.string().describe("the task's status before the mark"),
    to: z.enum(MARK_TARGETS),
    by: z.string(),
    reason: z.string().nullable(),
    revived: z.array(z.string()).describe("dependents skipped behind the task that may run again"),
  });

export const mark = defineVerb<MarkCommand, "mark">({
  verb: "mark",
  group: "run",
  usage: USAGE,
  summary: "mark a task that failed or waits as succeeded or skipped, so what needs it goes on",
  permission: "operator",
  details: [
    "An operator's override for a task that failed, timed out, was denied, or waits (blocked, queued, an",
    "open gate): succeeded lets what needs it run (dependents it had skipped are decided again); skipped",
    "counts as any skipped task does, so what needs it is skipped too. Only in a run that is still",
    "running; a running task is refused (cancel the run instead). The reason (optional, the rest of the",
    "line) is kept in the run's history and shown on its card.",
  ],
  parse: parseMark,
  fromData: markFromData,
  handle: handleMark,
  render: { mark: renderMark },
  writes: true,
  cli: {
    description: "Mark a task that failed or waits as succeeded or skipped, so what needs it goes on.",
    about:
      "An operator's override, kept in the run's history with the reason. Only in a running run, never for a running task.",
    args: [
      { name: "run", about: "the run's id" },
      { name: "task", about: "the task's id" },
      { name: "to", about: "succeeded or skipped" },
      { name: "reason", about: "why (the rest of the words)", variadic: true },
    ],
    command: ([id, task, to, words]) => {
      const reason = (Array.isArray(words) ? (words as readonly string[]) : []).join(" ");
      return {
        verb: "mark",
        id: typeof id === "string" ? id : "",
        task: typeof task === "string" ? task : "",
        to: (typeof to === "string" ? to : "") as MarkTarget,
        reason: reason === "" ? null : reason,
      };
    },
  },
  http: (s) => ({
    method: "POST",
    path: "/v1/runs/:id/tasks/:task/mark",
    summary: "Mark a task that failed or waits as succeeded or skipped",
    params: s.taskParams,
    body: z.strictObject({
      to: z.enum(MARK_TARGETS).describe("what the task is to count as"),
      reason: z.string().max(MAX_MARK_REASON).optional().describe("why, kept in the run's history"),
    }),
    response: markedSchema(s),
    command: ({ params, body }) => {
      const b = (body ?? {}) as { to?: MarkTarget; reason?: string };
      return {
        verb: "mark",
        id: params["id"] ?? "",
        task: params["task"] ?? "",
        to: b.to ?? "succeeded",
        reason: b.reason ?? null,
      };
    },
    answer: (o) =>
      o.kind === "mark" && o.result === "marked"
        ? {
            result: "marked",
            runId: o.runId,
            dagId: o.dagId,
            taskId: o.taskId,
            from: o.status,
            to: o.to,
            by: o.by,
            reason: o.reason,
            revived: o.revived,
          }
        : null,
  }),
});
