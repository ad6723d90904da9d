/**
 * Reading what the bots said in a room, for the Matrix e2e tests: each message the fleet sends
 * carries its outbox txnId (org.dagbot.txn), so "the reply to command X" is the event whose txnId is
 * reply.<X>, and "exactly one reply" is a count of those, read from the server's own /messages.
 */
import type { MatrixEvent, MatrixUser } from "./matrix-user.js";

export const TXN_KEY = "org.dagbot.txn";
export const CARD_KEY = "org.dagbot.card";

export const txnOf = (e: MatrixEvent): string | undefined =>
  typeof e.content[TXN_KEY] === "string" ? e.content[TXN_KEY] : undefined;

/** Predicate: the reply to a command event. */
export const replyTo = (commandEventId: string) => (e: MatrixEvent) => txnOf(e) === `reply.${commandEventId}`;

/** Predicate: the status card of a run (the original message, not an edit). */
export const cardOf = (dagId: string) => (e: MatrixEvent) =>
  e.content[CARD_KEY]?.dagId === dagId && e.content["m.relates_to"]?.rel_type !== "m.replace";

/** Predicate: an edit of the event `cardEventId` whose new content says `text`. */
export const cardEditSaying = (cardEventId: string, text: string | RegExp) => (e: MatrixEvent) =>
  e.content["m.relates_to"]?.rel_type === "m.replace" &&
  e.content["m.relates_to"]?.event_id === cardEventId &&
  typeof e.content["m.new_content"]?.body === "string" &&
  (typeof text === "string"
    ? e.content["m.new_content"].body.includes(text)
    : text.test(e.content["m.new_content"].body));

export const bodyOf = (e: MatrixEvent): string =>
  typeof e.content["body"] === "string" ? e.content["body"] : "";

/** Every event of the room as the server has it (not only what a sync delivered), oldest first. */
export async function roomHistory(user: MatrixUser, roomId: string, limit = 1000): Promise<MatrixEvent[]> {
  const out: MatrixEvent[] = [];
  let from: string | undefined;
  while (out.length < limit) {
    const query = `dir=b&limit=200${from ? `&from=${encodeURIComponent(from)}` : ""}`;
    const res = await user.request(
      "GET",
      `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/messages?${query}`,
    );
    const chunk = (res.chunk ?? []) as MatrixEvent[];
    out.push(...chunk.map((e) => ({ ...e, room_id: roomId })));
    if (chunk.length === 0 || typeof res.end !== "string") break;
    from = res.end;
  }
  return out.reverse();
}

/** How many events in the room's history carry each txnId (the fleet's messages only). */
export function countByTxn(events: readonly MatrixEvent[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const e of events) {
    const txn = txnOf(e);
    if (txn !== undefined) counts.set(txn, (counts.get(txn) ?? 0) + 1);
  }
  return counts;
}

/** A ```json fenced publish command. */
export function publishJson(dag: unknown): string {
  return `!dag publish\n\`\`\`json\n${JSON.stringify(dag, null, 2)}\n\`\`\``;
}

/**
 * Predicate: the picture a `!dag graph` typed outside the run's thread put into that thread (the
 * command's answer, a reply where it was typed, points to it).
 */
export const pictureFor = (commandEventId: string) => (e: MatrixEvent) =>
  txnOf(e) === `picture.${commandEventId}`;
