/**
 * What an inbox row asks for, read from the event content that intake stored (DESIGN.md §4):
 * - a message: `body`, `formatted_body`, `format`, and `m.relates_to` when it was sent in a thread
 *   (the reply then goes into the same thread);
 * - a reaction (`m.relates_to.rel_type` = "m.annotation"): ✅ confirms and ❌ rejects the run whose
 *   status card it reacts to, if that run awaits confirmation. The card is found through the outbox:
 *   among the room's pending runs, the one whose `card.<run_id>` row was sent as the reacted-to event.
 *   Any other reaction, or one on another event or on a run that no longer awaits confirmation, is
 *   ignored without a reply (a second ✅ after a confirm says nothing, as a reaction should).
 * The camelCase shapes of src/ports/chat.ts (IncomingCommand, IncomingReaction) are read as well, so
 * intake may store either.
 */
import type { CommandInput } from "../../domain/commands.js";
import type { OutboxStore, RunRecord, RunStore } from "../../ports/store.js";
import { cardTxnId } from "../render/messages.js";

export type InboxIntent =
  | { kind: "message"; input: CommandInput; threadRoot: string | null }
  | { kind: "reaction"; targetEventId: string; decision: "confirm" | "reject" }
  | { kind: "other"; why: string };

/** Reaction keys that decide, compared without emoji variation selectors. */
export const CONFIRM_KEYS: readonly string[] = ["✅", "✔", "☑"];
export const REJECT_KEYS: readonly string[] = ["❌", "✖", "❎"];

const str = (v: unknown): string | null => (typeof v === "string" ? v : null);
const obj = (v: unknown): Record<string, unknown> | null =>
  typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : null;

export function decodeInboxContent(content: Record<string, unknown>): InboxIntent {
  const relation = obj(content["m.relates_to"]);
  const camelRelation = obj(content["relatesTo"]);
  const relType = str(relation?.["rel_type"]) ?? str(camelRelation?.["relType"]);
  const relEvent = str(relation?.["event_id"]) ?? str(camelRelation?.["eventId"]);

  const reactionTarget = relType === "m.annotation" ? relEvent : str(content["targetEventId"]);
  const reactionKey = relType === "m.annotation" ? str(relation?.["key"]) : str(content["key"]);
  if (reactionTarget !== null && reactionKey !== null) {
    const key = reactionKey.replace(/[\uFE0E\uFE0F]/g, "").trim();
    if (CONFIRM_KEYS.includes(key))
      return { kind: "reaction", targetEventId: reactionTarget, decision: "confirm" };
    if (REJECT_KEYS.includes(key))
      return { kind: "reaction", targetEventId: reactionTarget, decision: "reject" };
    return { kind: "other", why: "a reaction that is not ✅ or ❌" };
  }
  if (relType === "m.replace") return { kind: "other", why: "an edit" };

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

/** The pending run of this room whose status card is `targetEventId`, or null. */
export async function findCardRun(
  store: Pick<RunStore, "listRuns"> & Pick<OutboxStore, "getOutbox">,
  roomId: string,
  targetEventId: string,
): Promise<RunRecord | null> {
  const pending = await store.listRuns(roomId, { statuses: ["pending"], limit: MAX_PENDING_SCAN });
  for (const run of pending) {
    const card = await store.getOutbox(cardTxnId(run.runId));
    if (card !== null && card.sentEventId === targetEventId) return run;
  }
  return null;
}
