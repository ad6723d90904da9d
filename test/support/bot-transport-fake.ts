/**
 * A fake of the outbox's chat transport (OutboxTransport): records every send with its txnId,
 * answers like a homeserver that dedupes by txnId, and can be told to refuse or fail a txnId, or
 * to "find" messages a previous leader already sent.
 */
import { ChatSendError } from "../../src/ports/chat.js";
import type { OutboxTransport } from "../../src/app/outbox-loop.js";

export interface RecordedSend {
  roomId: string;
  eventType: string;
  content: Record<string, unknown>;
  txnId: string;
}

export class RecordingTransport implements OutboxTransport {
  readonly sends: RecordedSend[] = [];
  /** Attempts per txnId, failed ones included. */
  readonly attempts = new Map<string, number>();
  /** What findSent reports as already in the room: txnId → event id. */
  readonly alreadySent = new Map<string, string>();
  private readonly sentEvents = new Map<string, string>();
  private readonly refusals = new Map<string, "rejected" | number>();
  private n = 0;

  /** Every send of txnId fails for good (400). */
  refuse(txnId: string): void {
    this.refusals.set(txnId, "rejected");
  }

  /** The next `times` sends of txnId fail as the network would (retryable). */
  failTimes(txnId: string, times: number): void {
    this.refusals.set(txnId, times);
  }

  async sendEvent(
    roomId: string,
    eventType: string,
    content: Record<string, unknown>,
    txnId: string,
  ): Promise<string> {
    this.attempts.set(txnId, (this.attempts.get(txnId) ?? 0) + 1);
    const refusal = this.refusals.get(txnId);
    if (refusal === "rejected") {
      throw new ChatSendError("rejected", `send ${txnId}`, {
        status: 400,
        errcode: "M_BAD_JSON",
        attempts: 1,
      });
    }
    if (typeof refusal === "number" && refusal > 0) {
      this.refusals.set(txnId, refusal - 1);
      throw new ChatSendError("unavailable", `send ${txnId}`, { attempts: 8, reason: "ECONNREFUSED" });
    }
    const known = this.sentEvents.get(txnId);
    if (known !== undefined) return known;
    const eventId = `$event-${++this.n}`;
    this.sentEvents.set(txnId, eventId);
    this.sends.push({ roomId, eventType, content, txnId });
    return eventId;
  }

  async findSent(_roomId: string, txnIds: ReadonlySet<string>): Promise<Map<string, string>> {
    return new Map([...this.alreadySent].filter(([txn]) => txnIds.has(txn)));
  }

  sentTxnIds(): string[] {
    return this.sends.map((s) => s.txnId);
  }
}
