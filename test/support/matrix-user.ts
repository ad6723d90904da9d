/**
 * A scripted Matrix user for tests: sends messages and reactions over plain HTTP, long-polls /sync
 * to collect each room's timeline, and waits for an event that matches a predicate.
 */
import { randomUUID } from "node:crypto";

export interface MatrixEvent {
  event_id: string;
  room_id: string;
  type: string;
  sender: string;
  origin_server_ts: number;
  content: Record<string, any>;
  state_key?: string;
  unsigned?: Record<string, any>;
}

export interface UserCredentials {
  userId: string;
  accessToken: string;
}

export interface SendTextOptions {
  /** HTML; sets format org.matrix.custom.html. */
  formattedBody?: string;
  /** Event id this message replies to (m.in_reply_to). */
  replyTo?: string;
  /** Thread root: the message goes into that thread. */
  threadRoot?: string;
  msgtype?: "m.text" | "m.notice";
}

export class MatrixHttpError extends Error {
  constructor(
    readonly status: number,
    readonly body: Record<string, any>,
    what: string,
  ) {
    super(`${what}: HTTP ${status} ${JSON.stringify(body)}`);
  }
}

const enc = encodeURIComponent;

export class MatrixUser {
  readonly userId: string;
  readonly accessToken: string;
  private readonly seen = new Map<string, MatrixEvent>();
  /** Timeline events in the order /sync delivered them, across rooms. */
  private readonly timeline: MatrixEvent[] = [];
  private readonly waiters = new Set<() => void>();
  private syncing: Promise<void> | undefined;
  private abort: AbortController | undefined;
  private syncError: unknown;
  private nextBatch: string | undefined;

  private readonly timelineLimit: number;

  constructor(
    readonly baseUrl: string,
    creds: UserCredentials,
    /** timelineLimit: events per room per /sync before the timeline is `limited` and backfilled. */
    opts: { timelineLimit?: number } = {},
  ) {
    this.timelineLimit = opts.timelineLimit ?? 200;
    this.userId = creds.userId;
    this.accessToken = creds.accessToken;
  }

  async request(method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<any> {
    const res = await fetch(`${this.baseUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${this.accessToken}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: signal ?? AbortSignal.timeout(30_000),
    });
    const text = await res.text();
    const json = text ? JSON.parse(text) : {};
    if (!res.ok) throw new MatrixHttpError(res.status, json, `${method} ${path.split("?")[0]}`);
    return json;
  }

  async joinRoom(roomId: string): Promise<void> {
    await this.request("POST", `/_matrix/client/v3/join/${enc(roomId)}`, {});
  }

  async joinedMembers(roomId: string): Promise<string[]> {
    const res = await this.request("GET", `/_matrix/client/v3/rooms/${enc(roomId)}/joined_members`);
    return Object.keys(res.joined ?? {});
  }

  async sendEvent(roomId: string, type: string, content: Record<string, unknown>, txnId = randomUUID()) {
    const res = await this.request(
      "PUT",
      `/_matrix/client/v3/rooms/${enc(roomId)}/send/${enc(type)}/${enc(txnId)}`,
      content,
    );
    return String(res.event_id);
  }

  async sendText(roomId: string, body: string, opts: SendTextOptions = {}): Promise<string> {
    const content: Record<string, unknown> = { msgtype: opts.msgtype ?? "m.text", body };
    if (opts.formattedBody !== undefined) {
      content["format"] = "org.matrix.custom.html";
      content["formatted_body"] = opts.formattedBody;
    }
    if (opts.threadRoot) {
      content["m.relates_to"] = {
        rel_type: "m.thread",
        event_id: opts.threadRoot,
        is_falling_back: !opts.replyTo,
        "m.in_reply_to": { event_id: opts.replyTo ?? opts.threadRoot },
      };
    } else if (opts.replyTo) {
      content["m.relates_to"] = { "m.in_reply_to": { event_id: opts.replyTo } };
    }
    return this.sendEvent(roomId, "m.room.message", content);
  }

  async sendReaction(roomId: string, targetEventId: string, key: string): Promise<string> {
    return this.sendEvent(roomId, "m.reaction", {
      "m.relates_to": { rel_type: "m.annotation", event_id: targetEventId, key },
    });
  }

  async setPowerLevel(roomId: string, userId: string, level: number): Promise<void> {
    const path = `/_matrix/client/v3/rooms/${enc(roomId)}/state/m.room.power_levels/`;
    const current = await this.request("GET", path);
    current.users = { ...(current.users ?? {}), [userId]: level };
    await this.request("PUT", path, current);
  }

  /**
   * The room's most recent events, oldest first, straight from /messages: the server's own view,
   * independent of what /sync delivered.
   */
  async messages(roomId: string, limit = 200): Promise<MatrixEvent[]> {
    const res = await this.request(
      "GET",
      `/_matrix/client/v3/rooms/${enc(roomId)}/messages?dir=b&limit=${limit}`,
    );
    return (res.chunk as MatrixEvent[]).map((e) => ({ ...e, room_id: roomId })).reverse();
  }

  // ------------------------------------------------------------------------------------------
  // Sync

  /**
   * Starts the background /sync loop (idempotent). The first sync includes recent history; after
   * stopSync() it resumes from where it stopped.
   */
  startSync(): void {
    if (this.syncing) return;
    this.abort = new AbortController();
    this.syncing = this.syncLoop(this.abort.signal);
  }

  async stopSync(): Promise<void> {
    this.abort?.abort();
    await this.syncing;
    this.syncing = undefined;
  }

  /** Every timeline event collected so far, optionally of one room, in delivery order. */
  events(roomId?: string): MatrixEvent[] {
    return roomId ? this.timeline.filter((e) => e.room_id === roomId) : [...this.timeline];
  }

  /**
   * Resolves with the first collected event (past or future) that matches, or rejects after
   * timeoutMs with a summary of everything seen.
   */
  waitFor(predicate: (e: MatrixEvent) => boolean, timeoutMs = 20_000, what = "event"): Promise<MatrixEvent> {
    this.startSync();
    return new Promise((resolveEvent, reject) => {
      const check = (): boolean => {
        const hit = this.timeline.find(predicate);
        if (hit) {
          finish();
          resolveEvent(hit);
          return true;
        }
        return false;
      };
      const finish = () => {
        clearTimeout(timer);
        this.waiters.delete(onChange);
      };
      const onChange = () => void check();
      const timer = setTimeout(() => {
        finish();
        const seen = this.timeline.map(describe).join("\n  ");
        const err = this.syncError ? `\nlast sync error: ${String(this.syncError)}` : "";
        reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}; saw:\n  ${seen}${err}`));
      }, timeoutMs);
      if (!check()) this.waiters.add(onChange);
    });
  }

  private add(roomId: string, events: MatrixEvent[]): void {
    for (const raw of events) {
      const e = { ...raw, room_id: roomId };
      if (this.seen.has(e.event_id)) continue;
      this.seen.set(e.event_id, e);
      this.timeline.push(e);
    }
  }

  private async syncLoop(signal: AbortSignal): Promise<void> {
    const filter = enc(
      JSON.stringify({ room: { timeline: { limit: this.timelineLimit } }, presence: { types: [] } }),
    );
    while (!signal.aborted) {
      const since = this.nextBatch;
      const query = `filter=${filter}&timeout=${since ? 10_000 : 0}${since ? `&since=${enc(since)}` : ""}`;
      try {
        const res = await this.request(
          "GET",
          `/_matrix/client/v3/sync?${query}`,
          undefined,
          AbortSignal.any([signal, AbortSignal.timeout(40_000)]),
        );
        for (const [roomId, room] of Object.entries<any>(res.rooms?.join ?? {})) {
          if (room.timeline?.limited && since)
            await this.backfill(roomId, room.timeline.prev_batch, since, signal);
          this.add(roomId, room.timeline?.events ?? []);
        }
        this.nextBatch = res.next_batch;
        this.syncError = undefined;
        for (const w of [...this.waiters]) w();
      } catch (e) {
        if (signal.aborted) return;
        // Synapse may be restarting on purpose; keep polling and report the error if a wait times out.
        this.syncError = e;
        await new Promise((r) => setTimeout(r, 250));
      }
    }
  }

  /** Fills a `limited` gap: events between the previous sync token and this batch's prev_batch. */
  private async backfill(roomId: string, from: string, to: string, signal: AbortSignal): Promise<void> {
    const res = await this.request(
      "GET",
      `/_matrix/client/v3/rooms/${enc(roomId)}/messages?dir=b&limit=1000&from=${enc(from)}&to=${enc(to)}`,
      undefined,
      signal,
    );
    this.add(roomId, [...(res.chunk as MatrixEvent[])].reverse());
  }
}

function describe(e: MatrixEvent): string {
  const body = typeof e.content?.["body"] === "string" ? JSON.stringify(e.content["body"].slice(0, 80)) : "";
  const rel = e.content?.["m.relates_to"]?.rel_type ?? "";
  return `${e.event_id} ${e.type} ${e.sender} ${rel} ${body}`.replace(/\s+/g, " ").trim();
}

/** Convenience predicates for waitFor. */
export const match = {
  body: (roomId: string, text: string | RegExp) => (e: MatrixEvent) =>
    e.room_id === roomId &&
    e.type === "m.room.message" &&
    typeof e.content["body"] === "string" &&
    (typeof text === "string" ? e.content["body"] === text : text.test(e.content["body"])),
  edits: (roomId: string, originalEventId: string) => (e: MatrixEvent) =>
    e.room_id === roomId &&
    e.content["m.relates_to"]?.rel_type === "m.replace" &&
    e.content["m.relates_to"]?.event_id === originalEventId,
  id: (eventId: string) => (e: MatrixEvent) => e.event_id === eventId,
};
