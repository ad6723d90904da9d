/** The m.notice content of every message the bot sends, and where it goes (room, reply, thread). */
import type { Rendered } from "./html.js";

export const HTML_FORMAT = "org.matrix.custom.html";

/** Where a message goes relative to other events. */
export type Placement =
  | { kind: "room" }
  /** A reply (m.in_reply_to) in the main timeline. */
  | { kind: "reply"; to: string }
  /**
   * In the thread rooted at `root`. `to`: the event it answers there (a command or reaction of that
   * thread). Without `to`, `fallbackTxn` names the bot message (by its outbox txnId: the card, the
   * acknowledgement) that clients without threads show it as a reply to; the outbox fills in that
   * message's event id when it sends (FALLBACK_TXN_KEY). Never the root: the root is a publish, and a
   * reply to it would show the whole DAG again under every bot message.
   */
  | { kind: "thread"; root: string; to: string; fallbackTxn?: undefined }
  | { kind: "thread"; root: string; to?: undefined; fallbackTxn: string | null }
  /**
   * In the thread of a run that has no publish message (started by a webhook, a schedule, `after`,
   * the CLI or HTTP): its card, sent in the main timeline, is the root. The card's event id is known
   * only once it is sent, so the outbox fills it in (THREAD_ROOT_TXN_KEY); `to`: the event answered
   * there, else the card is the reply fallback.
   */
  | { kind: "card-thread"; cardTxn: string; to?: string };

/**
 * Custom content key of an unsent message in the thread of a card: the card's outbox txnId. The
 * outbox puts the card's event id into the m.thread relation before sending; a card that was never
 * sent leaves the message in the main timeline.
 */
export const THREAD_ROOT_TXN_KEY = "org.dagbot.thread_root_txn";

/**
 * Custom content key of an unsent thread message: the outbox txnId of the message its reply fallback
 * points at. The outbox replaces it with `m.in_reply_to` (that message's event id) before sending.
 */
export const FALLBACK_TXN_KEY = "org.dagbot.fallback_txn";

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
  if (placement.kind === "thread" && placement.to === undefined && placement.fallbackTxn != null)
    content[FALLBACK_TXN_KEY] = placement.fallbackTxn;
  if (placement.kind === "card-thread") {
    content[THREAD_ROOT_TXN_KEY] = placement.cardTxn;
    if (placement.to === undefined) content[FALLBACK_TXN_KEY] = placement.cardTxn;
  }
  return content;
}

export function relatesTo(placement: Placement): Record<string, unknown> | null {
  switch (placement.kind) {
    case "room":
      return null;
    case "reply":
      return { "m.in_reply_to": { event_id: placement.to } };
    case "thread":
      // A real reply within the thread; or, without one, the fallback the outbox fills in (or none).
      return placement.to !== undefined
        ? {
            rel_type: "m.thread",
            event_id: placement.root,
            is_falling_back: false,
            "m.in_reply_to": { event_id: placement.to },
          }
        : { rel_type: "m.thread", event_id: placement.root };
    case "card-thread":
      // The root's event id is filled in by the outbox (THREAD_ROOT_TXN_KEY).
      return placement.to !== undefined
        ? { rel_type: "m.thread", is_falling_back: false, "m.in_reply_to": { event_id: placement.to } }
        : { rel_type: "m.thread" };
  }
}
