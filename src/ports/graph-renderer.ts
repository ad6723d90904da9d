/** The graph renderer port: draws a RunGraph (src/domain/run-graph.ts) as a PNG or SVG picture. */
import type { RunGraph } from "../domain/run-graph.js";

export type PictureFormat = "png" | "svg";

export interface Picture {
  format: PictureFormat;
  mimetype: "image/png" | "image/svg+xml";
  data: Uint8Array;
  /** Pixels (an SVG's size at 96 dpi). */
  width: number;
  height: number;
}

/**
 * Why a picture could not be drawn: too slow (the renderer gave up), too many waiting, over the
 * renderer's byte limits, or the renderer failed.
 */
export class RenderError extends Error {
  override readonly name = "RenderError";
  constructor(
    readonly reason: "timeout" | "busy" | "too-large" | "failed",
    message: string,
  ) {
    super(message);
  }
}

/**
 * Renders off the caller's event loop (or bounded in time), so a large DAG never stalls command
 * handling. Rejects with RenderError.
 */
export interface GraphRenderer {
  render(graph: RunGraph, format: PictureFormat): Promise<Picture>;
  close(): Promise<void>;
}
