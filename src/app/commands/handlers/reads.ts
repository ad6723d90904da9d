/** The open commands: help, status, list, logs and nodes. They read and change nothing. */
import { nextSlot } from "../../../domain/schedule.js";
import { isActiveSchedule } from "../../schedules.js";
import type { ScheduleLine } from "../outcome.js";
import type { CommandVerb } from "../../../domain/command-table.js";
import { COMMANDS, commandInfo } from "../../../domain/command-table.js";
import type { RunStatus } from "../../../domain/model.js";
import { fitLogs } from "../../render/messages.js";
import { MAX_CARD_TASK_LINES } from "../../render/status-card.js";
import type { HandlerContext } from "../context.js";
import type { Outcome } from "../outcome.js";
import { nodeLine, progressOf, selectTaskLines, summarizeRun, taskLine } from "../outcome.js";
import { summarizeTasks } from "../../../domain/run-status.js";
import { mayUse } from "../permissions.js";
import { notFoundRun, notFoundTask } from "./shared.js";

const ACTIVE_RUN_STATUSES: RunStatus[] = ["pending", "running", "canceling"];
const MAX_LISTED_RUNS = 15;

export function handleHelp(ctx: HandlerContext, topic: CommandVerb | null): Outcome {
  const requiredPowerLevel = ctx.policy.requiredPowerLevel;
  if (topic !== null) {
    const info = commandInfo(topic);
    const allowed = mayUse(topic, ctx.standing, ctx.policy);
    return {
      kind: "help",
      entries: [{ verb: topic, usage: info.usage, summary: info.summary }],
      details: info.details.length > 0 ? [...info.details] : [],
      hiddenVerbs: allowed ? [] : [topic],
      requiredPowerLevel,
    };
  }
  const allowed = COMMANDS.filter((c) => mayUse(c.verb, ctx.standing, ctx.policy));
  return {
    kind: "help",
    entries: allowed.map((c) => ({ verb: c.verb, usage: c.usage, summary: c.summary })),
    details: [],
    hiddenVerbs: COMMANDS.filter((c) => !allowed.includes(c)).map((c) => c.verb),
    requiredPowerLevel,
  };
}

export async function handleStatus(ctx: HandlerContext, dagId: string | null): Promise<Outcome> {
  const at = await ctx.store.now();
  if (dagId === null) {
    const runs = await ctx.store.listRuns(ctx.roomId, {
      statuses: ACTIVE_RUN_STATUSES,
      limit: MAX_LISTED_RUNS,
    });
    const progress = await Promise.all(
      runs.map(async (run) => progressOf(run, await ctx.store.listTasks(run.runId))),
    );
    return { kind: "overview", runs: progress, at };
  }
  const run = await ctx.store.getRun(ctx.roomId, dagId);
  if (run === null) return notFoundRun(ctx, dagId);
  const tasks = await ctx.store.listTasks(run.runId);
  return {
    kind: "status",
    run: summarizeRun(run),
    summary: summarizeTasks(tasks.map((t) => t.status)),
    tasks: selectTaskLines(tasks, MAX_CARD_TASK_LINES),
    at,
    roomCap: await ctx.store.getRoomCap(ctx.roomId),
  };
}

/** `!dag schedules`: the room's scheduled definitions, the next slot of each and the newest fired. */
export async function handleSchedules(ctx: HandlerContext): Promise<Outcome> {
  const at = await ctx.store.now();
  const runs = await ctx.store.listRuns(ctx.roomId, { limit: MAX_HISTORY_SCAN * 10 });
  const newest = new Map<string, number>();
  for (const r of runs) {
    const of = r.dag.definition;
    if (of !== undefined && r.dag.slot !== undefined)
      newest.set(of, Math.max(newest.get(of) ?? 0, r.dag.slot.at));
  }
  const schedules: ScheduleLine[] = [];
  for (const run of runs) {
    const spec = run.dag.schedule;
    if (spec === undefined || run.dag.definition !== undefined) continue;
    if (run.status === "rejected" || run.status === "expired" || run.status === "canceled") continue;
    const last = newest.get(run.dagId) ?? null;
    schedules.push({
      dagId: run.dagId,
      cron: spec.cron,
      timezone: spec.timezone,
      missed: spec.missed,
      next: nextSlot(spec, at),
      last,
      active: isActiveSchedule(run),
    });
  }
  return { kind: "schedules", schedules: schedules.slice(0, MAX_LISTED_RUNS * 2), at };
}

/** How many of the room's latest runs `!dag list <id>` looks through for that DAG's runs. */
const MAX_HISTORY_SCAN = 1000;

export async function handleList(ctx: HandlerContext, of: string | null = null): Promise<Outcome> {
  const at = await ctx.store.now();
  if (of !== null) {
    const definition = await ctx.store.getRun(ctx.roomId, of);
    if (definition === null) return notFoundRun(ctx, of);
    const recent = await ctx.store.listRuns(ctx.roomId, { limit: MAX_HISTORY_SCAN });
    const runs = recent
      .filter((run) => run.dagId === of || run.dag.definition === of)
      .slice(0, MAX_LISTED_RUNS);
    const progress = await Promise.all(
      runs.map(async (run) => progressOf(run, await ctx.store.listTasks(run.runId))),
    );
    return { kind: "list", runs: progress, at, of };
  }
  const runs = await ctx.store.listRuns(ctx.roomId, { limit: MAX_LISTED_RUNS });
  const progress = await Promise.all(
    runs.map(async (run) => progressOf(run, await ctx.store.listTasks(run.runId))),
  );
  return { kind: "list", runs: progress, at };
}

export async function handleLogs(ctx: HandlerContext, dagId: string, taskId: string): Promise<Outcome> {
  const run = await ctx.store.getRun(ctx.roomId, dagId);
  if (run === null) return notFoundRun(ctx, dagId);
  const task = await ctx.store.getTask(run.runId, taskId);
  if (task === null)
    return notFoundTask(
      dagId,
      taskId,
      run.dag.tasks.map((t) => t.id),
    );
  const base = {
    kind: "logs" as const,
    run: summarizeRun(run),
    task: taskLine(task),
    at: await ctx.store.now(),
  };
  // Cut here, so the inbox row keeps only what the reply shows.
  return fitLogs({ ...base, output: task.output, omittedChars: 0 });
}

export async function handleGraph(ctx: HandlerContext, dagId: string): Promise<Outcome> {
  const run = await ctx.store.getRun(ctx.roomId, dagId);
  if (run === null) return notFoundRun(ctx, dagId);
  return { kind: "graph", run: summarizeRun(run) };
}

export async function handleNodes(ctx: HandlerContext, verbose = false): Promise<Outcome> {
  const [nodes, lease, at] = await Promise.all([
    ctx.store.listNodes(),
    ctx.store.getLease(ctx.roomId),
    ctx.store.now(),
  ]);
  const leader =
    lease === null || lease.holder === null
      ? null
      : { nodeId: lease.holder.nodeId, term: lease.term, expiresInMs: lease.expiresAt - lease.now };
  // Only this room's nodes: a store shared by several rooms must not show one room the others' fleet.
  const lines = nodes
    .filter((n) => n.roomIds.includes(ctx.roomId))
    .map((n) => nodeLine(n, ctx.roomId))
    .sort((a, b) => a.nodeId.localeCompare(b.nodeId));
  return { kind: "nodes", nodes: lines, leader, staleAfterMs: ctx.policy.nodeStaleAfterMs, at, verbose };
}
