/**
 * What the leader's outbox loop needs from Matrix: raw idempotent sends through MatrixSender, and a
 * look back through a room's history for messages the fleet already sent under given transaction
 * ids (they carry TXN_CONTENT_KEY), so a new leader does not post again what a dead one sent.
 * Only events sent by the fleet's configured accounts count: anyone can post an event carrying a
 * transaction id they can guess (`reply.<their command>`), and a room member must not be able to
 * make a new leader drop a message as "already sent".
 */
import type { EventId } from "../../ports/chat.js";
import { TXN_CONTENT_KEY, type TimelineEvent } from "./classify.js";
import { enc, type MatrixHttp } from "./http.js";
import type { MatrixSender } from "./sender.js";

const PAGE_SIZE = 100;
/** A new leader's look back: enough for the messages of a few seconds of a busy leader. */
const MAX_PAGES = 10;

export class MatrixOutboxTransport {
  constructor(
    private readonly sender: Pick<MatrixSender, "sendEvent">,
    private readonly http: MatrixHttp,
    /** The fleet's bot accounts (matrix.user_id and matrix.fleet). */
    private readonly fleet: ReadonlySet<string>,
    /** Decrypts an m.room.encrypted event of an encrypted room (its txn id is inside); absent: none. */
    private readonly decrypt?: (
      roomId: string,
      ev: TimelineEvent,
    ) => Promise<{ ok: true; event: TimelineEvent } | { ok: false; reason: string } | null>,
  ) {}

  sendEvent(
    roomId: string,
    eventType: string,
    content: Record<string, unknown>,
    txnId: string,
  ): Promise<EventId> {
    return this.sender.sendEvent(roomId, eventType, content, txnId);
  }

  async findSent(
    roomId: string,
    txnIds: ReadonlySet<string>,
    sinceMs: number,
  ): Promise<Map<string, EventId>> {
    const found = new Map<string, EventId>();
    let from: string | undefined;
    for (let page = 0; page < MAX_PAGES && found.size < txnIds.size; page++) {
      const res = await this.http.request("GET", `/_matrix/client/v3/rooms/${enc(roomId)}/messages`, {
        query: {
          dir: "b",
          from,
          limit: PAGE_SIZE,
          filter: JSON.stringify({
            types: ["m.room.message", "m.reaction", "m.room.encrypted"],
            lazy_load_members: true,
          }),
        },
      });
      const chunk = Array.isArray(res["chunk"]) ? (res["chunk"] as TimelineEvent[]) : [];
      for (const raw of chunk) {
        let ev = raw;
        const byFleetRaw = typeof raw.sender === "string" && this.fleet.has(raw.sender);
        if (raw.type === "m.room.encrypted" && byFleetRaw && this.decrypt) {
          const clear = await this.decrypt(roomId, raw);
          if (clear?.ok) ev = clear.event;
        }
        const content = ev.content as Record<string, unknown> | undefined;
        const txnId = content?.[TXN_CONTENT_KEY];
        const byFleet = typeof ev.sender === "string" && this.fleet.has(ev.sender);
        if (byFleet && typeof txnId === "string" && typeof ev.event_id === "string" && txnIds.has(txnId)) {
          // Newest first: the first one seen is the one to keep should it exist twice.
          if (!found.has(txnId)) found.set(txnId, ev.event_id);
        }
        if (typeof ev.origin_server_ts === "number" && ev.origin_server_ts < sinceMs) return found;
      }
      if (chunk.length === 0 || typeof res["end"] !== "string") return found;
      from = res["end"];
    }
    return found;
  }
}
