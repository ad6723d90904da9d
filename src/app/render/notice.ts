/** The m.notice content of every message the bot sends, and where it goes (room, reply, thread). */
import type { Rendered } from "./html.js";

export const HTML_FORMAT = "org.matrix.custom.html";

/** Where a message goes relative to other events. */
export type Placement =
  | { kind: "room" }
  /** A reply (m.in_reply_to) in the main timeline. */
  | { kind: "reply"; to: string }
  /** In the thread rooted at `root`, answering `to` (the root itself when it starts the thread). */
  | { kind: "thread"; root: string; to: string };

/**
 * An m.notice with both bodies; `extra` adds keys (custom keys, or mentions and msgtype for the one
 * message meant to reach someone). Every message says whom it mentions, nobody unless `extra` says
 * so: with m.mentions present, clients and servers no longer look for names or `@room` in the
 * body, so text quoted from a command (an id, an error) cannot ping anyone.
 */
export function noticeContent(rendered: Rendered, placement: Placement, extra: Record<string, unknown> = {}) {
  const content: Record<string, unknown> = {
    msgtype: "m.notice",
    body: rendered.body,
    format: HTML_FORMAT,
    formatted_body: rendered.html,
    "m.mentions": {},
    ...extra,
  };
  const relation = relatesTo(placement);
  if (relation !== null) content["m.relates_to"] = relation;
  return content;
}

export function relatesTo(placement: Placement): Record<string, unknown> | null {
  switch (placement.kind) {
    case "room":
      return null;
    case "reply":
      return { "m.in_reply_to": { event_id: placement.to } };
    case "thread":
      // is_falling_back: clients without threads show it as a reply to `to`.
      return {
        rel_type: "m.thread",
        event_id: placement.root,
        is_falling_back: placement.to === placement.root,
        "m.in_reply_to": { event_id: placement.to },
      };
  }
}
