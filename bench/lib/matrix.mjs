/**
 * A bare Matrix client for the chat bench (plain fetch, no SDK, so its own cost is near zero):
 * send a text, and a long-poll /sync of one room that stamps each event with the moment it arrived
 * and wakes whoever waits for it.
 */
import { randomUUID } from "node:crypto";
import { performance } from "node:perf_hooks";
import { clearTimeout, setTimeout } from "node:timers";

const enc = encodeURIComponent;

export class BenchClient {
  constructor(baseUrl, user, roomId) {
    this.baseUrl = baseUrl;
    this.user = user;
    this.roomId = roomId;
    this.abort = new AbortController();
    this.waiters = new Set();
    this.seen = [];
    this.loop = null;
  }

  async request(method, path, body) {
    const res = await globalThis.fetch(`${this.baseUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${this.user.accessToken}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: this.abort.signal,
    });
    const json = await res.json();
    if (!res.ok) throw new Error(`${method} ${path}: HTTP ${res.status} ${JSON.stringify(json)}`);
    return json;
  }

  join() {
    return this.request("POST", `/_matrix/client/v3/join/${enc(this.roomId)}`, {});
  }

  /** Sends a text; returns its event id. */
  async say(body, extra = {}) {
    const res = await this.request(
      "PUT",
      `/_matrix/client/v3/rooms/${enc(this.roomId)}/send/m.room.message/${enc(randomUUID())}`,
      { msgtype: "m.text", body, ...extra },
    );
    return res.event_id;
  }

  /** Starts following the room from now on (past events are skipped). */
  async start() {
    const filter = JSON.stringify({
      presence: { types: [] },
      account_data: { types: [] },
      room: {
        rooms: [this.roomId],
        timeline: { types: ["m.room.message"], limit: 50 },
        state: { types: [] },
        ephemeral: { types: [] },
        account_data: { types: [] },
      },
    });
    const first = await this.request("GET", `/_matrix/client/v3/sync?timeout=0&filter=${enc(filter)}`);
    let since = first.next_batch;
    this.loop = (async () => {
      while (!this.abort.signal.aborted) {
        let res;
        try {
          res = await this.request(
            "GET",
            `/_matrix/client/v3/sync?timeout=30000&since=${enc(since)}&filter=${enc(filter)}`,
          );
        } catch (e) {
          if (this.abort.signal.aborted) return;
          throw e;
        }
        const at = performance.now();
        for (const ev of res.rooms?.join?.[this.roomId]?.timeline?.events ?? []) {
          const seen = { at, event: ev };
          this.seen.push(seen);
          for (const w of [...this.waiters]) if (w.predicate(ev)) w.resolve(seen);
        }
        since = res.next_batch;
      }
    })();
  }

  /** The first event (already seen or yet to come) matching `predicate`, with its arrival time. */
  waitFor(predicate, timeoutMs = 60_000, what = "an event") {
    const already = this.seen.find((s) => predicate(s.event));
    if (already !== undefined) return Promise.resolve(already);
    return new Promise((resolve, reject) => {
      const w = {
        predicate,
        resolve: (seen) => {
          clearTimeout(timer);
          this.waiters.delete(w);
          resolve(seen);
        },
      };
      const timer = setTimeout(() => {
        this.waiters.delete(w);
        reject(new Error(`bench: ${this.user.userId} saw no ${what} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.waiters.add(w);
    });
  }

  /** Forget what was seen so far (between measurements, so the list stays short). */
  forget() {
    this.seen = [];
  }

  async stop() {
    this.abort.abort();
    await this.loop?.catch(() => {});
  }
}
