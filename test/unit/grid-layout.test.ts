import { describe, expect, it } from "vitest";
import {
  bestFit,
  fitScore,
  layoutCandidates,
  MAX_BOXES_FOR_CANDIDATES,
  placeBoxes,
} from "../../src/adapters/graph/grid-layout.js";
import { toDot } from "../../src/adapters/graph/dot.js";
import { buildRunGraph, type GraphTaskInput } from "../../src/domain/run-graph.js";

const graphOf = (tasks: GraphTaskInput[]) =>
  buildRunGraph({ dagId: "d", runLabel: "12345678", runStatusWord: "running", tasks });
/** A chain no grouping shortens: every task running. */
const chainOf = (n: number) =>
  graphOf(
    Array.from({ length: n }, (_, i) => ({
      id: `s${i}`,
      action: "echo",
      needs: i === 0 ? [] : [`s${i - 1}`],
      status: "running" as const,
    })),
  );
/** One level of n tasks, each needing the root, none grouped (running). */
const wide = (n: number) =>
  graphOf([
    { id: "root", action: "x", needs: [], status: "succeeded" },
    ...Array.from({ length: n }, (_, i) => ({
      id: `w${i}`,
      action: "x",
      needs: ["root"],
      status: "running" as const,
    })),
  ]);

describe("the picture's grid layout", () => {
  it("wraps a chain's columns into bands, in order, the arrow into a band not ranking its target", () => {
    const graph = chainOf(10);
    const placed = placeBoxes(graph, { perColumn: null, perBand: 4 });
    expect(graph.boxes.map((b) => placed.get(b.key)!.band)).toEqual([0, 0, 0, 0, 1, 1, 1, 1, 2, 2]);
    expect(graph.boxes.map((b) => placed.get(b.key)!.column)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    const dot = toDot(graph, { perColumn: null, perBand: 4 });
    expect(dot.match(/subgraph "cluster_band\d"/g)).toHaveLength(3);
    expect(dot).toContain(`"t:s3" -> "t:s4" [constraint=false];`);
    expect(dot).toContain(`"t:s4" -> "t:s5";`);
    // The plain layout is the one row it always was: no clusters, no extra edges.
    const plain = toDot(graph);
    expect(plain).not.toContain("cluster");
    expect(plain).not.toContain("constraint=false");
  });

  it("wraps a tall level into columns with invisible edges, one rank each", () => {
    const graph = wide(6);
    const placed = placeBoxes(graph, { perColumn: 3, perBand: null });
    expect(graph.boxes.map((b) => placed.get(b.key)!.column)).toEqual([0, 1, 1, 1, 2, 2, 2]);
    expect(graph.boxes.map((b) => placed.get(b.key)!.level)).toEqual([0, 1, 1, 1, 1, 1, 1]);
    const dot = toDot(graph, { perColumn: 3, perBand: null });
    expect(dot.match(/\[style=invis\]/g)).toHaveLength(3);
    expect(dot).toContain(`"t:w0" -> "t:w3" [style=invis];`);
  });

  it("offers the plain layout first, wrapped ones after, and only the plain one for a large graph", () => {
    const few = layoutCandidates(chainOf(10));
    expect(few[0]).toEqual({ perColumn: null, perBand: null });
    expect(few).toContainEqual({ perColumn: null, perBand: 4 });
    expect(layoutCandidates(wide(8))).toContainEqual({ perColumn: 4, perBand: null });
    expect(layoutCandidates(chainOf(MAX_BOXES_FOR_CANDIDATES + 1))).toEqual([
      { perColumn: null, perBand: null },
    ]);
  });

  it("keeps the layout shown largest in a 400 × 300 thumbnail, the plainer one unless 10% better", () => {
    // A row of 2000 × 280 is shown at 0.2 and, wider than 16:9, counts for less; 800 × 600 at 0.5.
    expect(fitScore(800, 600)).toBe(0.5);
    expect(fitScore(2000, 280)).toBeCloseTo(0.2 * (16 / 9 / (2000 / 280)), 6);
    expect(
      bestFit([
        { width: 2000, height: 280 },
        { width: 800, height: 600 },
      ]),
    ).toBe(1);
    expect(
      bestFit([
        { width: 800, height: 600 },
        { width: 790, height: 590 },
      ]),
    ).toBe(0);
    expect(
      bestFit([
        { width: 800, height: 600 },
        { width: 700, height: 520 },
      ]),
    ).toBe(1);
  });
});
