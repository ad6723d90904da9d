/**
 * Which timeline events intake puts into the inbox (DESIGN.md §4 step 1): `!dag` messages from
 * people and reactions (the leader maps ✅/❌ on a card to confirm/reject). Edits, redacted events,
 * notices, the fleet's own messages, other messages and events older than the command window are
 * not commands. Pure: the caller passes the time and who the fleet is.
 */
import { parseCommand } from "../../domain/commands.js";

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
  /** This node's user id and every other bot of the fleet known so far. */
  fleet: ReadonlySet<string>;
}

export type Classified =
  | {
      kind: "command" | "reaction";
      eventId: string;
      sender: string;
      originServerTs: number;
      content: Record<string, unknown>;
    }
  | { kind: "ignored"; why: string };

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

const ignored = (why: string): Classified => ({ kind: "ignored", why });

/** Whether this event came from a dagbot (its content carries our transaction id key). */
export function isFleetEvent(event: TimelineEvent): boolean {
  return isObject(event.content) && typeof event.content[TXN_CONTENT_KEY] === "string";
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
  if (isFleetEvent(event)) return ignored("sent by a dagbot");
  // Older than the window: after downtime such a command is stale; it is dropped, never replayed.
  if (ts < ctx.now - ctx.commandWindowMs) return ignored("older than the command window");
  const relation = isObject(content["m.relates_to"]) ? content["m.relates_to"] : null;

  if (type === "m.reaction") {
    if (relation?.["rel_type"] !== "m.annotation") return ignored("a reaction without an annotation");
    if (typeof relation["event_id"] !== "string" || typeof relation["key"] !== "string") {
      return ignored("a malformed reaction");
    }
    return { kind: "reaction", eventId, sender, originServerTs: ts, content };
  }

  // m.notice is what bots send; answering one could start two bots talking to each other forever.
  if (content["msgtype"] === "m.notice") return ignored("a notice");
  if (relation?.["rel_type"] === "m.replace") return ignored("an edit");
  const body = content["body"];
  if (typeof body !== "string") return ignored("no body");
  const formatted = content["formatted_body"];
  const format = content["format"];
  const parsed = parseCommand({
    body,
    formattedBody: typeof formatted === "string" ? formatted : null,
    format: typeof format === "string" ? format : null,
  });
  if (parsed.kind === "not-a-command") return ignored("not a !dag command");
  return { kind: "command", eventId, sender, originServerTs: ts, content };
}
