/**
 * The geometry of a laid-out run picture, read from Graphviz's JSON output (`-Tjson`, the same
 * layout the renderer draws as SVG): each box as a rectangle, each drawn edge as points sampled
 * along its Bézier curve, and each text line's baseline. Coordinates in points, y upwards.
 */
import { instance } from "@viz-js/viz";

export interface Rect {
  name: string;
  x0: number;
  y0: number;
  x1: number;
  y1: number;
}

export interface LayoutJson {
  objects?: {
    _gvid: number;
    name: string;
    pos?: string;
    width?: string;
    height?: string;
    style?: string;
    _ldraw_?: { op: string; size?: number; pt?: [number, number]; text?: string }[];
  }[];
  edges?: { tail: number; head: number; pos?: string; style?: string }[];
}

/** `dot` laid out by the Graphviz the renderer uses (@viz-js/viz), as JSON. */
export async function layoutOf(dot: string): Promise<LayoutJson> {
  const viz = await instance();
  return JSON.parse(viz.renderString(dot, { format: "json", engine: "dot" })) as LayoutJson;
}

/** Points along a Graphviz spline (`pos` of an edge): 16 samples per cubic piece, arrow tips left out. */
function splinePoints(pos: string): [number, number][] {
  const points: [number, number][] = [];
  for (const spline of pos.split(";")) {
    const c = spline
      .trim()
      .split(/\s+/)
      .filter((t) => !t.startsWith("e,") && !t.startsWith("s,"))
      .map((t) => t.split(",").map(Number) as [number, number]);
    for (let i = 0; i + 3 < c.length; i += 3) {
      const [p0, p1, p2, p3] = [c[i]!, c[i + 1]!, c[i + 2]!, c[i + 3]!];
      for (let s = 0; s <= 16; s++) {
        const t = s / 16;
        const u = 1 - t;
        const k = [u * u * u, 3 * u * u * t, 3 * u * t * t, t * t * t] as const;
        points.push([
          k[0] * p0[0] + k[1] * p1[0] + k[2] * p2[0] + k[3] * p3[0],
          k[0] * p0[1] + k[1] * p1[1] + k[2] * p2[1] + k[3] * p3[1],
        ]);
      }
    }
  }
  return points;
}

/**
 * Every drawn edge that passes more than `margin` points inside a box other than its own two ends,
 * as "tail -> head through box".
 */
export function edgesThroughBoxes(layout: LayoutJson, margin = 2): string[] {
  const boxes = new Map<number, Rect>();
  for (const o of layout.objects ?? []) {
    if (o.pos === undefined || o.width === undefined || o.height === undefined) continue;
    if ((o.style ?? "").includes("invis")) continue;
    const [x, y] = o.pos.split(",").map(Number) as [number, number];
    const w = (Number(o.width) * 72) / 2 - margin;
    const h = (Number(o.height) * 72) / 2 - margin;
    boxes.set(o._gvid, { name: o.name, x0: x - w, y0: y - h, x1: x + w, y1: y + h });
  }
  const name = (id: number) => layout.objects?.find((o) => o._gvid === id)?.name ?? String(id);
  const found: string[] = [];
  for (const edge of layout.edges ?? []) {
    if (edge.pos === undefined || (edge.style ?? "").includes("invis")) continue;
    const points = splinePoints(edge.pos);
    for (const [id, r] of boxes) {
      if (id === edge.tail || id === edge.head) continue;
      if (points.some(([x, y]) => x > r.x0 && x < r.x1 && y > r.y0 && y < r.y1))
        found.push(`${name(edge.tail)} -> ${name(edge.head)} through ${r.name}`);
    }
  }
  return found;
}
