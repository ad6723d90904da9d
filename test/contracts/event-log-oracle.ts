/**
 * The oracle the contract suite runs after every test, on every store: each `task.*` and `run.*`
 * line of a room's event log must be a legal move of the domain's transition tables
 * (src/domain/task-states.ts, run-states.ts), from the status the lines before it left, by an actor
 * of the right kind (a leader write carries its term; a worker's carries none). The stores keep
 * single-statement SQL on their hot paths; this is what keeps those statements to the tables.
 */
import type { RunStatus, TaskStatus } from "../../src/domain/model.js";
import type { RunActor } from "../../src/domain/run-states.js";
import { RUN_ACTORS, canTransitionRun, isRunStatus } from "../../src/domain/run-states.js";
import type { TaskActor } from "../../src/domain/task-states.js";
import { TASK_ACTORS, canTransitionTask, isTaskStatus } from "../../src/domain/task-states.js";
import type { EventLogStore, LogEvent } from "../../src/ports/store.js";

/** Every leader-side task actor is fenced by a term; the worker is the one that is not. */
const LEADER_TASK_ACTORS: readonly TaskActor[] = TASK_ACTORS.filter((a) => a !== "worker");

/** The illegal moves in one room's log, as readable lines; empty when every move is legal. */
export function illegalMoves(events: readonly LogEvent[]): string[] {
  const problems: string[] = [];
  const runs = new Map<string, RunStatus>();
  const tasks = new Map<string, TaskStatus>();
  const where = (e: LogEvent): string =>
    `seq ${e.seq} ${e.kind} run ${e.runId ?? "-"}${e.taskId === null ? "" : ` task ${e.taskId}`}`;
  for (const e of events) {
    const [topic, to] = e.kind.split(".", 2);
    if (e.runId === null || to === undefined) continue;
    if (topic === "run" && to === "created") {
      const status = e.data["status"];
      if (isRunStatus(status)) runs.set(e.runId, status);
      else problems.push(`${where(e)}: created with status ${String(status)}`);
      continue;
    }
    // A run whose creation is not in the log (pruned by retention) cannot be replayed.
    if (!runs.has(e.runId)) continue;
    if (topic === "run") {
      const from = runs.get(e.runId)!;
      const actors: readonly RunActor[] = RUN_ACTORS;
      if (!isRunStatus(to)) problems.push(`${where(e)}: ${to} is no run status`);
      else if (e.term === null) problems.push(`${where(e)}: a run move without a leader term`);
      else if (!actors.some((a) => canTransitionRun(from, to, a)))
        problems.push(`${where(e)}: run ${from} → ${to} is not in RUN_TRANSITIONS`);
      if (isRunStatus(to)) runs.set(e.runId, to);
    } else if (topic === "task" && e.taskId !== null) {
      const key = `${e.runId}/${e.taskId}`;
      const from = tasks.get(key) ?? "blocked";
      const actors = e.term === null ? (["worker"] as const) : LEADER_TASK_ACTORS;
      if (!isTaskStatus(to)) problems.push(`${where(e)}: ${to} is no task status`);
      else if (!actors.some((a) => canTransitionTask(from, to, a)))
        problems.push(
          `${where(e)}: task ${from} → ${to} by ${e.term === null ? "a worker" : "the leader"} is not in TASK_TRANSITIONS`,
        );
      if (isTaskStatus(to)) tasks.set(key, to);
    }
  }
  return problems;
}

/** Reads a room's whole log, page by page. */
export async function readWholeLog(store: EventLogStore, roomId: string): Promise<LogEvent[]> {
  const all: LogEvent[] = [];
  for (;;) {
    const page = await store.readEvents(roomId, all.at(-1)?.seq ?? 0, 1000);
    all.push(...page);
    if (page.length < 1000) return all;
  }
}
