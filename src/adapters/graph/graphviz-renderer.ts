/**
 * The graph renderer adapter: DOT (dot.ts) → SVG by Graphviz compiled to WebAssembly (@viz-js/viz),
 * → PNG by resvg (@resvg/resvg-js, a prebuilt binary inside its npm package), with the bundled
 * DejaVu Sans so text never depends on the machine's fonts. No browser.
 *
 * Layout and rasterising run in one worker thread, so a 1,000-task DAG never stalls the node's
 * command handling; a render that takes longer than `timeoutMs` terminates the worker (the next
 * render starts a fresh one) and at most `maxPending` renders wait.
 */
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";
import type { RunGraph } from "../../domain/run-graph.js";
import type { GraphRenderer, Picture, PictureFormat } from "../../ports/graph-renderer.js";
import { RenderError } from "../../ports/graph-renderer.js";
import { FONT, toDot } from "./dot.js";
import { bestFit, fitScore, layoutCandidates } from "./grid-layout.js";
import { packageFile } from "../../package-files.js";

const FONT_FILES = ["DejaVuSans.ttf", "DejaVuSans-Bold.ttf"].map((f) => packageFile(`assets/fonts/${f}`));

/** Pictures beyond these bounds are scaled down: no chat client shows more, and memory stays bounded. */
export const MAX_SIDE_PX = 8000;
export const MAX_PIXELS = 24_000_000;
/** Small pictures are drawn at twice their size so text stays sharp on high-density screens. */
export const ZOOM = 2;
/**
 * Bytes a layout's input and a picture may have. The picture budget of the domain
 * (graph-budget.ts: 200 boxes, 400 edges, ids of 64 characters) keeps a DOT text under about
 * 200 KiB; these are the last stop for what it did not foresee, refused with a clear message.
 */
export const MAX_DOT_BYTES = 512 * 1024;
export const MAX_PICTURE_BYTES = 8 * 1024 * 1024;

export interface GraphvizRendererOptions {
  /** A render that takes longer is abandoned with RenderError("timeout"). Default 30 s. */
  timeoutMs?: number;
  /** Renders allowed to wait behind the current one. Default 4. */
  maxPending?: number;
}

interface Job {
  resolve: (picture: Picture) => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout;
}

interface WorkerReply {
  id: number;
  error?: string;
  data?: Uint8Array;
  width?: number;
  height?: number;
}

// The worker is CommonJS evaluated from this string, so it runs the same under the TypeScript
// sources (tests) and under dist/; the package paths come resolved from here.
const WORKER_SOURCE = `
const { parentPort, workerData } = require("node:worker_threads");
const { Resvg } = require(workerData.resvgPath);
const ready = require(workerData.vizPath).instance();
function svgSize(svg) {
  const m = /<svg width="([\\d.]+)pt" height="([\\d.]+)pt"/.exec(svg);
  return m ? [Number(m[1]) * 4 / 3, Number(m[2]) * 4 / 3] : [0, 0];
}
// Which candidate layout to keep: grid-layout.ts's own functions, from their source.
const fitScore = ${fitScore.toString()};
const bestFit = ${bestFit.toString()};
parentPort.on("message", async (job) => {
  try {
    const viz = await ready;
    const drawn = job.dots.map((dot) => viz.renderString(dot, { format: "svg", engine: "dot" }));
    const sizes = drawn.map((d) => {
      const [width, height] = svgSize(d);
      return { width, height };
    });
    const svg = drawn[bestFit(sizes)];
    if (svg.length > job.maxBytes) throw new Error("the SVG is larger than " + job.maxBytes + " bytes");
    const [w, h] = svgSize(svg);
    if (job.format === "svg") {
      const data = Buffer.from(svg, "utf8");
      parentPort.postMessage({ id: job.id, data, width: Math.ceil(w), height: Math.ceil(h) });
      return;
    }
    const zoom = Math.min(job.zoom, job.maxSide / Math.max(w, h, 1), Math.sqrt(job.maxPixels / Math.max(w * h, 1)));
    const resvg = new Resvg(svg, {
      fitTo: { mode: "zoom", value: zoom },
      background: "white",
      font: { loadSystemFonts: false, fontFiles: job.fontFiles, defaultFontFamily: job.font, sansSerifFamily: job.font },
    });
    const image = resvg.render();
    const png = image.asPng();
    if (png.byteLength > job.maxBytes) throw new Error("the PNG is larger than " + job.maxBytes + " bytes");
    parentPort.postMessage({ id: job.id, data: png, width: image.width, height: image.height });
  } catch (err) {
    parentPort.postMessage({ id: job.id, error: err instanceof Error ? err.message : String(err) });
  }
});
`;

export class GraphvizRenderer implements GraphRenderer {
  private worker: Worker | null = null;
  private readonly jobs = new Map<number, Job>();
  private nextId = 1;
  private readonly timeoutMs: number;
  private readonly maxPending: number;

  constructor(options: GraphvizRendererOptions = {}) {
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.maxPending = options.maxPending ?? 4;
  }

  render(graph: RunGraph, format: PictureFormat): Promise<Picture> {
    if (this.jobs.size > this.maxPending) {
      return Promise.reject(
        new RenderError("busy", `${this.jobs.size} pictures are being drawn already; try again shortly`),
      );
    }
    // Without its font resvg draws no text at all: refuse rather than post a picture without words.
    const missing = FONT_FILES.find((f) => !existsSync(f));
    if (missing !== undefined) {
      return Promise.reject(
        new RenderError("failed", `the font file ${missing} is missing (a broken install)`),
      );
    }
    // Each candidate layout (grid-layout.ts) is drawn; the one that reads best as a thumbnail is kept.
    const dots = layoutCandidates(graph).map((layout) => toDot(graph, layout));
    const dot = dots[0]!;
    if (Buffer.byteLength(dot, "utf8") > MAX_DOT_BYTES) {
      return Promise.reject(
        new RenderError(
          "too-large",
          `its layout would take more than ${MAX_DOT_BYTES / 1024} KiB to describe`,
        ),
      );
    }
    const worker = this.ensureWorker();
    const id = this.nextId++;
    return new Promise<Picture>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.fail(
          new RenderError("timeout", `drawing the picture took longer than ${this.timeoutMs / 1000}s`),
        );
      }, this.timeoutMs);
      this.jobs.set(id, {
        timer,
        reject,
        resolve: (picture) => resolve(picture),
      });
      worker.postMessage({
        id,
        dots,
        format,
        zoom: ZOOM,
        maxSide: MAX_SIDE_PX,
        maxPixels: MAX_PIXELS,
        maxBytes: MAX_PICTURE_BYTES,
        font: FONT,
        fontFiles: FONT_FILES,
      });
      // Keep the process alive while a picture is being drawn, not while the worker idles.
      worker.ref();
    }).then((picture) => ({
      ...picture,
      format,
      mimetype: format === "png" ? "image/png" : "image/svg+xml",
    }));
  }

  async close(): Promise<void> {
    const worker = this.worker;
    this.worker = null;
    for (const job of this.jobs.values()) {
      clearTimeout(job.timer);
      job.reject(new RenderError("failed", "the renderer was closed"));
    }
    this.jobs.clear();
    if (worker !== null) await worker.terminate();
  }

  private ensureWorker(): Worker {
    if (this.worker !== null) return this.worker;
    const require = createRequire(import.meta.url);
    const worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: { vizPath: require.resolve("@viz-js/viz"), resvgPath: require.resolve("@resvg/resvg-js") },
    });
    worker.on("message", (reply: WorkerReply) => this.settle(reply));
    worker.on("error", (err) => this.fail(new RenderError("failed", `the renderer stopped: ${err.message}`)));
    worker.on("exit", () => {
      if (this.worker === worker) this.worker = null;
    });
    // An idle renderer must not keep a CLI process alive.
    worker.unref();
    this.worker = worker;
    return worker;
  }

  private settle(reply: WorkerReply): void {
    const job = this.jobs.get(reply.id);
    if (job === undefined) return;
    this.jobs.delete(reply.id);
    clearTimeout(job.timer);
    if (this.jobs.size === 0) this.worker?.unref();
    if (reply.error !== undefined || reply.data === undefined) {
      job.reject(new RenderError("failed", `Graphviz could not draw the run: ${reply.error ?? "no output"}`));
      return;
    }
    const data = new Uint8Array(reply.data.buffer, reply.data.byteOffset, reply.data.byteLength);
    job.resolve({
      format: "png",
      mimetype: "image/png",
      data,
      width: reply.width ?? 0,
      height: reply.height ?? 0,
    });
  }

  /** Gives up on every waiting render and the worker with them; the next render starts afresh. */
  private fail(err: RenderError): void {
    const worker = this.worker;
    this.worker = null;
    for (const job of this.jobs.values()) {
      clearTimeout(job.timer);
      job.reject(err);
    }
    this.jobs.clear();
    if (worker !== null) void worker.terminate();
  }
}
