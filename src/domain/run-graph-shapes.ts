/**
 * The shapes of a picture of a run (what run-graph.ts builds and graph-budget.ts reduces), in a file
 * of their own so that the two import them without importing each other.
 */
import type { TaskStatus } from "./model.js";

/** How a picture was reduced to fit the picture budget (graph-budget.ts). */
export type GraphReduction = "implied-edges" | "bands" | null;

export interface GraphBox {
  /** Stable key of the box: `t:<task id>` or `g:<n>`. */
  key: string;
  kind: "task" | "group";
  /** Task id, or the first and last member of a group. */
  title: string;
  /** The action for a task; `N tasks` for a group. */
  caption: string;
  /** A task's status; for a group, its most urgent member status. */
  status: TaskStatus;
  /** Members in document order (one for a task box). */
  taskIds: string[];
  /** Members per status, zero where none. */
  counts: Record<TaskStatus, number>;
  /** A task box's reason to wait, when it has one besides its needs. */
  wait?: string;
  /** A task box of an approval gate: people decide it, so it has a shape of its own. */
  gate?: true;
  /** A task box's run condition when not the default (run-when.ts): said on the box and its edges. */
  when?: "failed" | "denied" | "done";
}

export interface RunGraph {
  title: string;
  counts: string;
  /** Statuses that occur, in TASK_STATUSES order: the legend. */
  legend: TaskStatus[];
  boxes: GraphBox[];
  /** Box keys, deduplicated, in a stable order. */
  edges: [string, string][];
  /** True when some box groups several tasks. */
  grouped: boolean;
  /** How the picture was reduced to fit the picture budget (graph-budget.ts); absent or null: not. */
  reduction?: GraphReduction;
  /** Why the run's tasks wait, one line under the counts; absent when none do. */
  waits?: string;
}
