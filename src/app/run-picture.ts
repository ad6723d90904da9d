/** The picture of a run or of a DAG that has not run: what `!dag graph` and `dagbot graph` draw. */
import { triggerWords } from "../domain/after.js";
import type { ParsedDag } from "../domain/model.js";
import type { RunGraph } from "../domain/run-graph.js";
import { buildRunGraph } from "../domain/run-graph.js";
import type { RunRecord, TaskRecord } from "../ports/store.js";
import type { WaitReason } from "../domain/wait-reasons.js";
import { groupWaits, waitsLine, waitText } from "../domain/wait-reasons.js";
import { shortRunId } from "./render/words.js";

export { shortRunId };

/** `waits`: why tasks wait (task-waits.ts), said in the title and on each waiting task's box. */
export function runGraphOf(
  run: RunRecord,
  tasks: readonly TaskRecord[],
  waits?: ReadonlyMap<string, WaitReason>,
): RunGraph {
  const plain = (name: string): string => name;
  const boxWait = (taskId: string): { wait: string } | Record<string, never> => {
    const reason = waits?.get(taskId);
    return reason === undefined || reason.kind === "needs" ? {} : { wait: waitText(reason, plain) };
  };
  return buildRunGraph({
    dagId: run.dagId,
    runLabel: null,
    runStatusWord: run.status === "pending" ? "awaiting confirmation" : run.status,
    ...(run.dag.trigger === undefined ? {} : { startedBy: triggerWords(run.dag.trigger) }),
    tasks: tasks.map((t) => ({
      id: t.taskId,
      action: t.action,
      needs: t.needs,
      status: t.status,
      ...boxWait(t.taskId),
      ...(t.gate === null ? {} : { gate: true as const }),
      ...(t.forEach === null ? {} : { forEach: t.forEach.output }),
      ...(t.when === undefined ? {} : { when: t.when }),
    })),
    ...(waits === undefined ? {} : { waits: waitsLine(groupWaits(waits, plain)) }),
  });
}

/** A DAG file before any run: every task waiting. */
export function dagGraphOf(dag: ParsedDag): RunGraph {
  return buildRunGraph({
    dagId: dag.id,
    runLabel: null,
    runStatusWord: null,
    tasks: dag.tasks.map((t) => ({
      id: t.id,
      action: t.action,
      needs: t.needs,
      status: "blocked" as const,
      ...(t.gate === undefined ? {} : { gate: true as const }),
      ...(t.forEach === undefined ? {} : { forEach: t.forEach.output }),
      ...(t.when === undefined ? {} : { when: t.when }),
    })),
  });
}
