/**
 * What a run awaiting confirmation will do, for its status card: the DAG's content hash and, per
 * task, its action and arguments. It is what a confirmer approves, so every value is shown exactly
 * (quoted, with control, format and bidi characters written as \u escapes so nothing can hide or
 * reorder text) and only cut where the card has no room, which it then says.
 */
import { shortHash } from "../../domain/command-grammar.js";
import type { ArgValue, ParsedDag, TaskSpec } from "../../domain/model.js";
import type { Rendered } from "./html.js";
import { code, escapeHtml, r } from "./html.js";
import { plural } from "./words.js";

/** Characters of one argument value shown; a longer value is cut and says how long it is. */
export const MAX_SHOWN_ARG_CHARS = 200;
/** Characters of all task lines together: a card must fit one event even when edited. */
const MAX_PLAN_CHARS = 6_000;
/** More task lines than this are folded (a collapsed <details>) in clients that show HTML. */
const FOLD_AFTER_TASKS = 8;

/** A value as the plan shows it: JSON-quoted strings with invisible and control characters escaped. */
export function showValue(value: ArgValue): string {
  if (typeof value !== "string") return String(value);
  const points = Array.from(value);
  const cut = points.length > MAX_SHOWN_ARG_CHARS;
  const shown = cut ? points.slice(0, MAX_SHOWN_ARG_CHARS).join("") : value;
  const quoted = JSON.stringify(shown).replace(
    /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Co}\p{Cn}]/gu,
    (ch) => `\\u{${(ch.codePointAt(0) ?? 0).toString(16)}}`,
  );
  return cut ? `${quoted}… (${points.length} characters, cut)` : quoted;
}

/** `build: make target="all" jobs=4 (after fetch)`: one task, compact. */
export function planLine(task: TaskSpec): string {
  const args = Object.keys(task.args)
    .sort()
    .map((k) => `${k}=${showValue(task.args[k] as ArgValue)}`);
  const needs = task.needs.length > 0 ? ` (after ${task.needs.join(", ")})` : "";
  return `${[`${task.id}: ${task.action}`, ...args].join(" ")}${needs}`;
}

/** The plan block of a pending card: the content hash, then one line per task. */
export function renderPlan(dag: ParsedDag, hash: string): Rendered {
  const lines: string[] = [];
  let used = 0;
  for (const task of dag.tasks) {
    const line = planLine(task);
    if (used + line.length > MAX_PLAN_CHARS && lines.length > 0) break;
    lines.push(line);
    used += line.length;
  }
  const hidden = dag.tasks.length - lines.length;
  const head = r`What runs if confirmed (content hash ${code(shortHash(hash))}):`;
  const tail =
    hidden > 0
      ? `… and ${plural(hidden, "more task")} not shown: read the DAG itself before confirming.`
      : null;
  const items = lines.map((l) => `<li><code>${escapeHtml(l)}</code></li>`).join("");
  const list = `<ul>${items}</ul>${tail === null ? "" : `<p>${escapeHtml(tail)}</p>`}`;
  const html =
    dag.tasks.length > FOLD_AFTER_TASKS
      ? `<p>${head.html}</p><details><summary>${escapeHtml(plural(dag.tasks.length, "task"))}</summary>${list}</details>`
      : `<p>${head.html}</p>${list}`;
  return {
    body: [head.body, ...lines.map((l) => `  ${l}`), ...(tail === null ? [] : [tail])].join("\n"),
    html,
  };
}
