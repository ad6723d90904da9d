/**
 * Which queued tasks a node may claim (docs/architecture.md §3, "Task lease"): its action is one the
 * node has, it is pinned to no node or to this one, and the node has each of its labels. The claim
 * applies the same rule in SQL (FITS, src/adapters/store-common/ops/claims.ts); what reads the queue
 * in code (the leader's wakes, a core's look before an edge's claim) decides with this.
 */

/** What a queued task needs of a node. */
export interface TaskNeeds {
  action: string;
  /** `on.node`; null: any node. */
  pin: string | null;
  labels: readonly string[];
}

/** What a node offers. */
export interface NodeHas {
  nodeId: string;
  labels: ReadonlySet<string>;
  actions: ReadonlySet<string>;
}

export function taskFits(task: TaskNeeds, node: NodeHas): boolean {
  return (
    node.actions.has(task.action) &&
    (task.pin === null || task.pin === node.nodeId) &&
    task.labels.every((l) => node.labels.has(l))
  );
}
