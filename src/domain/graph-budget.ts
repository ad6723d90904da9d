/**
 * What a picture of a run may cost to draw: at most PICTURE_BUDGET.maxBoxes boxes and
 * PICTURE_BUDGET.maxEdges edges reach the layout, whatever the DAG. Graphviz's layout time grows
 * far faster than its input (a 141-task DAG with 9,870 needs took over 17 s of CPU and 350 MB), so
 * a graph over the budget is reduced before any drawing (run-graph.ts applies it, so every face,
 * chat and `dagbot graph`, draws within the same budget):
 * 1. needs implied by a longer path are left out (a transitive reduction: who waits for whom is
 *    still read off the picture, only the redundant arrows go), before the tasks are grouped;
 * 2. crowded levels are folded (run-graph.ts);
 * 3. if that is not enough, boxes are folded into at most PICTURE_BUDGET.bands bands of
 *    consecutive levels, one box per band: a picture of the run's shape and its counts.
 * Where the other picture budgets live: docs/architecture.md §9.
 */
import type { TaskStatus } from "./model.js";
import type { GraphBox, GraphReduction, RunGraph } from "./run-graph-shapes.js";

export const PICTURE_BUDGET = {
  /** Boxes a picture may hold; run-graph.ts already folds past MAX_BOXES, this is the hard stop. */
  maxBoxes: 200,
  /** Edges a picture may hold: Graphviz's crossing minimisation is what grows with them. */
  maxEdges: 400,
  /** Bands of levels in the last resort: a chain of this many boxes. */
  bands: 30,
} as const;

export type PictureBudget = { readonly maxBoxes: number; readonly maxEdges: number; readonly bands: number };

/** How a picture was reduced to fit its budget; null when it is drawn as built (run-graph-shapes.ts). */
export type { GraphReduction };

export function overBudget(graph: Pick<RunGraph, "boxes" | "edges">, budget: PictureBudget): boolean {
  return graph.boxes.length > budget.maxBoxes || graph.edges.length > budget.maxEdges;
}

/** Nodes 0..n-1 in an order where every edge goes forward; the graph is a DAG (run-graph.ts). */
function topologicalOrder(succ: readonly (readonly number[])[]): number[] {
  const indegree = new Array<number>(succ.length).fill(0);
  for (const out of succ) for (const b of out) indegree[b]! += 1;
  const order: number[] = [];
  indegree.forEach((d, i) => {
    if (d === 0) order.push(i);
  });
  for (let i = 0; i < order.length; i++) {
    for (const next of succ[order[i]!]!) {
      indegree[next]! -= 1;
      if (indegree[next] === 0) order.push(next);
    }
  }
  return order;
}

/**
 * The successors of each node without the edges a longer path implies (the transitive reduction).
 * Reachability as bit sets in reverse topological order: O(edges × nodes / 32), a few milliseconds
 * for the largest DAG a document can hold (1,000 tasks, 64 KiB of needs).
 */
export function withoutImpliedEdges(succ: readonly (readonly number[])[]): number[][] {
  const words = Math.ceil(succ.length / 32);
  const reach = succ.map(() => new Uint32Array(words));
  const order = topologicalOrder(succ);
  for (let k = order.length - 1; k >= 0; k--) {
    const i = order[k]!;
    const mine = reach[i]!;
    for (const s of succ[i]!) {
      const theirs = reach[s]!;
      for (let w = 0; w < words; w++) mine[w]! |= theirs[w]!;
      mine[s >>> 5]! |= 1 << (s & 31);
    }
  }
  return succ.map((out) => {
    // a → b is implied when b is reachable from a successor of a (never from b itself: a DAG).
    const viaOthers = new Uint32Array(words);
    for (const s of out) {
      const theirs = reach[s]!;
      for (let w = 0; w < words; w++) viaOthers[w]! |= theirs[w]!;
    }
    return out.filter((b) => (viaOthers[b >>> 5]! & (1 << (b & 31))) === 0);
  });
}

/** The same for edges between keyed boxes, in their given order. */
export function impliedEdgesLeftOut(
  keys: readonly string[],
  edges: readonly [string, string][],
): [string, string][] {
  const index = new Map(keys.map((k, i) => [k, i]));
  const succ: number[][] = keys.map(() => []);
  for (const [a, b] of edges) succ[index.get(a)!]!.push(index.get(b)!);
  const kept = new Set(withoutImpliedEdges(succ).flatMap((out, a) => out.map((b) => `${a}>${b}`)));
  return edges.filter(([a, b]) => kept.has(`${index.get(a)!}>${index.get(b)!}`));
}

/** Longest-path depth of each box. */
function boxLevels(keys: readonly string[], edges: readonly [string, string][]): Map<string, number> {
  const index = new Map(keys.map((k, i) => [k, i]));
  const succ: number[][] = keys.map(() => []);
  for (const [a, b] of edges) succ[index.get(a)!]!.push(index.get(b)!);
  const level = new Array<number>(keys.length).fill(0);
  for (const i of topologicalOrder(succ)) {
    for (const s of succ[i]!) level[s] = Math.max(level[s]!, level[i]! + 1);
  }
  return new Map(keys.map((k, i) => [k, level[i]!]));
}

/** One box for several boxes: their tasks, their counts, the most urgent status among them. */
function mergedBox(key: string, members: readonly GraphBox[], urgency: readonly TaskStatus[]): GraphBox {
  const taskIds = members.flatMap((b) => b.taskIds);
  const counts = { ...members[0]!.counts };
  for (const box of members.slice(1))
    for (const s of Object.keys(counts) as TaskStatus[]) counts[s] += box.counts[s];
  const first = taskIds[0]!;
  const last = taskIds[taskIds.length - 1]!;
  return {
    key,
    kind: "group",
    title: taskIds.length === 2 ? `${first}, ${last}` : `${first} … ${last}`,
    caption: `${taskIds.length} tasks`,
    status: urgency.find((s) => counts[s] > 0) ?? "blocked",
    taskIds,
    counts,
  };
}

/**
 * The boxes folded into bands of consecutive levels. Every level is in some band and a box of level
 * l has a need at level l - 1, so band k has an edge from band k - 1: after the reduction of implied
 * edges the picture is a chain of at most `bands` boxes.
 */
function foldIntoBands(graph: RunGraph, bands: number, urgency: readonly TaskStatus[]): RunGraph {
  const level = boxLevels(
    graph.boxes.map((b) => b.key),
    graph.edges,
  );
  const depth = Math.max(0, ...level.values()) + 1;
  const count = Math.min(bands, depth);
  const bandOf = (key: string): number => Math.floor((level.get(key)! * count) / depth);
  const members: GraphBox[][] = Array.from({ length: count }, () => []);
  for (const box of graph.boxes) members[bandOf(box.key)]!.push(box);
  const boxKey = new Map<string, string>();
  const boxes: GraphBox[] = [];
  members.forEach((inBand, k) => {
    if (inBand.length === 0) return;
    const box = inBand.length === 1 ? inBand[0]! : mergedBox(`g:band${k}`, inBand, urgency);
    for (const b of inBand) boxKey.set(b.key, box.key);
    boxes.push(box);
  });
  const seen = new Set<string>();
  const edges: [string, string][] = [];
  for (const [a, b] of graph.edges) {
    const from = boxKey.get(a)!;
    const to = boxKey.get(b)!;
    const key = `${from}\u0000${to}`;
    if (from === to || seen.has(key)) continue;
    seen.add(key);
    edges.push([from, to]);
  }
  return {
    ...graph,
    boxes,
    edges: impliedEdgesLeftOut(
      boxes.map((b) => b.key),
      edges,
    ),
    grouped: boxes.some((b) => b.kind === "group"),
  };
}

/** The graph itself when it fits the budget; else reduced as the module doc says. */
export function fitToBudget(
  graph: RunGraph,
  budget: PictureBudget,
  urgency: readonly TaskStatus[],
): RunGraph {
  if (!overBudget(graph, budget)) return graph;
  if (graph.boxes.length <= budget.maxBoxes) {
    const edges = impliedEdgesLeftOut(
      graph.boxes.map((b) => b.key),
      graph.edges,
    );
    if (edges.length <= budget.maxEdges) return { ...graph, edges, reduction: "implied-edges" };
  }
  return { ...foldIntoBands(graph, budget.bands, urgency), reduction: "bands" };
}
