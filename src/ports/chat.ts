/**
 * The chat capabilities the app needs (docs/architecture.md §4): sending and editing replies idempotently, and
 * the shape of the command and reaction events that intake hands over. Matrix details stay in
 * src/adapters/matrix.
 */

export type RoomId = string;
export type EventId = string;
export type UserId = string;

/**
 * A message as the app writes it; the adapter turns it into an m.notice with both bodies. The app's
 * rendered `{ body, html }` (src/app/render/html.ts) fits as it is.
 */
export interface OutgoingMessage {
  /** Plain-text rendering, the `body` that clients without HTML show. */
  body: string;
  /** HTML rendering (org.matrix.custom.html). Omitted: the escaped body is used. */
  html?: string;
  /** Users this message mentions (m.mentions); the text should name them too. */
  mentions?: UserId[];
  /** Put the message in the thread rooted at this event (m.thread). */
  threadRoot?: EventId;
  /** Reply to this event (m.in_reply_to); inside a thread it is the message answered there. */
  replyTo?: EventId;
}

/**
 * Sends with a caller-chosen transaction id: calling again with the same txnId (after a crash, a
 * timeout or a retry) returns the same event instead of posting a second message. Rate limits are
 * waited out and network errors retried inside; what is left is a ChatSendError.
 */
export interface MessageSender {
  send(roomId: RoomId, message: OutgoingMessage, txnId: string): Promise<EventId>;
  /** Replaces the content of an event this sender posted (m.replace); returns the edit's event id. */
  edit(roomId: RoomId, originalEventId: EventId, message: OutgoingMessage, txnId: string): Promise<EventId>;
  /** Adds a reaction; resolves null when this sender had already reacted with that key. */
  react(roomId: RoomId, targetEventId: EventId, key: string, txnId: string): Promise<EventId | null>;
}

/** A `!dag` message from a person, as intake stores it in the inbox. */
export interface IncomingCommand {
  eventId: EventId;
  roomId: RoomId;
  sender: UserId;
  originServerTs: number;
  /** The plain `body`. */
  body: string;
  /** `formatted_body`, or null when the message has no HTML. */
  formattedBody: string | null;
  /** `format`, e.g. "org.matrix.custom.html", or null. */
  format: string | null;
  /** The event this message replies to (m.in_reply_to), if any. */
  inReplyTo?: EventId;
  /** The relation of the message, if any (e.g. a thread it was posted in). */
  relatesTo?: { relType: string; eventId: EventId };
}

/** A reaction (m.annotation), e.g. ✅ or ❌ on a status card that awaits confirmation. */
export interface IncomingReaction {
  eventId: EventId;
  roomId: RoomId;
  sender: UserId;
  originServerTs: number;
  targetEventId: EventId;
  key: string;
}

export type ChatSendFailure =
  /** The homeserver refused the request (4xx other than 429): retrying the same request is useless. */
  | "rejected"
  /** Network errors, 5xx or rate limits persisted through every attempt: try again later. */
  | "unavailable";

/** A send, edit or reaction that did not happen. `retryable` says whether a later attempt may succeed. */
export class ChatSendError extends Error {
  override readonly name = "ChatSendError";
  readonly retryable: boolean;
  constructor(
    readonly failure: ChatSendFailure,
    /** What was attempted, e.g. "send m.room.message to !room:hs (txn out-42)". */
    readonly operation: string,
    readonly details: { status?: number; errcode?: string; attempts: number; reason?: string },
    options?: { cause?: unknown },
  ) {
    const code = [details.status, details.errcode].filter((x) => x !== undefined).join(" ");
    const reason = details.reason ? `: ${details.reason}` : "";
    super(
      `${operation}: ${failure}${code ? ` (${code})` : ""} after ${details.attempts} attempt(s)${reason}`,
      options,
    );
    this.retryable = failure === "unavailable";
  }
}

export const isChatSendError = (e: unknown): e is ChatSendError => e instanceof ChatSendError;

/** The homeserver's media repository: where pictures go before an m.image points at them. */
export interface MediaUploader {
  /**
   * Uploads and resolves the content URI (mxc://…). Throws ChatSendError; a file larger than the
   * homeserver accepts is failure "rejected" with status 413.
   */
  upload(data: Uint8Array, mimetype: string, filename: string): Promise<string>;
}
