/**
 * The status card of a run (docs/architecture.md §4 step 5): one message per run, edited in place as tasks
 * move. `!dag status <id>` renders the same view as a reply. Pure: the time is passed in.
 */
import { isMarkWords } from "../../domain/task-mark.js";
import { appliedDag } from "../../domain/params.js";
import { isTerminalRun } from "../../domain/run-states.js";
import { exitWords } from "../../domain/exit-status.js";
import { shownDuration } from "../../domain/duration.js";
import { fitList } from "../../domain/name-list.js";
import type { TaskSummary } from "../../domain/run-status.js";
import type { TaskStatus } from "../../domain/model.js";
import { TASK_STATUSES } from "../../domain/model.js";
import { outcomeLine, percentOf } from "../../domain/run-counts.js";
import { summarizeTasks } from "../../domain/run-status.js";
import { shortHash } from "../../domain/command-grammar.js";
import type { ParsedDag } from "../../domain/model.js";
import type { RunRecord, TaskRecord } from "../../ports/store.js";
import type { WaitReason, WaitWord } from "../../domain/wait-reasons.js";
import { groupWaits, waitWords } from "../../domain/wait-reasons.js";
import type { MatrixGroupLine, RunSummary, TaskLine } from "../commands/outcome.js";
import { groupCounts, matrixGroups } from "../../domain/matrix.js";
import { selectTaskLines, summarizeRun } from "../commands/outcome.js";
import type { Rendered } from "./html.js";
import { renderPlan } from "./dag-plan.js";
import { code, join, link, r, text, userPill } from "./html.js";
import {
  clockTime,
  dateTime,
  plural,
  progressBar,
  RUN_EMOJI,
  RUN_WORD,
  TASK_EMOJI,
  TASK_WORD,
} from "./words.js";

/** More task lines than this make a card nobody reads and risk the event size limit. */
export const MAX_CARD_TASK_LINES = 60;

export interface RunView {
  run: RunSummary;
  summary: TaskSummary;
  /** The lines to show (at most MAX_CARD_TASK_LINES); summary counts every task. */
  tasks: TaskLine[];
  /** When the view was taken: running durations and the confirmation countdown count from it. */
  at: number;
  /** The room's cap on active tasks when known; 0 means the room is paused. */
  roomCap?: number;
  /** While the run awaits confirmation: what it will run, so the confirmer sees what they approve. */
  plan?: { dag: ParsedDag; hash: string } | undefined;
  /** Its matrix tasks with their instances' counts (every task counted, as summary). */
  groups?: MatrixGroupLine[];
}

export function runView(
  run: RunRecord,
  tasks: readonly TaskRecord[],
  now: number,
  roomCap?: number,
  waits?: ReadonlyMap<string, WaitReason>,
): RunView {
  const groups = matrixGroups(tasks).map((g) => ({ task: g.task, summary: g.summary }));
  return {
    run: summarizeRun(run),
    summary: summarizeTasks(tasks.map((t) => t.status)),
    tasks: selectTaskLines(tasks, MAX_CARD_TASK_LINES, waits),
    at: now,
    ...(roomCap === undefined ? {} : { roomCap }),
    plan: run.status === "pending" ? { dag: appliedDag(run.dag), hash: run.hash } : undefined,
    ...(groups.length > 0 ? { groups } : {}),
  };
}

export function renderStatusCard(
  run: RunRecord,
  tasks: readonly TaskRecord[],
  now: number,
  roomCap?: number,
  waits?: ReadonlyMap<string, WaitReason>,
): Rendered {
  return renderRunView(runView(run, tasks, now, roomCap, waits));
}

/** Whether a run's view should say the room is paused: its cap is 0 and the run still has tasks to start. */
export function showsPaused(status: RunRecord["status"], roomCap: number | undefined): boolean {
  return roomCap === 0 && (status === "pending" || status === "running");
}

/** `asCard`: the card itself (react to "this message"); false for a `!dag status` reply. */
export function renderRunView(view: RunView, asCard = true): Rendered {
  const { run, summary } = view;
  const title = r`${RUN_EMOJI[run.status]} ${code(run.dagId)} — ${RUN_WORD[run.status]}`;
  const parts: Rendered[] = [];
  if (run.description !== null && run.description !== "") parts.push(text(run.description));
  if (run.registered === true)
    parts.push(
      text(
        run.status === "succeeded"
          ? "Registered without running: no task ran; its schedule, after and webhooks start its runs."
          : "Publishes the DAG without running it: once confirmed, no task runs now; its schedule, after and webhooks start its runs.",
      ),
    );
  else parts.push(progressLine(summary));
  parts.push(...(view.groups ?? []).map(groupLine));
  if (showsPaused(run.status, view.roomCap)) {
    parts.push(r`Room paused: its cap is 0, so no task starts until ${code("!dag cap <n>")} raises it.`);
  }
  if (run.status === "pending") parts.push(confirmHint(run, view.at, asCard));
  if (asCard) parts.push(...waitLines(view));
  const plan =
    run.status === "pending" && view.plan !== undefined ? [renderPlan(view.plan.dag, view.plan.hash)] : [];

  // A card shows each task that needs eyes and folds the others into one line per state; a
  // `!dag status` reply (asked for) shows every task line.
  // An operator's mark is shown on its own line too: the run's outcome rests on it (task-mark.ts).
  const eyes = asCard
    ? view.tasks.filter((t) => NEEDS_EYES.has(t.status) || isMarkWords(t.status, t.error))
    : view.tasks;
  // Awaiting confirmation, the plan lists every task already: no second list of them waiting.
  const folded = asCard && plan.length === 0 ? foldedLines(view) : [];
  const taskLines = [...eyes.map((t) => renderTaskLine(t, view.at)), ...folded];
  const shownCount = asCard
    ? TASK_STATUSES.filter((s) => !NEEDS_EYES.has(s)).reduce(
        (n, s) => n + summary.byStatus[s],
        eyes.filter((t) => NEEDS_EYES.has(t.status)).length,
      )
    : view.tasks.length;
  const hidden = summary.total - shownCount;
  const footer = r`${startedBy(run)}${
    run.confirmedBy !== null && run.confirmedBy !== run.publisher
      ? r` · confirmed by ${userPill(run.confirmedBy)}`
      : ""
  } · as of ${clockTime(view.at)}`;

  const hiddenNote = hidden > 0 ? [text(`… and ${plural(hidden, "more task")} (counted above)`)] : [];
  return {
    body: [
      title.body,
      ...parts.map((p) => p.body),
      ...plan.map((p) => p.body),
      ...taskLines.map((l) => l.body),
      ...hiddenNote.map((h) => h.body),
      footer.body,
    ].join("\n"),
    html:
      `<p><b>${title.html}</b></p>` +
      parts.map((p) => `<p>${p.html}</p>`).join("") +
      plan.map((p) => p.html).join("") +
      (taskLines.length > 0 ? `<ul>${taskLines.map((l) => `<li>${l.html}</li>`).join("")}</ul>` : "") +
      hiddenNote.map((h) => `<p>${h.html}</p>`).join("") +
      `<p><sub>${footer.html}</sub></p>`,
  };
}

/**
 * `` `deploy` × 6: 4 ✅ 1 ❌ 1 🔄 ``: a matrix task as one line, its instances counted by state
 * (domain/matrix.ts); the instances themselves are task lines like any other.
 */
export function groupLine(group: MatrixGroupLine): Rendered {
  const counts = groupCounts(group.summary.byStatus).map(([s, n]) => `${n} ${TASK_EMOJI[s]}`);
  return r`${code(group.task)} × ${String(group.summary.total)}: ${counts.join(" ")}`;
}

/** Task states a card lists one line each; the others fold into one line per state. */
const NEEDS_EYES: ReadonlySet<TaskStatus> = new Set<TaskStatus>([
  "running",
  "canceling",
  "failed",
  "timed_out",
]);
/** The order of the folded lines: what ended first, then what has yet to start. */
const FOLDED: readonly TaskStatus[] = ["succeeded", "canceled", "skipped", "queued", "blocked"];
/** Characters of the names on one of a card's summary lines (a folded state, a wait reason). */
const CARD_NAME_CHARS = 40;

/**
 * `✅ 14 succeeded: a, b, c, d and 10 more`: one line per state that does not need eyes, naming
 * as many as fit one line (domain/name-list.ts: "and 1 more" never replaces a name). An ended run's
 * card is its record and is not edited again, so it names every task it lists (the card's
 * MAX_CARD_TASK_LINES, failed and canceled first: outcome.ts selectNoteworthy).
 */
function foldedLines(view: RunView): Rendered[] {
  const budget = isTerminalRun(view.run.status) ? Infinity : CARD_NAME_CHARS;
  return FOLDED.filter((s) => view.summary.byStatus[s] > 0).map((s) => {
    const n = view.summary.byStatus[s];
    const known = view.tasks.filter((t) => t.status === s).map((t) => t.taskId);
    const { shown, more } = fitList(known, n, (id) => id.length + 2, budget);
    return r`${TASK_EMOJI[s]} ${String(n)} ${TASK_WORD[s]}: ${join(
      shown.map((id) => code(id)),
      ", ",
    )}${more > 0 ? text(` and ${more} more`) : text("")}`;
  });
}

/** The one line a client without edits shows for a card's edit: the title and the counts. */
export function cardEditFallback(view: RunView): Rendered {
  const { run } = view;
  return r`${RUN_EMOJI[run.status]} ${code(run.dagId)} — ${RUN_WORD[run.status]} · ${progressLine(view.summary)}`;
}

/**
 * `▰▰▰▰▱▱▱▱▱▱ 2/5 succeeded · 1 failed · 2 skipped`: the bar and the first count are what
 * succeeded, so a run with a failed, skipped or canceled task never shows a full bar.
 */
export function progressLine(summary: TaskSummary): Rendered {
  return text(honestProgress(summary));
}

export function honestProgress(summary: TaskSummary): string {
  const ok = summary.byStatus.succeeded;
  return `${progressBar(percentOf(ok, summary.total))} ${outcomeLine(summary.byStatus, summary.total)}`;
}

function confirmHint(run: RunSummary, at: number, asCard: boolean): Rendered {
  // A time, not a countdown: the card is not edited while it waits, and a countdown would freeze.
  const expires =
    run.confirmDeadline === null
      ? ""
      : ` It expires at ${
          run.confirmDeadline - at < 20 * 3_600_000
            ? clockTime(run.confirmDeadline)
            : dateTime(run.confirmDeadline)
        }.`;
  const where = asCard ? "to this message" : "on its status card";
  const confirm = run.hash === undefined ? run.dagId : `${run.dagId} ${shortHash(run.hash)}`;
  return r`Awaiting confirmation: send ${code(`!dag confirm ${confirm}`)} or react ✅ ${where} to start it, ${code(
    `!dag reject ${run.dagId}`,
  )} or ❌ to drop it.${expires}`;
}

/** Said on the card already: its confirmation hint and its paused-room line. */
const CARD_SAYS: ReadonlySet<WaitReason["kind"]> = new Set(["confirmation", "paused", "needs"]);

/**
 * `⏳ 2 tasks wait (\`a\`, \`b\`): no live node offers action \`deploy\``: one line per reason that
 * holds tasks of the run back, most tasks first (domain/wait-reasons.ts groupWaits).
 */
export function waitLines(view: Pick<RunView, "tasks">): Rendered[] {
  const byTask = new Map<string, WaitReason>();
  for (const t of view.tasks)
    if (t.wait !== undefined && !CARD_SAYS.has(t.wait.kind)) byTask.set(t.taskId, t.wait);
  return groupWaits(byTask).map((g) => {
    const reason = byTask.get(g.taskIds[0] ?? "");
    const n = g.taskIds.length;
    const fitted = fitList(g.taskIds, n, (id) => id.length + 2, CARD_NAME_CHARS);
    const names = fitted.shown.map((id) => code(id));
    const more = fitted.more > 0 ? text(` and ${fitted.more} more`) : text("");
    return r`⏳ ${n === 1 ? "1 task waits" : `${n} tasks wait`} (${join(names, ", ")}${more}): ${
      reason === undefined ? "" : renderWait(reason)
    }`;
  });
}

/** A reason's words with its names as code. */
export function renderWait(reason: WaitReason): Rendered {
  return renderWords(waitWords(reason));
}

/** Words with names apart (domain/wait-reasons.ts, domain/failure-words.ts), the names as code. */
export function renderWords(words: readonly WaitWord[]): Rendered {
  return join(words.map((w) => (typeof w === "string" ? text(w) : code(w.code))));
}

export function renderTaskLine(task: TaskLine, at: number): Rendered {
  const parts: Rendered[] = [text(TASK_WORD[task.status])];
  if (task.wait !== undefined) parts.push(renderWait(task.wait));
  if (task.node !== null) parts.push(r`on ${code(task.node)}`);
  // Attempts are news only where there are retries: "attempt 1/1" says nothing.
  if (task.maxAttempts > 1 || task.attempt > 1) {
    if (task.startedAt !== null || task.attempt > 1)
      parts.push(text(`attempt ${task.attempt}/${task.maxAttempts}`));
  }
  const took = duration(task, at);
  if (took !== null) parts.push(text(took));
  if (task.decided !== undefined) parts.push(text(task.decided));
  else if (task.status !== "succeeded") {
    for (const words of exitWords(task.exitCode, task.error)) parts.push(text(words));
    if (task.lastLine !== undefined) parts.push(text(task.lastLine));
  }
  return r`${TASK_EMOJI[task.status]} ${code(task.taskId)} — ${join(parts, " · ")}`;
}

/** How long it took, or has been running: not shown under a second (domain/duration.ts shownDuration). */
function duration(task: TaskLine, at: number): string | null {
  if (task.startedAt === null) return null;
  if (task.finishedAt !== null) return shownDuration(task.finishedAt - task.startedAt);
  if (task.status === "running" || task.status === "canceling") {
    const took = shownDuration(at - task.startedAt);
    return took === null ? null : `for ${took}`;
  }
  return null;
}

/** Who started the run: its publisher, or the webhook delivery (hook, delivery id, the payload's link). */
function startedBy(run: RunSummary): Rendered {
  const hook = run.hook;
  if (hook === undefined) return r`Published by ${userPill(run.publisher)}`;
  const where = hook.link === undefined ? text("") : r`, ${link(hook.link)}`;
  return r`Started by webhook ${code(hook.id)} (delivery ${code(hook.delivery)}${where})`;
}
