/**
 * The PostgreSQL change feed: one dedicated connection LISTENs on the `dagbot` channel, which every
 * writing transaction NOTIFYs (delivered at commit). Connected only while someone listens; after a
 * lost connection it reconnects with backoff and wakes every listener once, since notifications
 * sent while it was away are gone.
 */
import pg from "pg";
import type { ChangeTopic } from "../../ports/store.js";
import type { PgOptions } from "./db.js";
import { clientConfig } from "./db.js";
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

  constructor(
    private readonly options: PgOptions,
    private readonly onError: (e: unknown) => void,
  ) {
    this.listeners = new ChangeListeners(onError);
  }

  subscribe(listener: ChangeListener): () => void {
    this.listeners.add(listener);
    this.ensure();
    return () => {
      this.listeners.delete(listener);
      if (this.listeners.size === 0) void this.disconnect();
    };
  }

  /** Resolves once the LISTEN is in place (tests wait on it before writing). */
  async ready(): Promise<void> {
    this.ensure();
    await this.connecting;
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
      await client.query("LISTEN dagbot");
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
