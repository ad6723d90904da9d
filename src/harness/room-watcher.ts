/**
 * Follows one room's messages through /sync for a person-facing view (`dagbot demo` prints them):
 * every m.room.message from the room's beginning on, in order, until stopped.
 */
import { enc, matrixHttp, type MatrixHttp } from "../adapters/matrix/http.js";

export interface WatchedEvent {
  eventId: string;
  sender: string;
  originServerTs: number;
  content: Record<string, unknown>;
}

export class RoomWatcher {
  private readonly http: MatrixHttp;
  private readonly abort = new AbortController();
  private loop: Promise<void> | null = null;

  constructor(
    homeserverUrl: string,
    accessToken: string,
    private readonly roomId: string,
    private readonly onEvent: (event: WatchedEvent) => void,
    private readonly onError: (error: unknown) => void = () => undefined,
  ) {
    this.http = matrixHttp(homeserverUrl, accessToken);
  }

  start(): void {
    this.loop ??= this.run();
  }

  async stop(): Promise<void> {
    this.abort.abort();
    await this.loop;
  }

  private async run(): Promise<void> {
    const filter = JSON.stringify({
      presence: { types: [] },
      account_data: { types: [] },
      room: {
        rooms: [this.roomId],
        timeline: { types: ["m.room.message"], limit: 100 },
        state: { types: [] },
        ephemeral: { types: [] },
        account_data: { types: [] },
      },
    });
    let since: string | undefined;
    const signal = this.abort.signal;
    while (!signal.aborted) {
      try {
        const res = await this.http.request("GET", "/_matrix/client/v3/sync", {
          query: { filter, since, timeout: since === undefined ? 0 : 10_000 },
          timeoutMs: 40_000,
          signal,
        });
        const rooms = (res["rooms"] ?? {}) as {
          join?: Record<string, { timeline?: { events?: unknown[] } }>;
        };
        for (const raw of rooms.join?.[this.roomId]?.timeline?.events ?? []) {
          const ev = raw as Record<string, unknown>;
          if (typeof ev["event_id"] !== "string" || typeof ev["sender"] !== "string") continue;
          this.onEvent({
            eventId: ev["event_id"],
            sender: ev["sender"],
            originServerTs: typeof ev["origin_server_ts"] === "number" ? ev["origin_server_ts"] : 0,
            content: (ev["content"] ?? {}) as Record<string, unknown>,
          });
        }
        since = typeof res["next_batch"] === "string" ? res["next_batch"] : since;
      } catch (e) {
        if (signal.aborted) return;
        this.onError(e);
        await new Promise((r) => setTimeout(r, 1_000));
      }
    }
  }

  /** Sends a plain text message to the watched room as this user (the demo's person typing). */
  async say(body: string): Promise<string> {
    const txn = `demo-${Date.now()}-${Math.random().toString(36).slice(2)}`;
    const res = await this.http.request(
      "PUT",
      `/_matrix/client/v3/rooms/${enc(this.roomId)}/send/m.room.message/${enc(txn)}`,
      { body: { msgtype: "m.text", body } },
    );
    return String(res["event_id"]);
  }
}
