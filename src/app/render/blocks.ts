/** Reply building blocks several verbs' renderers share: paragraphs, a usage line, a run listing. */
import type { RunProgress } from "../commands/outcome.js";
import type { Rendered } from "./html.js";
import { code, r, userPill } from "./html.js";
import { honestProgress } from "./status-card.js";
import { dateTime, RUN_EMOJI, RUN_WORD } from "./words.js";
import { outcomeLine } from "../../domain/run-counts.js";

export function paragraphs(parts: readonly Rendered[]): Rendered {
  return { body: parts.map((p) => p.body).join("\n"), html: parts.map((p) => `<p>${p.html}</p>`).join("") };
}

/** "Usage: `!dag confirm <id>`": help lines carry their own "usage: " prefix, said here once. */
export function usage(helpLine: string): Rendered {
  const line = helpLine.replace(/^usage:\s*/i, "");
  return line === helpLine && !line.startsWith("!dag") ? code(line) : r`Usage: ${code(line)}`;
}

/** A head line and one line per run: its state, progress, publisher and when. */
export function listing(head: Rendered, runs: readonly RunProgress[]): Rendered {
  return bulleted(
    head,
    runs.map(
      ({ run, summary }) =>
        r`${RUN_EMOJI[run.status]} ${code(run.dagId)} — ${RUN_WORD[run.status]} · ${honestProgress(
          summary,
        )} · by ${userPill(run.publisher)} · ${dateTime(run.createdAt)}`,
    ),
  );
}

/** A head paragraph and a bulleted list. */
export function bulleted(head: Rendered, items: readonly Rendered[]): Rendered {
  return {
    body: [head.body, ...items.map((i) => i.body)].join("\n"),
    html: `<p>${head.html}</p><ul>${items.map((i) => `<li>${i.html}</li>`).join("")}</ul>`,
  };
}

/** Runs as plain lines, one each: its id (the uuid is in the data as runId), status and task counts. */
export function runLines(runs: readonly RunProgress[], none: string): string {
  if (runs.length === 0) return none;
  return runs
    .map(
      ({ run, summary }) =>
        `${run.dagId.padEnd(24)} ${run.status.padEnd(10)} ${outcomeLine(summary.byStatus, summary.total)}`,
    )
    .join("\n");
}
