/** The picture of a run or of a DAG that has not run: what `!dag graph` and `dagbot graph` draw. */
import type { ParsedDag } from "../domain/model.js";
import type { RunGraph } from "../domain/run-graph.js";
import { buildRunGraph } from "../domain/run-graph.js";
import type { RunRecord, TaskRecord } from "../ports/store.js";
import { shortRunId } from "./render/words.js";

export { shortRunId };

export function runGraphOf(run: RunRecord, tasks: readonly TaskRecord[]): RunGraph {
  return buildRunGraph({
    dagId: run.dagId,
    runLabel: shortRunId(run.runId),
    runStatusWord: run.status === "pending" ? "awaiting confirmation" : run.status,
    tasks: tasks.map((t) => ({ id: t.taskId, action: t.action, needs: t.needs, status: t.status })),
  });
}

/** A DAG file before any run: every task waiting. */
export function dagGraphOf(dag: ParsedDag): RunGraph {
  return buildRunGraph({
    dagId: dag.id,
    runLabel: null,
    runStatusWord: null,
    tasks: dag.tasks.map((t) => ({ id: t.id, action: t.action, needs: t.needs, status: "blocked" })),
  });
}
