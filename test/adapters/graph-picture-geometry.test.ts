// The run picture's geometry, read from the layout Graphviz makes of the renderer's own DOT (every
// candidate layout, grid-layout.ts, since the renderer may keep any of them): no arrow is drawn
// through a box other than its own two ends, and a box's lines of text do not touch one another.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { toDot } from "../../src/adapters/graph/dot.js";
import { layoutCandidates } from "../../src/adapters/graph/grid-layout.js";
import { TASK_STATUSES } from "../../src/domain/model.js";
import { buildRunGraph, type GraphTaskInput } from "../../src/domain/run-graph.js";
import { chain, fanOut, layered } from "../support/graph-shapes.js";
import { edgesThroughBoxes, layoutOf } from "../support/picture-geometry.js";

/** The release picture of docs/chat.md (scripts/draw-examples.mjs). */
const release: GraphTaskInput[] = [
  { id: "checkout", action: "git_fetch", needs: [], status: "succeeded" },
  { id: "build", action: "make", needs: ["checkout"], status: "succeeded" },
  { id: "lint", action: "lint", needs: ["checkout"], status: "succeeded" },
  { id: "unit_tests", action: "npm_test", needs: ["build"], status: "failed" },
  { id: "e2e_tests", action: "npm_test", needs: ["build"], status: "succeeded" },
  { id: "package", action: "tar", needs: ["unit_tests", "e2e_tests", "lint"], status: "skipped" },
  { id: "deploy", action: "deploy", needs: ["package"], status: "skipped" },
  { id: "notify", action: "notify", needs: ["deploy"], status: "skipped" },
];
/** A chain of 10 no grouping shortens: every task running or failed. */
const eyesChain: GraphTaskInput[] = Array.from({ length: 10 }, (_, i) => ({
  id: `step_${i}`,
  action: "echo",
  needs: i === 0 ? [] : [`step_${i - 1}`],
  status: i % 2 === 0 ? "running" : "failed",
}));
/** Four diamonds in a row: fork → left, right → join → the next fork; one side failed. */
const diamonds: GraphTaskInput[] = [0, 1, 2, 3].flatMap((d) => [
  { id: `fork_${d}`, action: "split", needs: d === 0 ? [] : [`join_${d - 1}`], status: "running" as const },
  { id: `left_${d}`, action: "left", needs: [`fork_${d}`], status: "failed" as const },
  { id: `right_${d}`, action: "right", needs: [`fork_${d}`], status: "running" as const },
  { id: `join_${d}`, action: "join", needs: [`left_${d}`, `right_${d}`], status: "running" as const },
]);
/** One task in every state, one with a reason to wait: every kind of text line a box has. */
const everyState: GraphTaskInput[] = TASK_STATUSES.map((status, i) => ({
  id: `task_${status}`,
  action: "npm_test",
  needs: i === 0 ? [] : [`task_${TASK_STATUSES[Math.floor((i - 1) / 2)]}`],
  status,
  ...(status === "blocked" ? { wait: "approval_gate" } : {}),
}));

const shapes: [string, GraphTaskInput[]][] = [
  ["docs/chat.md's release run", release],
  ["docs/chat.md's 200-shard fan-out", fanOut(200, ["succeeded", "running", "queued", "failed"])],
  ["docs/chat.md's 1,000-step chain", chain(1000)],
  ["a chain of 10 no grouping shortens", eyesChain],
  ["a chain of 10 (grouped)", chain(10)],
  ["a 5 × 5 layered DAG", layered(25, 5)],
  ["four diamonds in a row", diamonds],
  ["a fan-out of 12", fanOut(12, ["succeeded", "running", "failed"])],
  ["one task in every state", everyState],
];

const graphOf = (tasks: GraphTaskInput[]) =>
  buildRunGraph({ dagId: "release", runLabel: "3f2a9c1d", runStatusWord: "failed", tasks });

/** The bundled font's typographic ascent and descent (OS/2 table), as a share of its size. */
function fontMetrics(file: string): { ascent: number; descent: number } {
  const b = readFileSync(new URL(`../../assets/fonts/${file}`, import.meta.url));
  const tables = new Map<string, number>();
  for (let i = 0; i < b.readUInt16BE(4); i++)
    tables.set(b.toString("latin1", 12 + 16 * i, 16 + 16 * i), b.readUInt32BE(20 + 16 * i));
  const em = b.readUInt16BE(tables.get("head")! + 18);
  const os2 = tables.get("OS/2")!;
  return { ascent: b.readInt16BE(os2 + 68) / em, descent: -b.readInt16BE(os2 + 70) / em };
}
const metrics = ["DejaVuSans.ttf", "DejaVuSans-Bold.ttf"].map(fontMetrics);
const ASCENT = Math.max(...metrics.map((m) => m.ascent));
const DESCENT = Math.max(...metrics.map((m) => m.descent));

describe("the run picture's geometry", () => {
  it("finds an arrow drawn through a box (the check itself)", () => {
    const box = (id: number, name: string, x: number) => ({
      _gvid: id,
      name,
      pos: `${x},50`,
      width: "1",
      height: "0.5",
    });
    const layout = {
      objects: [box(0, "a", 0), box(1, "b", 100), box(2, "c", 200)],
      // a → c straight across b; a → b and b → c only touch their own ends.
      edges: [
        { tail: 0, head: 2, pos: "e,164,50 36,50 80,50 120,50 164,50" },
        { tail: 0, head: 1, pos: "e,64,50 36,50 45,50 55,50 64,50" },
        { tail: 1, head: 2, pos: "e,164,50 136,50 145,50 155,50 164,50" },
        { tail: 0, head: 2, style: "invis", pos: "e,164,50 36,50 80,50 120,50 164,50" },
      ],
    };
    expect(edgesThroughBoxes(layout)).toEqual(["a -> c through b"]);
  });

  it.each(shapes)(
    "%s: in every candidate layout no arrow passes through a box other than its two ends",
    async (_, tasks) => {
      const graph = graphOf(tasks);
      for (const layout of layoutCandidates(graph)) {
        const through = edgesThroughBoxes(await layoutOf(toDot(graph, layout)));
        expect({ layout, through }).toEqual({ layout, through: [] });
      }
    },
    30_000,
  );
  it.each(shapes)(
    "%s: a box's lines of text clear one another by 1 pt (an underscore does not touch the line below)",
    async (_, tasks) => {
      const graph = graphOf(tasks);
      const layout = await layoutOf(toDot(graph));
      const crowded: string[] = [];
      for (const box of layout.objects ?? []) {
        // Each line's baseline and its largest font size; Graphviz writes a font (F) before its texts (T).
        const lines = new Map<number, number>();
        let size = 14;
        for (const op of box._ldraw_ ?? []) {
          if (op.op === "F") size = op.size!;
          if (op.op === "T" && op.text!.trim() !== "")
            lines.set(op.pt![1], Math.max(lines.get(op.pt![1]) ?? 0, size));
        }
        const ys = [...lines.keys()].sort((a, b) => b - a);
        for (let i = 1; i < ys.length; i++) {
          const [upper, lower] = [lines.get(ys[i - 1]!)!, lines.get(ys[i]!)!];
          const room = ys[i - 1]! - ys[i]!;
          const needed = DESCENT * upper + ASCENT * lower + 1;
          if (room < needed) crowded.push(`${box.name}: ${room.toFixed(1)} pt < ${needed.toFixed(1)} pt`);
        }
      }
      expect(crowded).toEqual([]);
    },
  );
});
