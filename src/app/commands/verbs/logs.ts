/** `!dag logs <id> <task>`: the captured output of a task. */
import { droppedOutputBytes, droppedWords } from "../../../domain/output-tail.js";
import { RUN_ID_ARG } from "../../../domain/command-grammar.js";
import { paragraphs } from "../../render/blocks.js";
import type { Rendered } from "../../render/html.js";
import {
  code,
  codeBlock,
  jsonBytes,
  longestFittingTail,
  MAX_EVENT_CONTENT_BYTES,
  join,
  r,
  text,
} from "../../render/html.js";
import type { Placement } from "../../render/notice.js";
import { noticeContent } from "../../render/notice.js";
import { renderTaskLine } from "../../render/status-card.js";
import { plural, TASK_WORD } from "../../render/words.js";
import type { HandlerContext } from "../context.js";
import type { Outcome, TaskLine } from "../outcome.js";
import { summarizeRun, taskLine } from "../outcome.js";
import { notFoundRun, notFoundTask } from "../shared.js";
import { defineVerb } from "../verb.js";
import { findRun } from "../../run-ref.js";
import { byLayout } from "../face.js";
import { outputValueText } from "../../../domain/outputs.js";

export const logs = defineVerb<{ verb: "logs"; id: string; task: string }, "logs">({
  verb: "logs",
  args: [RUN_ID_ARG, { name: "task", kind: "task-id", about: "the id of a task" }],
  summary: "show the captured output of a task",
  group: "follow",
  // Output can hold what an action printed about its host; `!dag policy logs anyone` opens it.
  permission: "operator",
  openWhen: (policy) => (policy.logs ?? "operators") === "anyone",
  details: ["Operators only, unless the room's policy says `logs anyone` (see `!dag help policy`)."],
  handle: (ctx, c) => handleLogs(ctx, c.id, c.task),
  render: {
    logs: byLayout(
      renderLogs,
      (o) => o.output ?? `(no output; ${o.task.taskId} is ${TASK_WORD[o.task.status]})`,
    ),
  },
});

async function handleLogs(ctx: HandlerContext, dagId: string, taskId: string): Promise<Outcome> {
  const run = await findRun(ctx.store, ctx.roomId, dagId);
  if (run === null) return notFoundRun(ctx, dagId);
  const task = await ctx.store.getTask(run.runId, taskId);
  if (task === null)
    return notFoundTask(
      run.dagId,
      taskId,
      run.dag.tasks.map((t) => t.id),
    );
  const base = {
    kind: "logs" as const,
    run: summarizeRun(run),
    task: taskLine(task, undefined, true),
    at: await ctx.store.now(),
  };
  // Cut here, so the inbox row keeps only what the reply shows.
  const dropped = droppedOutputBytes(task.output, task.outputBytes);
  return fitLogs({
    ...base,
    output: task.output,
    omittedChars: 0,
    ...(dropped > 0 ? { droppedBytes: dropped, outputBytes: task.outputBytes ?? 0 } : {}),
  });
}

function renderLogs(outcome: Extract<Outcome, { kind: "logs" }>): Rendered {
  const { run, task } = outcome;
  const head = r`Output of ${code(task.taskId)} in ${code(run.dagId)}: ${renderTaskLine(task, outcome.at)}`;
  const published = outputsLine(task);
  if (outcome.output === null || outcome.output === "") {
    const why = task.finishedAt === null ? `no output yet (it is ${TASK_WORD[task.status]}).` : "no output.";
    return paragraphs([head, ...published, text(why)]);
  }
  const cut =
    outcome.omittedChars > 0
      ? [text(`(the last part only: ${plural(outcome.omittedChars, "earlier character")} omitted)`)]
      : [];
  // A task still running shows what it wrote so far; a task waiting for a retry, its last attempt's.
  const partial =
    task.status === "running" || task.status === "canceling"
      ? [text("(partial: its output so far; it is still running)")]
      : task.finishedAt === null && task.attempt > 1
        ? [text(`(from attempt ${task.attempt - 1}; attempt ${task.attempt} has not started)`)]
        : [];
  const dropped =
    outcome.droppedBytes !== undefined && outcome.droppedBytes > 0
      ? [text(`(${droppedWords(outcome.droppedBytes, outcome.outputBytes ?? 0)})`)]
      : [];
  const block = codeBlock(outcome.output);
  const notes = [...published, ...partial, ...dropped, ...cut];
  return {
    body: [head.body, ...notes.map((c) => c.body), block.body].join("\n"),
    html: paragraphs([head, ...notes]).html + block.html,
  };
}

/** "Outputs: `version=1.2.3`, `commit=abc1234`": what the task published, when it did. */
export function outputsLine(task: TaskLine): Rendered[] {
  const entries = Object.entries(task.outputs ?? {});
  if (entries.length === 0) return [];
  return [
    r`Outputs: ${join(
      entries.map(([name, value]) => code(`${name}=${outputValueText(value)}`)),
      ", ",
    )}`,
  ];
}

type LogsOutcome = Extract<Outcome, { kind: "logs" }>;

/**
 * A logs outcome whose output is the longest tail that lets the reply fit one event (the output is
 * in it twice: the body's code block and the escaped HTML). Counts what was cut in omittedChars.
 */
export function fitLogs(
  outcome: LogsOutcome,
  placement: Placement = { kind: "reply", to: "$x" },
): LogsOutcome {
  const output = outcome.output;
  if (output === null) return outcome;
  const full = outcome.omittedChars + output.length;
  const withTail = (tail: string): LogsOutcome => ({
    ...outcome,
    output: tail,
    omittedChars: full - tail.length,
  });
  const fits = (tail: string): boolean => {
    return jsonBytes(noticeContent(renderLogs(withTail(tail)), placement)) <= MAX_EVENT_CONTENT_BYTES - 500;
  };
  return withTail(longestFittingTail(output, fits));
}
