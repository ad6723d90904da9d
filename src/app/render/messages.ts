/**
 * Outbox messages (Matrix event content) for replies, status cards, card edits and final messages.
 * Transaction ids are derived from what caused each message, so a retry or a crash re-enqueues the
 * same id and the outbox (insert-or-ignore) and the homeserver (txnId dedup) send it once:
 *   reply.<event_id>              the one reply to a command event, where it was typed
 *   picture.<event_id>            a picture asked for outside its run's thread (render/pictures.ts)
 *   card.<run_id>                 a run's status card (first in the thread of the publish event)
 *   card.<run_id>.<v>.<status>    one edit of that card; v is the sum of its tasks' versions, which
 *                                 rises on every task move, so one state of the run is one edit
 *   final.<run_id>                the message that tells the publisher the run ended, last in its
 *                                 thread (or the answer to the reject or cancel that ended it there)
 * Edits carry `replacesTxnId` and `m.relates_to: { rel_type: "m.replace" }` without an event id:
 * the sender fills in `event_id` with the event it sent under `replacesTxnId`.
 */
import { shownDuration } from "../../domain/duration.js";
import { failureHeadWords } from "../../domain/failure-words.js";
import { lastOutputLine } from "../../domain/last-line.js";
import { outcomeLine } from "../../domain/run-counts.js";
import { summarizeTasks } from "../../domain/run-status.js";
import type { WaitReason } from "../../domain/wait-reasons.js";
import { groupWaits, waitsLine } from "../../domain/wait-reasons.js";
import type { OutboxMessageInput, RunRecord, TaskRecord } from "../../ports/store.js";
import type { Rendered } from "./html.js";
import type { Outcome } from "../commands/outcome.js";
import { selectNoteworthy } from "../commands/outcome.js";
import {
  code,
  escapeHtml,
  isMatrixUserId,
  jsonBytes,
  longestFittingTail,
  MAX_EVENT_CONTENT_BYTES,
  r,
  text,
  userPill,
} from "./html.js";
import { fitLogs } from "../commands/verbs/logs.js";
import type { Placement } from "./notice.js";
import { HTML_FORMAT, noticeContent } from "./notice.js";
import { renderOutcome } from "./reply.js";
import type { RunView } from "./status-card.js";
import { cardEditFallback, renderRunView, renderWords, runView, showsPaused } from "./status-card.js";
import { RUN_EMOJI, RUN_WORD } from "./words.js";

export type { Placement } from "./notice.js";
export { FALLBACK_TXN_KEY, HTML_FORMAT, noticeContent, relatesTo, THREAD_ROOT_TXN_KEY } from "./notice.js";

export const MESSAGE_EVENT_TYPE = "m.room.message";
/** Custom content key that names the run a card shows, for clients, tests and debugging. */
export const CARD_CONTENT_KEY = "org.dagbot.card";

export const replyTxnId = (eventId: string): string => `reply.${eventId}`;
export const cardTxnId = (runId: string): string => `card.${runId}`;
export const finalTxnId = (runId: string): string => `final.${runId}`;

/**
 * The content of a command's reply, fitted to one event: a status view loses task lines until it
 * fits; anything else that is still too large (it should not be) falls back to its plain text, cut.
 */
export function replyContent(outcome: Outcome, placement: Placement): Record<string, unknown> | null {
  let shown = outcome;
  for (;;) {
    const rendered = renderOutcome(shown);
    if (rendered === null) return null;
    const content = noticeContent(rendered, placement);
    if (jsonBytes(content) <= MAX_EVENT_CONTENT_BYTES) return content;
    if (shown.kind === "logs" && shown.output !== null && shown.output !== "") {
      const fitted = fitLogs(shown, placement);
      if (fitted.output !== shown.output) {
        shown = fitted;
        continue;
      }
    }
    if (shown.kind === "status" && shown.tasks.length > 0) {
      shown = { ...shown, tasks: selectNoteworthy(shown.tasks, Math.floor(shown.tasks.length / 2)) };
      continue;
    }
    const body = longestFittingHead(rendered.body);
    return noticeContent({ body, html: `<pre>${escapeHtml(body)}</pre>` }, placement);
  }
}

/** The longest head of a text whose escaped form fits an event twice (body and HTML) with room to spare. */
function longestFittingHead(text: string): string {
  const budget = Math.floor((MAX_EVENT_CONTENT_BYTES - 2_000) / 2);
  const reversed = Array.from(text).reverse().join("");
  const kept = longestFittingTail(reversed, (t) => jsonBytes(escapeHtml(t)) <= budget);
  return `${Array.from(kept).reverse().join("")}\n… (cut to fit one message)`;
}

/** Custom content key of a command's answer: the command (or reaction) event it answers. */
export const ANSWERS_CONTENT_KEY = "org.dagbot.answers";

/**
 * A command's one answer, under `reply.<event id>`, or under `txnId` when the answer is also another
 * message (the final message of a run the command ended, in the run's thread).
 */
export function replyMessage(
  roomId: string,
  commandEventId: string,
  outcome: Outcome,
  placement: Placement,
  txnId: string = replyTxnId(commandEventId),
): OutboxMessageInput | null {
  const content = replyContent(outcome, placement);
  return content === null
    ? null
    : {
        txnId,
        roomId,
        eventType: MESSAGE_EVENT_TYPE,
        content: { ...content, [ANSWERS_CONTENT_KEY]: commandEventId },
      };
}

/**
 * The card's place: the first bot message of the publish's thread, or a plain message for CLI/HTTP
 * runs. Clients without threads show it as a reply to the publish's acknowledgement (one line), not
 * to the publish (the whole DAG).
 */
function cardPlacement(run: RunRecord): Placement {
  return run.publishEventId === null
    ? { kind: "room" }
    : { kind: "thread", root: run.publishEventId, fallbackTxn: replyTxnId(run.publishEventId) };
}

/**
 * A later bot message of a run's thread that answers no command there (the final message, a gate's
 * message, a picture asked for in the main timeline): clients without threads show it as a reply
 * to the card.
 */
export function runThreadPlacement(run: { runId: string; publishEventId: string | null }): Placement {
  // A run without a publish message (webhook, schedule, `after`, CLI, HTTP): its card is the root.
  return run.publishEventId === null
    ? { kind: "card-thread", cardTxn: cardTxnId(run.runId) }
    : { kind: "thread", root: run.publishEventId, fallbackTxn: cardTxnId(run.runId) };
}

/**
 * The view, with fewer task lines if needed, so that even an edit (which carries the card twice,
 * `body` and `m.new_content`) stays within one event.
 */
function fittedCard(view: RunView): Rendered {
  let shown = view;
  for (;;) {
    const rendered = renderRunView(shown);
    const editSize = 2 * jsonBytes(noticeContent(rendered, { kind: "room" }));
    if (editSize <= MAX_EVENT_CONTENT_BYTES - 1_000 || shown.tasks.length === 0) return rendered;
    shown = { ...shown, tasks: selectNoteworthy(shown.tasks, Math.floor(shown.tasks.length / 2)) };
  }
}

export function cardMessage(
  run: RunRecord,
  tasks: readonly TaskRecord[],
  now: number,
  roomCap?: number,
  waits?: ReadonlyMap<string, WaitReason>,
): OutboxMessageInput {
  const rendered = fittedCard(runView(run, tasks, now, roomCap, waits));
  return {
    txnId: cardTxnId(run.runId),
    roomId: run.roomId,
    eventType: MESSAGE_EVENT_TYPE,
    content: noticeContent(rendered, cardPlacement(run), {
      // The hash the card shows: a ✅ on this card confirms that content and no other.
      [CARD_CONTENT_KEY]: { runId: run.runId, dagId: run.dagId, hash: run.hash },
    }),
  };
}

/**
 * The version of a run's state as the card shows it: rises on every task move, marks a paused room,
 * and names (as a short hash) the reasons its tasks wait, which move with other runs and nodes.
 */
export function cardVersion(
  run: RunRecord,
  tasks: readonly TaskRecord[],
  roomCap?: number,
  waits?: ReadonlyMap<string, WaitReason>,
): string {
  const versions = tasks.reduce((sum, t) => sum + t.version, 0);
  const held = waits === undefined ? "" : waitsLine(groupWaits(waits));
  return `${versions}.${run.status}${showsPaused(run.status, roomCap) ? ".paused" : ""}${
    held === "" ? "" : `.w${shortDigest(held)}`
  }`;
}

/** FNV-1a of the text, 8 hex digits: enough to tell one set of wait reasons from the next. */
function shortDigest(value: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < value.length; i++) h = Math.imul(h ^ value.charCodeAt(i), 0x01000193);
  return (h >>> 0).toString(16).padStart(8, "0");
}

export function cardEditMessage(
  run: RunRecord,
  tasks: readonly TaskRecord[],
  now: number,
  roomCap?: number,
  waits?: ReadonlyMap<string, WaitReason>,
): OutboxMessageInput {
  const view = runView(run, tasks, now, roomCap, waits);
  const rendered = fittedCard(view);
  const newContent = noticeContent(rendered, { kind: "room" });
  // Clients without edits show the fallback as a new message: one line, not a second card.
  const fallback = cardEditFallback(view);
  return {
    txnId: `${cardTxnId(run.runId)}.${cardVersion(run, tasks, roomCap, waits)}`,
    roomId: run.roomId,
    eventType: MESSAGE_EVENT_TYPE,
    content: {
      msgtype: "m.notice",
      body: `* ${fallback.body}`,
      format: HTML_FORMAT,
      formatted_body: `* ${fallback.html}`,
      "m.mentions": {},
      "m.new_content": {
        ...newContent,
        [CARD_CONTENT_KEY]: { runId: run.runId, dagId: run.dagId, hash: run.hash },
      },
      "m.relates_to": { rel_type: "m.replace" },
    },
    replacesTxnId: cardTxnId(run.runId),
    coalesceKey: cardTxnId(run.runId),
  };
}

/**
 * The card messages to enqueue for a run's current state: the card itself when it was never
 * enqueued (a run published from the CLI or HTTP), else an edit. `cardExists` comes from
 * `getOutbox(cardTxnId(runId)) !== null`.
 */
export function cardUpdateMessages(
  cardExists: boolean,
  run: RunRecord,
  tasks: readonly TaskRecord[],
  now: number,
): OutboxMessageInput[] {
  return cardExists ? [cardEditMessage(run, tasks, now)] : [cardMessage(run, tasks, now)];
}

/**
 * The one message that tells the publisher their run ended. It starts with the outcome, since that
 * is what a thread summary, a threads list and a notification keep when they cut the line: a failed
 * run names each failed task, why (its exit status and the last line it printed) and what it skipped
 * before anything else. The publisher is mentioned through m.mentions, their pill last. It is an
 * m.text, not a notice: the default push rules silence every m.notice before a mention is looked at,
 * so a notice would never reach the publisher. Everything else the bot says stays a notice, quiet.
 * Without a Matrix publisher (a CLI run) there is nobody to reach: a notice. `endedBy`: who canceled
 * or rejected the run, when a person did.
 */
export function finalMessage(
  run: RunRecord,
  tasks: readonly TaskRecord[],
  endedBy: string | null = null,
): OutboxMessageInput {
  const rendered = finalWords(run, tasks, endedBy);
  const reach = isMatrixUserId(run.publisher);
  const mentions = reach ? { msgtype: "m.text", "m.mentions": { user_ids: [run.publisher] } } : {};
  const withPill = reach ? r`${rendered} cc ${userPill(run.publisher)}` : rendered;
  // The thread's last word: its summary under the publish then says how the run ended (§4 step 5).
  const placement: Placement = runThreadPlacement(run);
  return {
    txnId: finalTxnId(run.runId),
    roomId: run.roomId,
    eventType: MESSAGE_EVENT_TYPE,
    content: noticeContent(withPill, placement, mentions),
  };
}

/**
 * How a run ended, outcome first: `❌ \`deploy\` failed — \`migrate\`: exit 1, ERROR: … · \`smoke\`
 * skipped · 1/3 succeeded in 3s. See …`, `✅ \`deploy\` succeeded in 7s — 5/5 succeeded.`
 */
export function finalWords(
  run: RunRecord,
  tasks: readonly TaskRecord[],
  endedBy: string | null = null,
): Rendered {
  const summary = summarizeTasks(tasks.map((t) => t.status));
  const started = tasks.map((t) => t.startedAt).filter((t): t is number => t !== null);
  const finished = tasks.map((t) => t.finishedAt).filter((t): t is number => t !== null);
  const took =
    started.length > 0 && finished.length > 0
      ? shownDuration(Math.max(...finished) - Math.min(...started))
      : null;
  const failedTask = tasks.find((t) => t.status === "failed" || t.status === "timed_out");
  const title = r`${RUN_EMOJI[run.status]} ${code(run.dagId)} ${RUN_WORD[run.status]}`;
  if (run.dag.registered === true && run.status === "succeeded")
    return r`${RUN_EMOJI[run.status]} ${code(run.dagId)} registered without running: its schedule, after and webhooks start its runs.`;
  if (run.status === "failed" && failedTask !== undefined) {
    // The failures in words (domain/failure-words.ts), then the rest of the counts, then where to look.
    const ended = tasks.map((t) => ({ ...t, lastLine: lastLineOf(t) }));
    const rest = outcomeLine({ ...summary.byStatus, failed: 0, timed_out: 0, skipped: 0 }, summary.total);
    return r`${title} — ${renderWords(failureHeadWords(ended))} · ${rest}${
      took === null ? "" : ` in ${took}`
    }. See ${code(`!dag logs ${run.dagId} ${failedTask.taskId}`)}; ${code(`!dag retry ${run.dagId}`)} runs the rest again.`;
  }
  // The same honest counts as the card: what succeeded over the total, then what else happened.
  const by = endedBy === null ? text("") : r` by ${userPill(endedBy)}`;
  return r`${title}${by}${took === null ? "" : ` in ${took}`} — ${outcomeLine(summary.byStatus, summary.total)}.`;
}

/** The last line a failed task printed (masked where it ran), for the words that say why. */
export function lastLineOf(task: Pick<TaskRecord, "status" | "output">): string | null {
  return task.status === "failed" || task.status === "timed_out" ? lastOutputLine(task.output) : null;
}
