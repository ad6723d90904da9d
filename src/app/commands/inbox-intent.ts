/**
 * What an inbox row asks for, read from the event content that intake stored (docs/architecture.md §4):
 * - a message: `body`, `formatted_body`, `format`, and `m.relates_to` when it was sent in a thread
 *   (the reply then goes into the same thread);
 * - a reaction (`m.relates_to.rel_type` = "m.annotation"): ✅ confirms and ❌ rejects the run whose
 *   status card it reacts to, if that run awaits confirmation. The card is found through the outbox:
 *   among the room's pending runs, the one whose `card.<run_id>` row was sent as the reacted-to event.
 *   Any other reaction, or one on another event or on a run that no longer awaits confirmation, is
 *   ignored without a reply (a second ✅ after a confirm says nothing, as a reaction should).
 * Only an `m.reaction` event decides: intake records each event's type under INBOX_EVENT_TYPE_KEY,
 * and a message that carries a reaction's fields is not a reaction.
 * - an edit (`m.replace`) of a command: never applied; the leader answers that it was not.
 * The camelCase message shape of src/ports/chat.ts (IncomingCommand) is read as well.
 * - a command given as data (STRUCTURED_COMMAND_KEY): how the CLI and the HTTP API send commands,
 *   never as chat text. Honoured only from a sender that is not a Matrix user: a room member could
 *   put the same key into an event's content, and intake stores content as the homeserver gave it.
 */
import type { CommandInput } from "../../domain/command-grammar.js";
import {
  INBOX_EVENT_TYPE_KEY,
  UNDECRYPTABLE_KEY,
  type OutboxStore,
  type RunRecord,
  type RunStore,
} from "../../ports/store.js";
import { FLEET_PROTOCOL, RELEASE } from "../../domain/release.js";
import { CARD_CONTENT_KEY, cardTxnId } from "../render/messages.js";

/** The content key of a command given as data (`{ verb: "confirm", id: "x", hash: null }`). */
export const STRUCTURED_COMMAND_KEY = "dagbot.command";

/**
 * The content key of the release that wrote a command given as data (`{ release, protocol }`), so a
 * leader of another release can say why it cannot read it (docs/architecture.md §11).
 */
export const SENDER_RELEASE_KEY = "dagbot.release";

/** Which release wrote a command given as data: absent in rows written before 0.2.0. */
export interface SenderRelease {
  release: string;
  protocol: number;
}

/** The inbox content of a command given as data by this release (the CLI, the HTTP API, a webhook). */
export function structuredCommandContent(data: unknown): Record<string, unknown> {
  const from: SenderRelease = { release: RELEASE, protocol: FLEET_PROTOCOL };
  return { msgtype: "m.text", [STRUCTURED_COMMAND_KEY]: data, [SENDER_RELEASE_KEY]: from };
}

function senderRelease(content: Record<string, unknown>): SenderRelease | null {
  const v = obj(content[SENDER_RELEASE_KEY]);
  const release = str(v?.["release"]);
  const protocol = v?.["protocol"];
  if (release === null || typeof protocol !== "number" || !Number.isInteger(protocol)) return null;
  return { release: release.slice(0, 64), protocol };
}

/**
 * Why this leader cannot read a command given as data, or null when it can: a command of a newer
 * fleet protocol is refused with the two releases named (a leader never guesses at it); one of the
 * same protocol from another release is read, and a failure to parse it names both releases.
 */
export function unreadableFrom(from: SenderRelease | null): string | null {
  if (from === null || from.protocol <= FLEET_PROTOCOL) return null;
  return (
    `this command came from dagbot ${from.release} (fleet protocol ${from.protocol}), and the leader runs ` +
    `dagbot ${RELEASE} (fleet protocol ${FLEET_PROTOCOL}), which cannot read it: nothing was done. ` +
    "Upgrade the leading node's release (docs/operations.md, \"Upgrading\"), or send it with this release's dagbot"
  );
}

/**
 * Whether a sender is this deployment's own (the CLI's `local:<user>`, the HTTP API's `http:<token>`):
 * Matrix user ids always start with "@" (the homeserver guarantees it for every event intake stores),
 * so a sender without it was written by someone holding the store's own credentials.
 */
export function isLocalSender(sender: string): boolean {
  return !sender.startsWith("@");
}

export type InboxIntent =
  | { kind: "message"; input: CommandInput; threadRoot: string | null }
  /** A command given as data by a local sender, to be checked as strictly as typed text; `from`: the release that wrote it. */
  | { kind: "data"; data: unknown; from: SenderRelease | null }
  | { kind: "reaction"; targetEventId: string; decision: "confirm" | "reject" }
  | { kind: "edit"; editedEventId: string }
  /** An encrypted event no node of the fleet could decrypt (intake stored it marked so). */
  | { kind: "undecryptable"; sender: string | null }
  | { kind: "other"; why: string };

/** Reaction keys that decide, compared without emoji variation selectors. */
export const CONFIRM_KEYS: readonly string[] = ["✅", "✔", "☑"];
export const REJECT_KEYS: readonly string[] = ["❌", "✖", "❎"];

const str = (v: unknown): string | null => (typeof v === "string" ? v : null);
const obj = (v: unknown): Record<string, unknown> | null =>
  typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : null;

/** `sender`: the row's; without it no command given as data is honoured. */
export function decodeInboxContent(content: Record<string, unknown>, sender?: string): InboxIntent {
  // A Matrix user's event never carries a command as data, whatever its content says: it is read as
  // the message (or reaction) it is.
  if (sender !== undefined && isLocalSender(sender) && Object.hasOwn(content, STRUCTURED_COMMAND_KEY))
    return { kind: "data", data: content[STRUCTURED_COMMAND_KEY], from: senderRelease(content) };
  const relation = obj(content["m.relates_to"]);
  const camelRelation = obj(content["relatesTo"]);
  const relType = str(relation?.["rel_type"]) ?? str(camelRelation?.["relType"]);
  const relEvent = str(relation?.["event_id"]) ?? str(camelRelation?.["eventId"]);

  const eventType = str(content[INBOX_EVENT_TYPE_KEY]);
  if (eventType === "m.room.encrypted") {
    return content[UNDECRYPTABLE_KEY] === undefined
      ? { kind: "other", why: "an encrypted event" }
      : { kind: "undecryptable", sender: null };
  }
  if (eventType === "m.reaction") {
    const reactionKey = str(relation?.["key"]);
    if (relType !== "m.annotation" || relEvent === null || reactionKey === null)
      return { kind: "other", why: "a malformed reaction" };
    const key = reactionKey.replace(/[\uFE0E\uFE0F]/g, "").trim();
    if (CONFIRM_KEYS.includes(key)) return { kind: "reaction", targetEventId: relEvent, decision: "confirm" };
    if (REJECT_KEYS.includes(key)) return { kind: "reaction", targetEventId: relEvent, decision: "reject" };
    return { kind: "other", why: "a reaction that is not ✅ or ❌" };
  }
  if (relType === "m.annotation") return { kind: "other", why: "a message with a reaction's relation" };
  if (relType === "m.replace") {
    return relEvent === null
      ? { kind: "other", why: "a malformed edit" }
      : { kind: "edit", editedEventId: relEvent };
  }

  const body = str(content["body"]);
  if (body === null) return { kind: "other", why: "no body" };
  const input: CommandInput = {
    body,
    formattedBody: str(content["formatted_body"]) ?? str(content["formattedBody"]),
    format: str(content["format"]),
  };
  return { kind: "message", input, threadRoot: relType === "m.thread" ? relEvent : null };
}

/** Pending runs looked at per reaction; more than this awaiting confirmation in one room is unusual. */
const MAX_PENDING_SCAN = 200;

/**
 * The pending run of this room whose status card is `targetEventId`, and the content hash that card
 * showed (null for a card from before cards showed one), or null.
 */
export async function findCardRun(
  store: Pick<RunStore, "listRuns"> & Pick<OutboxStore, "getOutbox">,
  roomId: string,
  targetEventId: string,
): Promise<{ run: RunRecord; shownHash: string | null } | null> {
  const pending = await store.listRuns(roomId, { statuses: ["pending"], limit: MAX_PENDING_SCAN });
  for (const run of pending) {
    const card = await store.getOutbox(cardTxnId(run.runId));
    if (card !== null && card.sentEventId === targetEventId) {
      return { run, shownHash: str(obj(card.content[CARD_CONTENT_KEY])?.["hash"]) };
    }
  }
  return null;
}
