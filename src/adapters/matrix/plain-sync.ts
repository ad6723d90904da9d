/**
 * The `/sync` long poll of a node whose rooms are all in the clear, without matrix-bot-sdk (whose
 * index is about 46 MB of resident memory; issue 17). It does what the SDK's loop did for the
 * intake: the filter is created once and kept in the state file (a new filter starts the sync
 * afresh, as the SDK does), each batch is handed to `processSync` and the token is saved only after
 * it returns, and a failed request or batch is retried after 5-15 s from the same token. Unlike the
 * SDK's, a stop aborts the long poll at once.
 */
import type { Logger } from "../../ports/logger.js";
import { enc, type MatrixHttp } from "./http.js";
import type { SyncStateFile } from "./sync-state-file.js";

/** The server holds a sync open this long when there is nothing new (the SDK's syncingTimeout). */
const LONG_POLL_MS = 30_000;
/** A request's own limit: the long poll plus a margin; a first sync (no token) may take long. */
const REQUEST_TIMEOUT_MS = 40_000;
const FIRST_SYNC_TIMEOUT_MS = 600_000;
/** The SDK's backoff after a failed sync, kept: 5 to 15 s. */
const BACKOFF_MIN_MS = 5_000;
const BACKOFF_MAX_MS = 15_000;

export interface PlainSyncOptions {
  http: MatrixHttp;
  userId: string;
  storage: SyncStateFile;
  logger: Logger;
  /** One batch; resolves once it is stored (the token is saved after). */
  processSync: (raw: Record<string, unknown>) => Promise<void>;
}

export class PlainSync {
  private readonly stopping = new AbortController();

  constructor(private readonly o: PlainSyncOptions) {}

  /** Creates or reuses the filter and starts the loop; resolves once the loop runs. */
  async start(filter: Record<string, unknown>): Promise<void> {
    const filterId = await this.filterId(filter);
    void this.loop(filterId);
  }

  /** Ends the loop; a long poll in flight is aborted and its batch not processed. */
  stop(): void {
    this.stopping.abort();
  }

  private async filterId(filter: Record<string, unknown>): Promise<string> {
    const existing = this.o.storage.getFilter() as { id?: unknown; filter?: unknown } | null;
    if (
      existing &&
      typeof existing.id === "string" &&
      JSON.stringify(existing.filter) === JSON.stringify(filter)
    ) {
      return existing.id;
    }
    const res = await this.o.http.request("POST", `/_matrix/client/v3/user/${enc(this.o.userId)}/filter`, {
      body: filter,
    });
    const id = String(res["filter_id"]);
    // A new filter: the old position's batches were read with another one, so start afresh.
    this.o.storage.setSyncToken(null);
    this.o.storage.setFilter({ id, filter } as never);
    return id;
  }

  private async loop(filterId: string): Promise<void> {
    const signal = this.stopping.signal;
    while (!signal.aborted) {
      const token = this.o.storage.getSyncToken();
      try {
        const res = await this.o.http.request("GET", "/_matrix/client/v3/sync", {
          query: { full_state: "false", timeout: LONG_POLL_MS, filter: filterId, since: token ?? undefined },
          timeoutMs: token === null ? FIRST_SYNC_TIMEOUT_MS : REQUEST_TIMEOUT_MS,
          signal,
        });
        if (signal.aborted) return;
        await this.o.processSync(res);
        if (signal.aborted) return;
        if (typeof res["next_batch"] === "string") this.o.storage.setSyncToken(res["next_batch"]);
      } catch (e) {
        if (signal.aborted) return;
        const delay = BACKOFF_MIN_MS + Math.random() * (BACKOFF_MAX_MS - BACKOFF_MIN_MS);
        this.o.logger.warn({ err: String(e), retryInMs: Math.round(delay) }, "sync failed");
        await new Promise<void>((resolve) => {
          const timer = setTimeout(done, delay);
          function done(): void {
            clearTimeout(timer);
            signal.removeEventListener("abort", done);
            resolve();
          }
          signal.addEventListener("abort", done, { once: true });
        });
      }
    }
  }
}
