/** `!dag status [<id>]`: one run's tasks, or the room's active runs. */
import { RUN_ID_ARG } from "../../../domain/command-grammar.js";
import type { RunStatus } from "../../../domain/model.js";
import { summarizeTasks } from "../../../domain/run-status.js";
import { listing } from "../../render/blocks.js";
import { code, r } from "../../render/html.js";
import { MAX_CARD_TASK_LINES, renderRunView } from "../../render/status-card.js";
import { plural } from "../../render/words.js";
import type { HandlerContext } from "../context.js";
import type { Outcome } from "../outcome.js";
import { progressOfRuns, selectTaskLines, summarizeRun } from "../outcome.js";
import { MAX_LISTED_RUNS, notFoundRun } from "../shared.js";
import { defineVerb } from "../verb.js";
import { findRun } from "../../run-ref.js";
import { readRoomWaits, waitsOf } from "../../task-waits.js";

const ACTIVE_RUN_STATUSES: RunStatus[] = ["pending", "running", "canceling"];

export const status = defineVerb<{ verb: "status"; id: string | null }, "status" | "overview">({
  verb: "status",
  args: [{ ...RUN_ID_ARG, optional: true }],
  summary: "show one run's tasks, or the room's active runs",
  permission: "open",
  details: [],
  handle: (ctx, c) => handleStatus(ctx, c.id),
  render: {
    status: (o) =>
      renderRunView(
        {
          run: o.run,
          summary: o.summary,
          tasks: o.tasks,
          at: o.at,
          ...(o.roomCap === undefined ? {} : { roomCap: o.roomCap }),
        },
        false,
      ),
    overview: (o) =>
      o.runs.length === 0
        ? r`Nothing is pending or running in this room. ${code("!dag list")} shows recent runs.`
        : listing(r`${plural(o.runs.length, "active run")}:`, o.runs),
  },
});

async function handleStatus(ctx: HandlerContext, dagId: string | null): Promise<Outcome> {
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
  // Why tasks wait: the room's load and live nodes, two reads however many tasks the run has.
  const room = await readRoomWaits(ctx.store, ctx.roomId, ctx.policy.nodeStaleAfterMs);
  return {
    kind: "status",
    run: summarizeRun(run),
    summary: summarizeTasks(tasks.map((t) => t.status)),
    tasks: selectTaskLines(tasks, MAX_CARD_TASK_LINES, waitsOf(run, tasks, room)),
    at,
    roomCap: room.load.cap,
  };
}
