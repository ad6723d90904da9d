/**
 * Shapes a run's picture for a chat timeline's thumbnail (docs/chat.md, "Pictures of a run"): a client
 * shows it about 400 px wide and 300 px high, so a long chain or a deep DAG drawn in one left-to-right
 * row (3000 × 400 px) shrinks its labels to a few pixels. The boxes are laid out on a grid instead:
 * the plan levels go left to right as columns, a level taller than `perColumn` boxes is wrapped
 * into several columns, and the columns are wrapped into bands of `perBand`, stacked top to bottom
 * (a snake: the arrow from a band's last column to the next band's first goes back to the left).
 * Pure: dot.ts writes a layout as DOT, and the renderer draws each candidate and keeps the one
 * that fits the thumbnail best (fitScore).
 */
import type { RunGraph } from "../../domain/run-graph.js";
import { levelsOf } from "../../domain/run-graph.js";

export interface GridLayout {
  /** At most this many boxes of one level in a column; null: a level is one column. */
  perColumn: number | null;
  /** At most this many columns in a band; null: one band. */
  perBand: number | null;
}

/** Where each box goes: its column (left to right, across bands) and its band (top to bottom). */
export interface GridPlacement {
  /** Its plan level among the boxes: a level may fill several columns. */
  level: number;
  column: number;
  band: number;
}

/** Above this many boxes only the plain layout is drawn: each candidate costs a layout. */
export const MAX_BOXES_FOR_CANDIDATES = 60;

/**
 * How well a picture of `width` × `height` reads as a thumbnail: the scale it is shown at in the
 * box a chat client gives it (Element: about 400 × 300 CSS pixels), less for a picture wider than
 * 16:9, which leaves the box's height empty. The renderer's worker runs this function's own source
 * (graphviz-renderer.ts), so it uses nothing from outside itself.
 */
export function fitScore(width: number, height: number): number {
  const scale = Math.min(400 / Math.max(width, 1), 300 / Math.max(height, 1));
  const aspect = width / Math.max(height, 1);
  return aspect > 16 / 9 ? (scale * (16 / 9)) / aspect : scale;
}

/**
 * The index of the best of the sizes: the largest fitScore, an earlier one (a plainer layout) unless
 * a later one is 10% better: a wrapped layout's arrows back to the left cost some clarity, worth it
 * for a long row shown at half the size (a 200-shard fan-out gains 8% by wrapping and stays as it
 * is). Run by the renderer's worker from its source, like fitScore.
 */
export function bestFit(sizes: readonly { width: number; height: number }[]): number {
  let best = 0;
  for (let i = 1; i < sizes.length; i++) {
    if (fitScore(sizes[i]!.width, sizes[i]!.height) > 1.1 * fitScore(sizes[best]!.width, sizes[best]!.height))
      best = i;
  }
  return best;
}

/** The plan level of each box among the boxes (run-graph.ts levelsOf), by key. */
function boxLevels(graph: RunGraph): Map<string, number> {
  const index = new Map(graph.boxes.map((b, i) => [b.key, i]));
  const needs: number[][] = graph.boxes.map(() => []);
  for (const [from, to] of graph.edges) needs[index.get(to)!]!.push(index.get(from)!);
  const levels = levelsOf(needs);
  return new Map(graph.boxes.map((b, i) => [b.key, levels[i]!]));
}

/** Each box's column and band under `layout`. */
export function placeBoxes(graph: RunGraph, layout: GridLayout): Map<string, GridPlacement> {
  const levels = boxLevels(graph);
  const byLevel: string[][] = [];
  for (const b of graph.boxes) (byLevel[levels.get(b.key)!] ??= []).push(b.key);
  const placed = new Map<string, GridPlacement>();
  let column = 0;
  byLevel.forEach((keys, level) => {
    const per = layout.perColumn ?? keys.length;
    keys.forEach((key, i) => {
      const c = column + Math.floor(i / per);
      const band = layout.perBand === null ? 0 : Math.floor(c / layout.perBand);
      placed.set(key, { level, column: c, band });
    });
    column += Math.ceil(keys.length / per);
  });
  return placed;
}

/**
 * The layouts worth drawing for this graph, the plain one (one row of levels) first: levels wrapped
 * into 2–4 columns when one is tall, columns wrapped into 2–5 bands when there are many.
 */
export function layoutCandidates(graph: RunGraph): GridLayout[] {
  const plain: GridLayout = { perColumn: null, perBand: null };
  if (graph.boxes.length > MAX_BOXES_FOR_CANDIDATES || graph.boxes.length < 2) return [plain];
  const levels = boxLevels(graph);
  const sizes = new Map<number, number>();
  for (const l of levels.values()) sizes.set(l, (sizes.get(l) ?? 0) + 1);
  const tallest = Math.max(...sizes.values());
  const perColumns = new Set<number | null>([null]);
  for (const split of [2, 3, 4]) if (tallest >= 2 * split) perColumns.add(Math.ceil(tallest / split));
  const out: GridLayout[] = [];
  const seen = new Set<string>();
  for (const perColumn of perColumns) {
    let columns = 0;
    for (const n of sizes.values()) columns += Math.ceil(n / (perColumn ?? n));
    for (let bands = 1; bands <= 5 && bands <= columns; bands++) {
      const perBand = bands === 1 ? null : Math.ceil(columns / bands);
      const key = `${perColumn}/${perBand}`;
      if (seen.has(key)) continue;
      seen.add(key);
      out.push({ perColumn, perBand });
    }
  }
  return out;
}
