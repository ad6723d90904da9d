/**
 * The `/sync` long poll of a node whose rooms are all in the clear, without matrix-bot-sdk (whose
 * index is about 46 MB of resident memory). It does what the SDK's loop did for the
 * intake: the filter is created once and kept in the state file (a new filter starts the sync
 * afresh, as the SDK does), each batch is handed to `processSync` and the token is saved only after
 * it returns, and a failed request or batch is retried after 5-15 s from the same token. Unlike the
 * SDK's, a stop aborts the long poll at once. The homeserver is semi-trusted: an answer without
 * next_batch is a failure, not a batch; a 429 waits its retry_after_ms (capped); a refused token is
 * reported once per outage as an error; a refused filter or position (400/404: a hand-edited state
 * file, a reset server) starts afresh with a new filter; an answer at once that does not move the
 * position is waited out, so that no answer makes the loop spin.
 */
import type { Logger } from "../../ports/logger.js";
import { enc, MatrixRequestError, type MatrixHttp } from "./http.js";
import type { SyncStateFile } from "./sync-state-file.js";

/** The server holds a sync open this long when there is nothing new (the SDK's syncingTimeout). */
const LONG_POLL_MS = 30_000;
/** A request's own limit: the long poll plus a margin; a first sync (no token) may take long. */
const REQUEST_TIMEOUT_MS = 40_000;
const FIRST_SYNC_TIMEOUT_MS = 600_000;
/** The SDK's backoff after a failed sync, kept: 5 to 15 s. */
const BACKOFF_MIN_MS = 5_000;
const BACKOFF_MAX_MS = 15_000;
/** A 429's retry_after_ms is honoured up to this (a semi-trusted server must not park the node for days). */
const MIN_RETRY_AFTER_MS = 1_000;
const MAX_RETRY_AFTER_MS = 300_000;
/**
 * A sync that comes back this fast without moving the position did not wait as a long poll does:
 * the loop waits as after a failure instead of asking again at once (a server answering so must not
 * make the node spin).
 */
const NO_PROGRESS_MS = 1_000;

export interface PlainSyncOptions {
  http: MatrixHttp;
  userId: string;
  storage: SyncStateFile;
  logger: Logger;
  /** One batch; resolves once it is stored (the token is saved after). */
  processSync: (raw: Record<string, unknown>) => Promise<void>;
  now?: () => number;
}

/** The homeserver's answer is not a sync batch (no next_batch): nothing of it is processed. */
export class BadSyncResponseError extends Error {
  override readonly name = "BadSyncResponseError";
}

export class PlainSync {
  private readonly stopping = new AbortController();
  private readonly now: () => number;
  /** Set while the homeserver refuses the access token, so that it is reported once per outage. */
  private tokenRejected = false;

  constructor(private readonly o: PlainSyncOptions) {
    this.now = o.now ?? Date.now;
  }

  /** Creates or reuses the filter and starts the loop; resolves once the loop runs. */
  async start(filter: Record<string, unknown>): Promise<void> {
    const filterId = await this.filterId(filter);
    void this.loop(filter, filterId);
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
      existing.id !== "" &&
      JSON.stringify(existing.filter) === JSON.stringify(filter)
    ) {
      return existing.id;
    }
    const res = await this.o.http.request("POST", `/_matrix/client/v3/user/${enc(this.o.userId)}/filter`, {
      body: filter,
      signal: this.stopping.signal,
    });
    const id = res["filter_id"];
    if (typeof id !== "string" || id === "") {
      throw new BadSyncResponseError(`the homeserver answered a new filter without a filter_id`);
    }
    // A new filter: the old position's batches were read with another one, so start afresh.
    this.o.storage.setSyncToken(null);
    this.o.storage.setFilter({ id, filter } as never);
    return id;
  }

  private async loop(filter: Record<string, unknown>, firstFilterId: string): Promise<void> {
    const signal = this.stopping.signal;
    let filterId: string | null = firstFilterId;
    while (!signal.aborted) {
      let delay: number;
      try {
        filterId ??= await this.filterId(filter);
        const token = this.o.storage.getSyncToken();
        const startedAt = this.now();
        const res = await this.o.http.request("GET", "/_matrix/client/v3/sync", {
          query: { full_state: "false", timeout: LONG_POLL_MS, filter: filterId, since: token ?? undefined },
          timeoutMs: token === null ? FIRST_SYNC_TIMEOUT_MS : REQUEST_TIMEOUT_MS,
          signal,
        });
        if (signal.aborted) return;
        const next = res["next_batch"];
        if (typeof next !== "string" || next === "") {
          throw new BadSyncResponseError("the homeserver's sync answer has no next_batch");
        }
        if (this.tokenRejected) this.o.logger.info("the homeserver accepts the access token again");
        this.tokenRejected = false;
        await this.o.processSync(res);
        if (signal.aborted) return;
        this.o.storage.setSyncToken(next);
        if (next !== token || this.now() - startedAt >= NO_PROGRESS_MS) continue;
        delay = backoff();
        this.o.logger.warn({ retryInMs: Math.round(delay) }, "sync answered at once without moving on");
      } catch (e) {
        if (signal.aborted) return;
        delay = this.onFailure(e);
        if (e instanceof MatrixRequestError && isBadPosition(e)) filterId = null;
      }
      await sleep(delay, signal);
    }
  }

  /** Reports a failed sync and says how long to wait before the next. */
  private onFailure(e: unknown): number {
    if (e instanceof MatrixRequestError && e.status === 429) {
      // At least a second: a homeserver answering 429 with retry_after_ms 0 must not make a hot loop.
      const delay = Math.min(Math.max(e.retryAfterMs ?? backoff(), MIN_RETRY_AFTER_MS), MAX_RETRY_AFTER_MS);
      this.o.logger.warn({ retryInMs: Math.round(delay) }, "sync rate-limited by the homeserver");
      return delay;
    }
    const delay = backoff();
    if (e instanceof MatrixRequestError && e.status === 401) {
      // M_UNKNOWN_TOKEN: the account was logged out (soft_logout: the token expired or was
      // invalidated). Retrying cannot fix it, but a homeserver's passing confusion can; the person
      // running the node has to know either way.
      if (!this.tokenRejected) {
        this.o.logger.error(
          { err: e.message, softLogout: e.softLogout, retryInMs: Math.round(delay) },
          e.softLogout
            ? "the homeserver logged this bot out (soft logout): log in again and set matrix.access_token; sync retries"
            : "the homeserver rejects the access token: set a valid matrix.access_token; sync retries",
        );
      }
      this.tokenRejected = true;
      return delay;
    }
    if (e instanceof MatrixRequestError && isBadPosition(e)) {
      // The stored filter or token is not one the homeserver knows (a hand-edited state file, a
      // homeserver reset): start afresh with a new filter; the inbox dedupes what comes again and
      // the first batch's gap is backfilled.
      this.o.logger.warn(
        { err: e.message, retryInMs: Math.round(delay) },
        "the homeserver refuses the stored sync position or filter: syncing afresh",
      );
      try {
        this.o.storage.setSyncToken(null);
        this.o.storage.setFilter(null as never);
      } catch (writeError) {
        // The state file could not be written (disk full, permissions): say so and keep syncing;
        // the loop must not end on it, or intake would stop for good.
        this.o.logger.error({ err: String(writeError) }, "could not reset the stored sync position");
      }
      return delay;
    }
    this.o.logger.warn({ err: String(e), retryInMs: Math.round(delay) }, "sync failed");
    return delay;
  }
}

/**
 * 400 or 404 with a Matrix error code: the request's filter or since token is refused
 * (M_INVALID_PARAM, M_NOT_FOUND, M_UNKNOWN). A bare 400/404 (a proxy's error page while the
 * homeserver restarts) is an ordinary failure: the position is kept.
 */
const isBadPosition = (e: MatrixRequestError): boolean =>
  e.errcode !== undefined && (e.status === 400 || e.status === 404);

const backoff = (): number => BACKOFF_MIN_MS + Math.random() * (BACKOFF_MAX_MS - BACKOFF_MIN_MS);

/** Waits `ms`, or less when `signal` aborts. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}
