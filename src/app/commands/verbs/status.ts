/** `!dag status [<id> [<task>]]`: one run's tasks (or one task, with its outputs), or the room's active runs. */
import { RUN_ID_ARG } from "../../../domain/command-grammar.js";
import { failureText } from "../../../domain/failure-words.js";
import type { RunStatus } from "../../../domain/model.js";
import { summarizeTasks } from "../../../domain/run-status.js";
import { listing, runLines } from "../../render/blocks.js";
import { paragraphs } from "../../render/blocks.js";
import type { Rendered } from "../../render/html.js";
import { code, r } from "../../render/html.js";
import { MAX_CARD_TASK_LINES, renderRunView, showsPaused } from "../../render/status-card.js";
import { clockTime, plural } from "../../render/words.js";
import type { HandlerContext } from "../context.js";
import type { Outcome } from "../outcome.js";
import type { TaskLine } from "../outcome.js";
import { progressOfRuns, selectTaskLines, summarizeRun, taskLine } from "../outcome.js";
import { MAX_LISTED_RUNS, notFoundRun, notFoundTask } from "../shared.js";
import { outputsLine } from "./logs.js";
import { defineVerb } from "../verb.js";
import { listPage } from "./list.js";
import { findRun } from "../../run-ref.js";
import { readRoomWaits, waitsOf } from "../../task-waits.js";
import { formatDuration, runTimeWords } from "../../../domain/duration.js";
import { exitWords } from "../../../domain/exit-status.js";
import { againWords } from "../../../domain/failure-words.js";
import { TASK_STATUSES } from "../../../domain/model.js";
import { groupWords, matrixGroups } from "../../../domain/matrix.js";
import type { Idiom } from "../face.js";
import { byLayout } from "../face.js";
import { outputValueText } from "../../../domain/outputs.js";

const ACTIVE_RUN_STATUSES: RunStatus[] = ["pending", "running", "canceling"];

/** `every`: every task, not the card's selection (the CLI and HTTP, whose answers no inbox row keeps). */
export interface StatusCommand {
  verb: "status";
  id: string | null;
  /** One task of the run: its line with the values it published (outputs). */
  task?: string | null;
  every?: boolean;
}

export const status = defineVerb<StatusCommand, "status" | "overview">({
  verb: "status",
  args: [
    { ...RUN_ID_ARG, optional: true },
    { name: "task", kind: "task-id", about: "one task of the run, shown with its outputs", optional: true },
  ],
  dataFields: { every: (v) => (typeof v === "boolean" ? null : "true or false") },
  summary: "show one run's tasks (or one task with its outputs), or the room's active runs",
  group: "follow",
  permission: "open",
  details: ["With a task: that task's line and the values it published for its dependents (its outputs)."],
  handle: (ctx, c) => handleStatus(ctx, c.id, c.every === true, c.task ?? null),
  cli: {
    description: "Show the runs of the room, or one run and its tasks.",
    about:
      "With RUN: every task with its state, duration, node and attempts, why a waiting task waits, and\n" +
      "the outputs each published; with TASK too, that task only; without: the room's latest runs\n" +
      "(as `dagbot list`).",
    args: [
      { name: "run", about: "the run: its id or uuid", optional: true },
      { name: "task", about: "one task of the run", optional: true },
    ],
    options: [{ flags: "--limit <n>", about: "how many recent runs to list (without RUN)", default: "20" }],
    // Without a run, the room's latest runs: the list's handler answers.
    command: ([id, task], options) =>
      typeof id === "string"
        ? { verb: "status", id, every: true, ...(typeof task === "string" ? { task } : {}) }
        : { verb: "list", id: null, limit: Number(options?.["limit"] ?? 20) },
    json: (o) => (o.kind === "list" ? listPage(o) : null),
  },
  http: (s) => ({
    method: "GET",
    path: "/v1/runs/:id",
    summary: "One run with every task (a waiting one says why it waits)",
    params: s.runParams,
    response: s.runStatusSchema,
    command: ({ params }) => ({ verb: "status", id: params["id"] ?? "", every: true }),
    answer: (o) =>
      o.kind === "status"
        ? {
            run: o.run,
            summary: o.summary,
            tasks: o.tasks,
            ...(o.roomCap === undefined ? {} : { roomCap: o.roomCap }),
            at: o.at,
            ...(o.failure === undefined ? {} : { failure: o.failure }),
            ...(o.groups === undefined ? {} : { groups: o.groups }),
          }
        : null,
  }),
  render: {
    status: byLayout(
      (o) =>
        withOutputs(
          renderRunView(
            {
              run: o.run,
              summary: o.summary,
              tasks: o.tasks,
              at: o.at,
              ...(o.roomCap === undefined ? {} : { roomCap: o.roomCap }),
              ...(o.groups === undefined ? {} : { groups: o.groups }),
            },
            false,
          ),
          o.tasks,
        ),
      statusText,
    ),
    // "as of": a reply is not edited, so what it says is dated (a "running" here may be long over).
    overview: byLayout(
      (o) =>
        o.runs.length === 0
          ? r`Nothing is pending or running in this room as of ${clockTime(o.at)}. ${code("!dag list")} shows recent runs.`
          : listing(r`${plural(o.runs.length, "active run")} as of ${clockTime(o.at)}:`, o.runs),
      (o) => runLines(o.runs, "nothing is pending or running"),
    ),
  },
});

/** A run view followed by what its shown tasks published: "`build` outputs: `version=1.2.3`". */
function withOutputs(view: Rendered, tasks: readonly TaskLine[]): Rendered {
  const lines = tasks.flatMap((t) => outputsLine(t).map((l) => r`${code(t.taskId)} ${l}`));
  if (lines.length === 0) return view;
  const more = paragraphs(lines);
  return { body: [view.body, more.body].join("\n"), html: view.html + more.html };
}

async function handleStatus(
  ctx: HandlerContext,
  dagId: string | null,
  every: boolean,
  taskId: string | null,
): Promise<Outcome> {
  const at = await ctx.store.now();
  if (dagId === null) {
    const runs = await ctx.store.listRuns(ctx.roomId, {
      statuses: ACTIVE_RUN_STATUSES,
      limit: MAX_LISTED_RUNS,
    });
    return { kind: "overview", runs: await progressOfRuns(ctx.store, runs), at };
  }
  const run = await findRun(ctx.store, ctx.roomId, dagId);
  if (run === null) return notFoundRun(ctx, dagId);
  const tasks = await ctx.store.listTasks(run.runId);
  const one = taskId === null ? null : (tasks.find((t) => t.taskId === taskId) ?? null);
  if (taskId !== null && one === null)
    return notFoundTask(
      run.dagId,
      taskId,
      tasks.map((t) => t.taskId),
    );
  // Why tasks wait: the room's load and live nodes, two reads however many tasks the run has.
  const room = await readRoomWaits(ctx.store, ctx.roomId, ctx.policy.nodeStaleAfterMs);
  const waits = waitsOf(run, tasks, room);
  const groups = matrixGroups(tasks).map((g) => ({ task: g.task, summary: g.summary }));
  return {
    kind: "status",
    run: summarizeRun(run),
    summary: summarizeTasks(tasks.map((t) => t.status)),
    // The card's selection keeps an inbox row and a chat message small; a read of the CLI or HTTP
    // is stored nowhere and shows every task.
    // Outputs are shown for one task, or every task where no inbox row keeps the answer.
    tasks:
      one !== null
        ? [taskLine(one, waits.get(one.taskId), true)]
        : selectTaskLines(tasks, every ? tasks.length : MAX_CARD_TASK_LINES, waits, every),
    at,
    roomCap: room.load.cap,
    room: ctx.roomId,
    ...(run.status === "failed" ? { failure: failureText(tasks) } : {}),
    ...(groups.length > 0 ? { groups } : {}),
  };
}

/**
 * One run with its tasks, as plain lines: a line per task (state, how long, its node, attempts, how
 * a failed one ended, why a waiting one waits), the run's line, and whether the room is paused.
 */
function statusText(o: Extract<Outcome, { kind: "status" }>, say: Idiom): string {
  const idWidth = Math.min(40, Math.max(4, ...o.tasks.map((t) => t.taskId.length)));
  const lines = o.tasks.map((t) => {
    const took = t.startedAt === null ? null : (t.finishedAt ?? o.at) - t.startedAt;
    const cols = [
      t.taskId.padEnd(idWidth),
      t.status.padEnd(9),
      (took === null ? "-" : formatDuration(took)).padStart(8),
      t.node ?? "",
      t.attempt > 1 ? `attempts ${t.attempt}` : "",
      t.decided !== undefined
        ? t.decided
        : t.status === "failed" || t.status === "timed_out"
          ? exitWords(t.exitCode, t.error).join(", ")
          : (againWords(t) ?? ""),
      t.wait === undefined ? "" : `waits: ${t.wait.text}`,
    ];
    const line = `  ${cols.filter((c, i) => i < 3 || c !== "").join("  ")}`.trimEnd();
    // What it published for its dependents, one NAME=value a line under it.
    const published = Object.entries(t.outputs ?? {}).map(
      ([name, value]) => `      output ${name}=${outputValueText(value)}`,
    );
    return [line, ...published].join("\n");
  });
  const run = o.run;
  const counts = TASK_STATUSES.filter((st) => (o.summary.byStatus[st] ?? 0) > 0)
    .map((st) => `${o.summary.byStatus[st]} ${st.replace("_", " ")}`)
    .join(", ");
  // A matrix task as one line over its instances' lines: `deploy × 6: 4 succeeded, 1 failed, 1 running`.
  for (const g of o.groups ?? []) lines.push(groupWords(g));
  lines.push(
    `run ${run.dagId} (${run.runId}) ${runTimeWords(run.status, run.createdAt, run.updatedAt, o.at)}: ${counts}`,
  );
  if (o.failure !== undefined && o.failure !== "") lines.push(`  ${o.failure}`);
  if (showsPaused(run.status, o.roomCap))
    lines.push(
      `room ${o.room ?? "this room"} is paused (cap 0): no task starts until \`${say.command("cap", ["N"])}\` raises the cap`,
    );
  return lines.join("\n");
}
