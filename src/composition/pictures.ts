/** The picture renderer every face draws with (Graphviz in WebAssembly, PNG by resvg, in a worker thread). */
import { GraphvizRenderer } from "../adapters/graph/graphviz-renderer.js";
import type { GraphRenderer } from "../ports/graph-renderer.js";

export function createPictureRenderer(): GraphRenderer {
  return new GraphvizRenderer();
}
