/**
 * Which timeline events intake puts into the inbox (docs/architecture.md §4 step 1): `!dag` messages from
 * people, reactions (the leader maps ✅/❌ on a card to confirm/reject) and edits of commands (the
 * leader answers that edits are not applied). Redacted events, notices, the fleet's own messages,
 * other messages and events older than the command window are not commands. Pure: the caller
 * passes the time and who the fleet is.
 *
 * The fleet is the configured bot accounts only (matrix.user_id and matrix.fleet): our transaction
 * key in an event's content proves nothing, since anyone can copy a bot message into the room.
 */
import { isCommandText } from "../../domain/command-grammar.js";
import { INBOX_EVENT_TYPE_KEY } from "../../ports/store.js";

/** A timeline event as /sync and /messages deliver it (only the fields read here). */
export interface TimelineEvent {
  event_id?: unknown;
  type?: unknown;
  sender?: unknown;
  origin_server_ts?: unknown;
  state_key?: unknown;
  content?: unknown;
  unsigned?: unknown;
}

/** Custom content key on everything the fleet sends: the outbox transaction id it was sent under. */
export const TXN_CONTENT_KEY = "org.dagbot.txn";

export interface ClassifyContext {
  /** Epoch ms now (the node's clock: events come with the homeserver's timestamps). */
  now: number;
  commandWindowMs: number;
  /** This node's user id and the other bot accounts of the fleet, from the config. */
  fleet: ReadonlySet<string>;
}

export type Classified =
  | {
      kind: "command" | "reaction";
      eventId: string;
      sender: string;
      originServerTs: number;
      /** What the inbox stores: the content as received, with the event's type under INBOX_EVENT_TYPE_KEY. */
      content: Record<string, unknown>;
    }
  | {
      /**
       * An edit (m.replace). `isCommand`: its new text is a `!dag` command; otherwise it counts only
       * when the event it edits was one (the caller knows whether that is in the inbox).
       */
      kind: "edit";
      eventId: string;
      sender: string;
      originServerTs: number;
      content: Record<string, unknown>;
      editedEventId: string;
      isCommand: boolean;
    }
  | { kind: "ignored"; why: string };

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

const ignored = (why: string): Classified => ({ kind: "ignored", why });

const str = (v: unknown): string | null => (typeof v === "string" ? v : null);

/** Whether a message content's text is a `!dag` command (null: it has no text body). */
function isCommandContent(content: Record<string, unknown>): boolean | null {
  const body = content["body"];
  if (typeof body !== "string") return null;
  return isCommandText({
    body,
    formattedBody: str(content["formatted_body"]),
    format: str(content["format"]),
  });
}

export function classifyEvent(event: TimelineEvent, ctx: ClassifyContext): Classified {
  const { event_id: eventId, sender, origin_server_ts: ts, type, content } = event;
  if (typeof eventId !== "string" || typeof sender !== "string" || typeof ts !== "number") {
    return ignored("malformed event");
  }
  if (type !== "m.room.message" && type !== "m.reaction") return ignored(`type ${String(type)}`);
  if (event.state_key !== undefined) return ignored("a state event");
  if (ctx.fleet.has(sender)) return ignored("sent by the fleet");
  if (isObject(event.unsigned) && event.unsigned["redacted_because"] !== undefined)
    return ignored("redacted");
  if (!isObject(content) || Object.keys(content).length === 0) return ignored("no content (redacted)");
  // Older than the window: after downtime such a command is stale; it is dropped, never replayed.
  if (ts < ctx.now - ctx.commandWindowMs) return ignored("older than the command window");
  const relation = isObject(content["m.relates_to"]) ? content["m.relates_to"] : null;

  if (type === "m.reaction") {
    if (relation?.["rel_type"] !== "m.annotation") return ignored("a reaction without an annotation");
    if (typeof relation["event_id"] !== "string" || typeof relation["key"] !== "string") {
      return ignored("a malformed reaction");
    }
    return { kind: "reaction", eventId, sender, originServerTs: ts, content: typed(content, type) };
  }

  // m.notice is what bots send; answering one could start two bots talking to each other forever.
  if (content["msgtype"] === "m.notice") return ignored("a notice");
  // Only an m.reaction decides: a message dressed up with a reaction's relation is nothing.
  if (relation?.["rel_type"] === "m.annotation") return ignored("a message with a reaction's relation");
  if (relation?.["rel_type"] === "m.replace") {
    const edited = relation["event_id"];
    if (typeof edited !== "string") return ignored("a malformed edit");
    const newContent = isObject(content["m.new_content"]) ? content["m.new_content"] : content;
    const isCommand = isCommandContent(newContent) === true;
    const stored = typed(content, type);
    return {
      kind: "edit",
      eventId,
      sender,
      originServerTs: ts,
      content: stored,
      editedEventId: edited,
      isCommand,
    };
  }
  const isCommand = isCommandContent(content);
  if (isCommand === null) return ignored("no body");
  if (!isCommand) return ignored("not a !dag command");
  return { kind: "command", eventId, sender, originServerTs: ts, content: typed(content, type) };
}

/**
 * The content to store, with the event's type under INBOX_EVENT_TYPE_KEY (overwriting whatever the
 * sender put there), so the leader can tell a reaction from a message that copies its fields.
 */
function typed(content: Record<string, unknown>, type: string): Record<string, unknown> {
  return { ...content, [INBOX_EVENT_TYPE_KEY]: type };
}
