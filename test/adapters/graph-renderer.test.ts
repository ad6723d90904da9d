// The Graphviz + resvg renderer: one box per task in its state's colour (read back from the SVG),
// PNGs that decode to their stated size with the state colours and real glyphs in them, a
// 1,000-task DAG, and rendering off the event loop with a bound in time.
import { describe, expect, it, afterAll } from "vitest";
import { GraphvizRenderer } from "../../src/adapters/graph/graphviz-renderer.js";
import { LABEL_PT, STATE_STYLE } from "../../src/adapters/graph/dot.js";
import type { TaskStatus } from "../../src/domain/model.js";
import { TASK_STATUSES } from "../../src/domain/model.js";
import type { GraphTaskInput } from "../../src/domain/run-graph.js";
import { buildRunGraph } from "../../src/domain/run-graph.js";
import { RenderError } from "../../src/ports/graph-renderer.js";
import { PICTURE_BUDGET } from "../../src/domain/graph-budget.js";
import { chain, complete, layered } from "../support/graph-shapes.js";
import { countColour, countDark, decodePng } from "../support/png.js";

const renderer = new GraphvizRenderer();
afterAll(() => renderer.close());

const graphOf = (tasks: GraphTaskInput[]) =>
  buildRunGraph({ dagId: "release", runLabel: "3f2a9c1d", runStatusWord: "failed", tasks });

/** One task in every state, in a diamond-ish shape. */
const everyState: GraphTaskInput[] = TASK_STATUSES.map((status, i) => ({
  id: `task_${status}`,
  action: "echo",
  needs: i === 0 ? [] : [`task_${TASK_STATUSES[Math.floor((i - 1) / 2)]}`],
  status,
}));

/** SVG element id → the fill of its first shape. */
function nodeFills(svg: string): Map<string, string> {
  const fills = new Map<string, string>();
  const re = /<g id="([^"]+)" class="node">\s*<title>[^<]*<\/title>\s*<(?:path|polygon) fill="([^"]+)"/g;
  for (const m of svg.matchAll(re)) fills.set(m[1]!.replace(/&#45;/g, "-"), m[2]!);
  return fills;
}

describe("GraphvizRenderer", () => {
  it("draws one box per task, filled with its state's colour", async () => {
    const picture = await renderer.render(graphOf(everyState), "svg");
    expect(picture.mimetype).toBe("image/svg+xml");
    const svg = Buffer.from(picture.data).toString("utf8");
    const fills = nodeFills(svg);
    expect(fills.size).toBe(everyState.length);
    for (const task of everyState) {
      expect(fills.get(`task-${task.id}`), task.id).toBe(STATE_STYLE[task.status].fill);
    }
    // The legend names every state that occurs.
    for (const s of TASK_STATUSES) expect(svg).toContain(`>${STATE_STYLE[s].word}<`);
    expect(svg).toContain("1/9 succeeded · 1 failed · 1 timed out · 1 canceled · 1 skipped");
  });

  it("writes a PNG that decodes to its stated size, with the failure's red in it", async () => {
    const picture = await renderer.render(graphOf(everyState), "png");
    expect(picture.mimetype).toBe("image/png");
    const png = decodePng(picture.data);
    expect([png.width, png.height]).toEqual([picture.width, picture.height]);
    expect(png.width).toBeGreaterThan(300);
    for (const s of ["failed", "succeeded", "running"] as TaskStatus[]) {
      expect(countColour(png, STATE_STYLE[s].fill), s).toBeGreaterThan(500);
    }
  });

  it("draws glyphs from the bundled font, not boxes or nothing", async () => {
    const one = (id: string) => graphOf([{ id, action: "x", needs: [], status: "blocked" }]);
    const wide = decodePng((await renderer.render(one("WWWWWWWWWWWW"), "png")).data);
    const narrow = decodePng((await renderer.render(one("iiiiiiiiiiii"), "png")).data);
    // Same title, legend and border; only the label's ink differs. Missing glyph boxes or a missing
    // font would give both labels the same ink.
    const wideInk = countDark(wide, 110);
    const narrowInk = countDark(narrow, 110);
    expect(wideInk - narrowInk).toBeGreaterThan(300);
  });

  it("renders a 1,000-task DAG, leaving the event loop free while it draws", async () => {
    // layered() defeats fan-out and chain grouping: the largest picture a 1,000-task DAG makes.
    const tasks = layered(1000, 50);
    let ticks = 0;
    const timer = setInterval(() => ticks++, 5);
    let picture;
    try {
      picture = await renderer.render(graphOf(tasks), "png");
    } finally {
      clearInterval(timer);
    }
    // A render on this thread would run from start to end without letting a single tick through.
    expect(ticks).toBeGreaterThan(0);
    const png = decodePng(picture.data);
    expect([png.width, png.height]).toEqual([picture.width, picture.height]);
    expect(countColour(png, STATE_STYLE.failed.fill)).toBeGreaterThan(500);
  });

  it("draws a 141-task DAG with 9,870 needs within the picture budget", async () => {
    const picture = await renderer.render(graphOf(complete(141)), "svg");
    const svg = Buffer.from(picture.data).toString("utf8");
    const boxes = svg.match(/class="node"/g)?.length ?? 0;
    const edges = svg.match(/class="edge"/g)?.length ?? 0;
    expect(boxes).toBeGreaterThan(0);
    expect(boxes).toBeLessThanOrEqual(PICTURE_BUDGET.maxBoxes);
    expect(edges).toBeLessThanOrEqual(PICTURE_BUDGET.maxEdges);
    expect(svg).toContain("a longer path already implies");
  });

  it("gives up on a render that takes longer than its bound, and draws again afterwards", async () => {
    const hasty = new GraphvizRenderer({ timeoutMs: 1 });
    try {
      const err = await hasty.render(graphOf(chain(10)), "png").catch((e: unknown) => e);
      expect(err).toBeInstanceOf(RenderError);
      expect((err as RenderError).reason).toBe("timeout");
    } finally {
      await hasty.close();
    }
    const again = await renderer.render(graphOf(chain(10)), "png");
    expect(decodePng(again.data).width).toBe(again.width);
  });

  describe("shaped for a chat timeline's thumbnail", () => {
    /** A chain no grouping shortens: every task needs eyes (running or failed). */
    const eyesChain: GraphTaskInput[] = Array.from({ length: 10 }, (_, i) => ({
      id: `step_${i}`,
      action: "echo",
      needs: i === 0 ? [] : [`step_${i - 1}`],
      status: i % 2 === 0 ? "running" : "failed",
    }));
    const independent: GraphTaskInput[] = Array.from({ length: 20 }, (_, i) => ({
      id: `task_${i}`,
      action: "echo",
      needs: [],
      status: (["succeeded", "running", "failed", "blocked"] as const)[i % 4]!,
    }));
    /** The three-task run the room's structure test draws: one row, about 2.5:1, before. */
    const three: GraphTaskInput[] = [
      { id: "fetch", action: "echo", needs: [], status: "succeeded" },
      { id: "build", action: "true", needs: ["fetch"], status: "succeeded" },
      { id: "test", action: "true", needs: ["build"], status: "running" },
    ];
    const shapes: [string, GraphTaskInput[]][] = [
      ["a chain of 10 no grouping shortens", eyesChain],
      ["a chain of 10 (grouped)", chain(10)],
      ["20 independent tasks", independent],
      ["a 5 × 5 layered DAG", layered(25, 5)],
      ["a chain of 3", three],
    ];

    it.each(shapes)(
      "%s: between 1:1 and 16:9, its task ids 11 px tall or more at 400 px wide",
      async (_, tasks) => {
        const graph = graphOf(tasks);
        const png = await renderer.render(graph, "png");
        const decoded = decodePng(png.data);
        expect([decoded.width, decoded.height]).toEqual([png.width, png.height]);
        const aspect = png.width / png.height;
        expect(aspect).toBeGreaterThanOrEqual(1);
        expect(aspect).toBeLessThanOrEqual(16 / 9);
        // The same layout as SVG gives the picture's size in CSS pixels at scale 1 (1 pt = 4/3 px).
        const svg = await renderer.render(graph, "svg");
        expect(svg.width / svg.height).toBeCloseTo(aspect, 1);
        const labelPx = ((LABEL_PT * 4) / 3) * (400 / svg.width);
        expect(labelPx).toBeGreaterThanOrEqual(11);
      },
    );

    it("wraps a long chain into rows: after a row's last task the next starts under its first", async () => {
      const svg = Buffer.from((await renderer.render(graphOf(eyesChain), "svg")).data).toString("utf8");
      const at = (id: string): [number, number] => {
        const m = new RegExp(
          `<g id="task&#45;${id}" class="node">[\\s\\S]*?<text[^>]* x="([\\d.-]+)" y="([\\d.-]+)"`,
        ).exec(svg);
        if (m === null) throw new Error(`no box ${id} in the SVG`);
        return [Number(m[1]), Number(m[2])];
      };
      const points = eyesChain.map((t) => at(t.id));
      // The first step back to the left: the row's length.
      const wrap = points.findIndex(([x], i) => i > 0 && x < points[i - 1]![0]);
      expect(wrap).toBeGreaterThan(1);
      expect(wrap).toBeLessThan(eyesChain.length);
      for (let i = 1; i < wrap; i++) {
        expect(points[i]![1]).toBeCloseTo(points[0]![1], 0);
        expect(points[i]![0]).toBeGreaterThan(points[i - 1]![0]);
      }
      expect(points[wrap]![0]).toBeCloseTo(points[0]![0], 0);
      expect(points[wrap]![1]).toBeGreaterThan(points[0]![1]);
      // Every arrow of the chain is still drawn: 9 visible edges.
      expect(svg.match(/class="edge"/g)?.length).toBe(9);
    });
  });
});
