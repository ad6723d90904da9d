/**
 * The PostgreSQL change feed: one dedicated connection LISTENs on the `dagbot` channel, which every
 * writing transaction NOTIFYs (delivered at commit), and on `dagbot_tasks` (the hot path's claims and
 * finishes) only while a listener of this process wants those topics. Connected only while someone listens; after a
 * lost connection it reconnects with backoff and wakes every listener once, since notifications
 * sent while it was away are gone.
 *
 * Behind a transaction-mode pooler (PgOptions.pooler) there is no LISTEN: a server connection is
 * the Store's only for a transaction. Listeners hear this Store's own commits at once, as always,
 * and every topic of every room every POOLER_POLL_MS, which bounds how late they hear other nodes'
 * (docs/operations.md, "Behind a connection pooler").
 */
import pg from "pg";
import type { ChangeTopic } from "../../ports/store.js";
import { HOT_TOPICS } from "../../ports/store.js";
import type { PgOptions } from "./db.js";
import { CHANNEL, clientConfig, HOT_CHANNEL } from "./db.js";
import type { ChangeListener } from "../store-common/change-listeners.js";
import { ALL_CHANGE_TOPICS, ChangeListeners } from "../store-common/change-listeners.js";

const TOPICS: ReadonlySet<string> = new Set<string>(ALL_CHANGE_TOPICS);

/** NOTIFY's payload limit is 8000 bytes; a wake naming more nodes than fit is split. */
const MAX_PAYLOAD = 7900;

/** The NOTIFY payloads of a targeted wake: `wake:<room>` then one node id per line. */
export function wakePayloads(roomId: string, nodeIds: readonly string[]): string[] {
  const out: string[] = [];
  let current = `wake:${roomId}`;
  let named = 0;
  for (const id of nodeIds) {
    if (named > 0 && current.length + 1 + id.length > MAX_PAYLOAD) {
      out.push(current);
      current = `wake:${roomId}`;
      named = 0;
    }
    current += `\n${id}`;
    named += 1;
  }
  if (named > 0) out.push(current);
  return out;
}
/** Behind a transaction-mode pooler: how often listeners are woken to look (docs/operations.md). */
export const POOLER_POLL_MS = 500;

const MIN_RETRY_MS = 100;
const MAX_RETRY_MS = 5000;

export class ChangeFeed {
  private readonly listeners: ChangeListeners;
  private client: pg.Client | undefined;
  private connecting: Promise<void> | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private retryMs = MIN_RETRY_MS;
  private closed = false;
  private readonly dead = new WeakSet<pg.Client>();
  /** Behind a pooler: the timer that wakes every listener (no LISTEN connection). */
  private pollTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly options: PgOptions,
    private readonly onError: (e: unknown) => void,
  ) {
    this.listeners = new ChangeListeners(onError);
  }

  /**
   * `topics` absent or naming a hot one (HOT_TOPICS): the connection also LISTENs on the hot
   * path's channel while such a listener is subscribed. One that subscribes while the connection
   * is up hears each hot topic once when that LISTEN is in place, for what it may have missed.
   */
  subscribe(listener: ChangeListener, topics?: readonly ChangeTopic[]): () => void {
    this.listeners.add(listener);
    const hot = topics === undefined || topics.some((t) => HOT_TOPICS.includes(t));
    if (hot) this.hotWanters.add(listener);
    this.ensure();
    if (hot && this.client !== undefined) this.syncHot(listener);
    return () => {
      this.listeners.delete(listener);
      if (this.hotWanters.delete(listener) && this.hotWanters.size === 0) this.syncHot();
      if (this.listeners.size === 0) void this.disconnect();
    };
  }

  /** Resolves once the LISTENs are in place (tests wait on it before writing). */
  async ready(): Promise<void> {
    this.ensure();
    await this.connecting;
    await this.syncing;
  }

  /** Listeners that want the hot path's topics. */
  private readonly hotWanters = new Set<ChangeListener>();
  /** Whether the current connection LISTENs on HOT_CHANNEL. */
  private hotListening = false;
  private syncing: Promise<void> = Promise.resolve();

  /** LISTEN or UNLISTEN the hot channel as the listeners want; then catch `caughtUp` up. */
  private syncHot(caughtUp?: ChangeListener): void {
    this.syncing = this.syncing.then(async () => {
      const client = this.client;
      if (client === undefined) return;
      const want = this.hotWanters.size > 0;
      if (want !== this.hotListening) {
        try {
          await client.query(want ? `LISTEN ${HOT_CHANNEL}` : `UNLISTEN ${HOT_CHANNEL}`);
        } catch (e) {
          this.lost(client, e);
          return;
        }
        if (this.client === client) this.hotListening = want;
      }
      if (caughtUp !== undefined && this.hotWanters.has(caughtUp) && this.client === client) {
        for (const topic of HOT_TOPICS) {
          try {
            caughtUp(topic, null);
          } catch (e) {
            this.onError(e);
          }
        }
      }
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    this.listeners.clear();
    await this.disconnect();
  }

  emit(topic: ChangeTopic, roomId: string | null, nodes?: readonly string[]): void {
    this.listeners.emit(topic, roomId, nodes);
  }

  private ensure(): void {
    if (this.options.pooler === "transaction") {
      if (this.closed || this.pollTimer !== undefined || this.listeners.size === 0) return;
      this.pollTimer = setInterval(() => this.listeners.emitAll(), POOLER_POLL_MS);
      this.pollTimer.unref();
      return;
    }
    if (
      this.closed ||
      this.client !== undefined ||
      this.connecting !== undefined ||
      this.listeners.size === 0
    )
      return;
    if (this.retryTimer !== undefined) return;
    this.connecting = this.connect().finally(() => {
      this.connecting = undefined;
    });
  }

  private async connect(): Promise<void> {
    const client = new pg.Client({ ...clientConfig(this.options), application_name: "dagbot-listen" });
    client.on("notification", (msg) => {
      const payload = msg.payload ?? "";
      const at = payload.indexOf(":");
      const topic = at < 0 ? payload : payload.slice(0, at);
      if (!TOPICS.has(topic)) return;
      // A change may name nodes after the room, one per line: a wake's targets, a claim's claimer.
      const [room = "", ...nodes] = (at < 0 ? "" : payload.slice(at + 1)).split("\n");
      this.emit(topic as ChangeTopic, room === "" ? null : room, nodes.length > 0 ? nodes : undefined);
    });
    client.on("error", (e) => this.lost(client, e));
    client.on("end", () => this.lost(client, new Error("connection ended")));
    try {
      await client.connect();
      await client.query(`LISTEN ${CHANNEL}`);
      this.hotListening = false;
      if (this.hotWanters.size > 0) {
        await client.query(`LISTEN ${HOT_CHANNEL}`);
        this.hotListening = true;
      }
    } catch (e) {
      this.lost(client, e);
      return;
    }
    if (this.closed || this.listeners.size === 0) {
      await client.end().catch(() => {});
      return;
    }
    this.client = client;
    this.retryMs = MIN_RETRY_MS;
    // A hot listener that subscribed while this connection was being set up.
    this.syncHot();
    // Whatever changed before LISTEN took effect (or while the connection was down) sent no
    // notification we will ever see: wake everyone once to look.
    this.listeners.emitAll();
  }

  private lost(client: pg.Client, e: unknown): void {
    if (this.dead.has(client)) return;
    this.dead.add(client);
    if (this.client === client) this.client = undefined;
    client.end().catch(() => {});
    if (this.closed || this.listeners.size === 0) return;
    this.onError(e);
    if (this.retryTimer !== undefined) return;
    const wait = this.retryMs;
    this.retryMs = Math.min(this.retryMs * 2, MAX_RETRY_MS);
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      this.ensure();
    }, wait);
    this.retryTimer.unref();
  }

  private async disconnect(): Promise<void> {
    if (this.pollTimer !== undefined) clearInterval(this.pollTimer);
    this.pollTimer = undefined;
    if (this.retryTimer !== undefined) clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    await this.connecting;
    const client = this.client;
    this.client = undefined;
    if (client === undefined) return;
    this.dead.add(client);
    await client.end().catch(() => {});
  }
}
