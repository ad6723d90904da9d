/**
 * Pure builders of Matrix event content for the bot's messages: m.notice with plain and HTML bodies,
 * edits, thread replies and reactions, plus HTML escaping and a guard that keeps content under the
 * event size limit.
 */
import { escapeHtml } from "../../domain/escape-html.js";
import type { EventId, OutgoingMessage, UserId } from "../../ports/chat.js";

export const HTML_FORMAT = "org.matrix.custom.html";

/**
 * Synapse refuses events over 65 536 bytes of canonical JSON (413 M_TOO_LARGE), counting hashes,
 * signatures and prev/auth event ids the server adds; 60 000 bytes of content leaves room for them.
 */
export const MAX_CONTENT_BYTES = 60_000;

export const TRUNCATION_MARKER_TEXT = "\n… (truncated)";
export const TRUNCATION_MARKER_HTML = "<br><em>… (truncated)</em>";

export type Content = Record<string, unknown>;

export { escapeHtml };

/** A pill that clients render as the user's name and that links to their profile. */
export function mentionHtml(userId: UserId, label: string = userId): string {
  return `<a href="https://matrix.to/#/${encodeURIComponent(userId)}">${escapeHtml(label)}</a>`;
}

/** Preformatted text, e.g. a task's output tail. */
export function codeBlockHtml(text: string): string {
  return `<pre><code>${escapeHtml(text)}</code></pre>`;
}

/** Bytes of the content as the homeserver receives it (UTF-8 JSON). */
export function contentBytes(content: unknown): number {
  return Buffer.byteLength(JSON.stringify(content), "utf8");
}

/** Cuts text to at most maxChars UTF-16 units without splitting a surrogate pair. */
function cutText(text: string, maxChars: number): string {
  if (text.length <= maxChars) return text;
  let end = Math.max(0, maxChars);
  const last = text.charCodeAt(end - 1);
  if (end > 0 && last >= 0xd800 && last <= 0xdbff) end -= 1;
  return text.slice(0, end);
}

export function truncateText(text: string, maxChars: number): string {
  if (text.length <= maxChars) return text;
  return cutText(text, maxChars - TRUNCATION_MARKER_TEXT.length) + TRUNCATION_MARKER_TEXT;
}

const VOID_ELEMENTS = new Set(["br", "hr", "img", "wbr", "col", "area", "base", "embed", "source", "track"]);

/**
 * Cuts HTML near maxChars at a point outside any tag or entity, closes the elements still open
 * there, and appends the marker. Meant for the bot's own well-formed HTML; the result may run a
 * little over maxChars by the closing tags, which fitToSize's loop absorbs.
 */
export function truncateHtml(html: string, maxChars: number): string {
  if (html.length <= maxChars) return html;
  const budget = maxChars - TRUNCATION_MARKER_HTML.length;
  const open: string[] = [];
  let i = 0;
  while (i < html.length) {
    let next: number;
    const ch = html[i];
    if (ch === "<") {
      const close = html.indexOf(">", i);
      if (close < 0) break;
      next = close + 1;
      if (next > budget) break;
      const tag = /^<(\/?)([a-zA-Z][a-zA-Z0-9-]*)/.exec(html.slice(i, next));
      if (tag?.[2]) {
        const name = tag[2].toLowerCase();
        if (tag[1]) {
          const at = open.lastIndexOf(name);
          if (at >= 0) open.length = at;
        } else if (!VOID_ELEMENTS.has(name) && !html.slice(i, next).endsWith("/>")) {
          open.push(name);
        }
      }
    } else if (ch === "&") {
      const semi = html.indexOf(";", i);
      next = semi > i && semi - i <= 10 ? semi + 1 : i + 1;
      if (next > budget) break;
    } else {
      const code = html.charCodeAt(i);
      next = code >= 0xd800 && code <= 0xdbff ? i + 2 : i + 1;
      if (next > budget) break;
    }
    i = next;
  }
  const closing = open
    .reverse()
    .map((name) => `</${name}>`)
    .join("");
  return html.slice(0, i) + closing + TRUNCATION_MARKER_HTML;
}

/**
 * Builds content from a text and an HTML body and, when it is over maxBytes of JSON, shrinks both
 * bodies (with a visible marker) until it fits. `build` decides the shape (notice, edit, ...), so
 * an edit, which carries the text twice, is measured as a whole.
 */
export function fitToSize(
  text: string,
  html: string,
  build: (text: string, html: string) => Content,
  maxBytes: number = MAX_CONTENT_BYTES,
): { content: Content; truncated: boolean } {
  let content = build(text, html);
  let size = contentBytes(content);
  if (size <= maxBytes) return { content, truncated: false };
  let textLen = text.length;
  let htmlLen = html.length;
  for (let round = 0; round < 30; round++) {
    // Shrink in proportion to the overshoot, a little more than needed, so this converges in a few rounds.
    const ratio = (maxBytes / size) * 0.97;
    textLen = Math.floor(textLen * ratio);
    htmlLen = Math.floor(htmlLen * ratio);
    content = build(truncateText(text, textLen), truncateHtml(html, htmlLen));
    size = contentBytes(content);
    if (size <= maxBytes) return { content, truncated: true };
  }
  return { content: build(TRUNCATION_MARKER_TEXT.trim(), TRUNCATION_MARKER_HTML), truncated: true };
}

function relatesTo(message: OutgoingMessage): Content | undefined {
  if (message.threadRoot) {
    return {
      rel_type: "m.thread",
      event_id: message.threadRoot,
      // Without an explicit reply, clients that don't know threads show it as a reply to the root.
      is_falling_back: !message.replyTo,
      "m.in_reply_to": { event_id: message.replyTo ?? message.threadRoot },
    };
  }
  if (message.replyTo) return { "m.in_reply_to": { event_id: message.replyTo } };
  return undefined;
}

function bodies(message: OutgoingMessage): { text: string; html: string } {
  return { text: message.body, html: message.html ?? escapeHtml(message.body).replace(/\n/g, "<br>") };
}

function notice(text: string, html: string, mentions: UserId[] | undefined): Content {
  return {
    msgtype: "m.notice",
    body: text,
    format: HTML_FORMAT,
    formatted_body: html,
    "m.mentions": { user_ids: mentions ?? [] },
  };
}

/** An m.notice (the type bots send, and ignore, so two bots never answer each other). */
export function noticeContent(message: OutgoingMessage, maxBytes: number = MAX_CONTENT_BYTES): Content {
  const { text, html } = bodies(message);
  const rel = relatesTo(message);
  return fitToSize(
    text,
    html,
    (t, h) => ({ ...notice(t, h, message.mentions), ...(rel ? { "m.relates_to": rel } : {}) }),
    maxBytes,
  ).content;
}

/**
 * An edit of `originalEventId` (spec "Event replacements"): the "* " fallback for clients that don't
 * know edits, and the full new content in m.new_content. m.relates_to is not repeated inside: the
 * original's relation (e.g. its thread) is kept by the server. The outer m.mentions is empty so an
 * edit does not notify anyone again.
 */
export function editContent(
  originalEventId: EventId,
  message: OutgoingMessage,
  maxBytes: number = MAX_CONTENT_BYTES,
): Content {
  const { text, html } = bodies(message);
  return fitToSize(
    text,
    html,
    (t, h) => ({
      ...notice(`* ${t}`, `* ${h}`, []),
      "m.new_content": notice(t, h, message.mentions),
      "m.relates_to": { rel_type: "m.replace", event_id: originalEventId },
    }),
    maxBytes,
  ).content;
}

/** Spec limit of a reaction key (Synapse rejects longer ones). */
export const MAX_REACTION_KEY_LENGTH = 500;

export function reactionContent(targetEventId: EventId, key: string): Content {
  return { "m.relates_to": { rel_type: "m.annotation", event_id: targetEventId, key } };
}
