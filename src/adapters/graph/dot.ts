/**
 * A RunGraph as Graphviz DOT: left to right, one box per task or group, filled with its state's
 * colour, a title with the run and its counts, and a legend of the states that occur.
 */
import type { TaskStatus } from "../../domain/model.js";
import type { GraphBox, RunGraph } from "../../domain/run-graph.js";
import type { GridLayout } from "./grid-layout.js";
import { placeBoxes } from "./grid-layout.js";

/** The bundled font (assets/fonts); Graphviz has width metrics for it, resvg draws it. */
export const FONT = "DejaVu Sans";
/**
 * A box's title (the task's id) and its smaller lines, in points. 14 pt keeps a title 11 px tall or
 * more in a picture shown 400 px wide whose layout is up to about 500 pt wide (grid-layout.ts).
 */
export const LABEL_PT = 14;
export const SMALL_PT = 10;
/** The blank line between a box's lines of text (stacked). */
export const LINE_GAP_PT = 2;

export interface StateStyle {
  word: string;
  fill: string;
  border: string;
  text: string;
}

/**
 * Failures are saturated fills with white text so they stand out from a field of pale greens;
 * waiting and skipped are outlines, pending work is pale, done work is calm.
 */
export const STATE_STYLE: Readonly<Record<TaskStatus, StateStyle>> = {
  blocked: { word: "waiting", fill: "#f5f5f5", border: "#9e9e9e", text: "#424242" },
  queued: { word: "queued", fill: "#fff3c4", border: "#c79a00", text: "#3e2f00" },
  running: { word: "running", fill: "#bbdefb", border: "#1565c0", text: "#0d2b52" },
  canceling: { word: "canceling", fill: "#ffe0b2", border: "#e65100", text: "#4e2000" },
  succeeded: { word: "succeeded", fill: "#c8e6c9", border: "#2e7d32", text: "#1b3d1d" },
  failed: { word: "failed", fill: "#c62828", border: "#7f0000", text: "#ffffff" },
  timed_out: { word: "timed out", fill: "#d84315", border: "#7f1d00", text: "#ffffff" },
  canceled: { word: "canceled", fill: "#cfd8dc", border: "#546e7a", text: "#263238" },
  skipped: { word: "skipped", fill: "#ffffff", border: "#9e9e9e", text: "#757575" },
};

const ALARM: ReadonlySet<TaskStatus> = new Set<TaskStatus>(["failed", "timed_out"]);
const NOT_RUN: ReadonlySet<TaskStatus> = new Set<TaskStatus>(["failed", "timed_out", "canceled", "skipped"]);

/** Escapes text for a Graphviz HTML-like label. */
function html(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

/** A quoted DOT id or attribute value. */
function q(text: string): string {
  return `"${text.replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"`;
}

/** The SVG element id of a task's box: tests and tools find a task's box by it. */
export function svgIdOfBox(box: GraphBox): string {
  return box.kind === "task" ? `task-${box.taskIds[0]}` : `group-${box.key.slice(2)}`;
}

/**
 * A box's lines, one under the other. Graphviz puts a line's baseline about one font size under
 * the one before, so an underscore ("unit_tests") touched the tall letters of the line under it and
 * read as a stroke through them: a blank line of 2 pt between the lines gives each its font's ascent
 * and descent and 1 pt more (test/adapters/graph-picture-geometry.test.ts).
 */
function stacked(lines: readonly string[]): string {
  return `<${lines.join(`<br/><font point-size="${LINE_GAP_PT}"> </font><br/>`)}>`;
}

function boxLines(box: GraphBox): string {
  const style = STATE_STYLE[box.status];
  const small = (text: string, size = SMALL_PT) => `<font point-size="${size}">${text}</font>`;
  if (box.kind === "task") {
    // The action and the state on lines of their own: a box is as narrow as its longest word, so
    // more boxes fit across a thumbnail (grid-layout.ts).
    return stacked([
      `<b>${html(box.title)}</b>`,
      small(html(box.caption)),
      ...(box.when === undefined ? [] : [small(`when ${box.when}`)]),
      small(style.word),
      ...(box.wait === undefined ? [] : [small(`waits: ${html(box.wait)}`, 9)]),
    ]);
  }
  const parts = (Object.keys(box.counts) as TaskStatus[])
    .filter((s) => box.counts[s] > 0)
    .map((s) => `${box.counts[s]} ${STATE_STYLE[s].word}`);
  return stacked([`<b>${html(box.caption)}</b>`, small(html(box.title)), small(html(parts.join(" · ")))]);
}

function boxAttributes(box: GraphBox): string {
  const style = STATE_STYLE[box.status];
  const attrs: string[] = [`id=${q(svgIdOfBox(box))}`, `label=${boxLines(box)}`];
  const alarm = ALARM.has(box.status);
  attrs.push(`color=${q(style.border)}`, `fontcolor=${q(style.text)}`, `penwidth=${alarm ? 3 : 1.2}`);
  if (box.kind === "task") {
    attrs.push(`fillcolor=${q(style.fill)}`);
    const dashed = box.status === "skipped" || box.status === "blocked";
    // An approval gate is a hexagon: a decision by people, not a program that runs.
    if (box.gate === true) attrs.push(`shape=hexagon`, `style=${q(dashed ? "filled,dashed" : "filled")}`);
    else attrs.push(`style=${q(dashed ? "rounded,filled,dashed" : "rounded,filled")}`);
  } else {
    // A group's stripes show the share of each state among its members; a double border says "many".
    const total = box.taskIds.length;
    const stripes = (Object.keys(box.counts) as TaskStatus[])
      .filter((s) => box.counts[s] > 0)
      .map((s) => `${STATE_STYLE[s].fill};${(box.counts[s] / total).toFixed(3)}`);
    // One state needs no stripes (Graphviz would still draw a stripe's edge through the text).
    const fillStyle = stripes.length === 1 ? `"filled"` : `"striped"`;
    const fill = stripes.length === 1 ? STATE_STYLE[box.status].fill : stripes.join(":");
    attrs.push(`fillcolor=${q(fill)}`, `style=${fillStyle}`, `peripheries=2`);
    // Text over stripes: the darkest readable choice, whatever the mix.
    attrs.push(`fontcolor="#212121"`);
  }
  return attrs.join(", ");
}

function titleLabel(graph: RunGraph): string {
  const legend = graph.legend
    .map((s) => {
      const style = STATE_STYLE[s];
      return `<td bgcolor="${style.fill}" color="${style.border}" border="1" cellpadding="3"><font color="${style.text}" point-size="10">${html(style.word)}</font></td>`;
    })
    .join("");
  const notes = [
    graph.grouped ? "double boxes group several tasks; their stripes show the share of each state" : null,
    graph.reduction === "implied-edges"
      ? "too many needs to draw: an arrow that a longer path already implies is left out"
      : null,
    graph.reduction === "bands"
      ? "too large to draw task by task: each box holds a band of consecutive levels"
      : null,
  ].filter((n): n is string => n !== null);
  const note = notes
    .map(
      (n) =>
        `<tr><td align="left" colspan="1"><font point-size="9" color="#616161">${html(n)}</font></td></tr>`,
    )
    .join("");
  return (
    `<<table border="0" cellspacing="0" cellpadding="2">` +
    `<tr><td align="left"><font point-size="15"><b>${html(graph.title)}</b></font></td></tr>` +
    `<tr><td align="left"><font point-size="12">${html(graph.counts)}</font></td></tr>` +
    (graph.waits === undefined
      ? ""
      : `<tr><td align="left"><font point-size="11">${html(graph.waits)}</font></td></tr>`) +
    `<tr><td align="left"><table border="0" cellspacing="4" cellpadding="0"><tr>${legend}</tr></table></td></tr>` +
    note +
    `</table>>`
  );
}

/**
 * The graph as DOT, its boxes on the grid `layout` says (grid-layout.ts): each band a borderless
 * cluster, stacked under the one before; a tall level wrapped into columns by invisible edges.
 */
export function toDot(graph: RunGraph, layout: GridLayout = { perColumn: null, perBand: null }): string {
  const status = new Map(graph.boxes.map((b) => [b.key, b.status]));
  const conditional = new Set(graph.boxes.filter((b) => b.when !== undefined).map((b) => b.key));
  const place = placeBoxes(graph, layout);
  const bandOf = (key: string): number => place.get(key)?.band ?? 0;
  const bands = Math.max(0, ...[...place.values()].map((p) => p.band)) + 1;
  const lines = [
    "digraph run {",
    `  graph [rankdir=LR, bgcolor="white", pad=0.2, nodesep=0.18, ranksep=0.3, fontname=${q(FONT)}, labelloc=t, labeljust=l, label=${titleLabel(graph)}];`,
    // Little margin above and below a box's text: the gaps between its lines (stacked) keep a box
    // about as tall as before, so a picture keeps its thumbnail shape (grid-layout.ts).
    `  node [shape=box, fontname=${q(FONT)}, fontsize=${LABEL_PT}, margin="0.1,0.02"];`,
    `  edge [color="#78909c", arrowsize=0.6];`,
  ];
  for (let band = 0; band < bands; band++) {
    const inside = graph.boxes.filter((b) => bandOf(b.key) === band);
    const indent = bands > 1 ? "    " : "  ";
    if (bands > 1)
      lines.push(`  subgraph ${q(`cluster_band${band}`)} {`, `    graph [style=invis, label=""];`);
    for (const box of inside) lines.push(`${indent}${q(box.key)} [${boxAttributes(box)}];`);
    if (bands > 1) lines.push("  }");
  }
  for (const [from, to] of graph.edges) {
    // What did not run because of a failure: a dashed red edge into it, to follow the damage.
    const broken = NOT_RUN.has(status.get(from) ?? "blocked") && status.get(to) === "skipped";
    const attrs = broken ? [`color="#c62828"`, "style=dashed"] : [];
    // Into a task with a run condition (run-when.ts): dotted, it runs by how its needs ended.
    if (!broken && conditional.has(to)) attrs.push("style=dotted");
    // An edge into the next band goes back to its first column: it must not rank its target.
    if (bandOf(from) !== bandOf(to)) attrs.push("constraint=false");
    lines.push(`  ${q(from)} -> ${q(to)}${attrs.length > 0 ? ` [${attrs.join(", ")}]` : ""};`);
  }
  // A level wrapped into columns: each box of a column after its level's first goes one rank right
  // of the column before it (an invisible edge from that column's first box).
  const byColumn = new Map<number, string[]>();
  for (const box of graph.boxes) {
    const c = place.get(box.key)!.column;
    byColumn.set(c, [...(byColumn.get(c) ?? []), box.key]);
  }
  for (const [column, keys] of byColumn) {
    const before = byColumn.get(column - 1)?.[0];
    if (before === undefined) continue;
    const same = (key: string) =>
      place.get(key)!.level === place.get(before)!.level && bandOf(key) === bandOf(before);
    for (const key of keys) if (same(key)) lines.push(`  ${q(before)} -> ${q(key)} [style=invis];`);
  }
  lines.push("}");
  return lines.join("\n");
}
