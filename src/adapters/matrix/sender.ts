/**
 * Idempotent sends to a Matrix homeserver: PUT /rooms/{room}/send/{type}/{txnId} with the caller's
 * stable transaction id, so a retry (ours, or the outbox's after a crash) returns the event already
 * sent instead of posting a second one. Rate limits are waited out; network errors and 5xx back off.
 */
import {
  ChatSendError,
  type EventId,
  type MessageSender,
  type OutgoingMessage,
  type RoomId,
} from "../../ports/chat.js";
import {
  editContent,
  MAX_REACTION_KEY_LENGTH,
  noticeContent,
  reactionContent,
  type Content,
} from "./format.js";
import { backoffMs } from "../../domain/backoff.js";

export type RetryReason = "rate_limited" | "network" | "server_error";

/** Reported before every wait, for logs and metrics (and tests, which count the 429s). */
export interface RetryEvent {
  reason: RetryReason;
  operation: string;
  /** 1 for the first retry of this kind within one send. */
  attempt: number;
  delayMs: number;
  status?: number;
  errcode?: string;
  /** Short description of the failure, e.g. "ECONNREFUSED". */
  error?: string;
}

export interface MatrixSenderOptions {
  /** e.g. http://127.0.0.1:8008 */
  homeserverUrl: string;
  /** Keep the same device across restarts: transaction ids are deduplicated per device. */
  accessToken: string;
  /** Attempts for network errors and 5xx within one send before it fails as "unavailable". Default 8. */
  maxAttempts?: number;
  /** 429 answers waited out within one send before it fails as "unavailable". Default 100. */
  maxRateLimitWaits?: number;
  /** First backoff after a network error or 5xx; doubles each time up to backoffMaxMs. Default 500. */
  backoffInitialMs?: number;
  backoffMaxMs?: number;
  /** Per-request timeout; a timed-out send is retried with the same txnId, so it cannot duplicate. */
  requestTimeoutMs?: number;
  /** Aborts pending requests and waits (shutdown); the send then rejects with the abort reason. */
  signal?: AbortSignal;
  onRetry?: (event: RetryEvent) => void;
  /**
   * Turns an event into the one to send: encrypted in an encrypted room (RoomCrypto.encryptFor via
   * the intake), unchanged elsewhere. Called once per send; retries resend the same ciphertext under
   * the same txnId, and a resend after a crash is deduplicated by the homeserver on the txnId.
   */
  encrypt?: (roomId: string, type: string, content: Content) => Promise<{ type: string; content: Content }>;
}

/** The longest wait a 429 may impose before we treat the server as unavailable instead. */
const MAX_RATE_LIMIT_WAIT_MS = 5 * 60_000;
/** Server transaction ids are opaque strings; this bounds what we put in a URL path. */
const MAX_TXN_ID_LENGTH = 255;

/** Waits ms, or rejects with the signal's reason as soon as it aborts. */
export function abortableSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** Milliseconds the server asked us to wait: retry_after_ms in the body, else the Retry-After header. */
export function retryAfterMs(
  body: Record<string, unknown>,
  header: string | null,
  now = Date.now(),
): number | null {
  const fromBody = body["retry_after_ms"];
  if (typeof fromBody === "number" && Number.isFinite(fromBody) && fromBody >= 0) return fromBody;
  if (header) {
    const seconds = Number(header);
    if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
    const date = Date.parse(header);
    if (!Number.isNaN(date)) return Math.max(0, date - now);
  }
  return null;
}

function describeNetworkError(e: unknown): string {
  const cause = (e as { cause?: { code?: unknown; message?: unknown } } | undefined)?.cause;
  if (cause && typeof cause.code === "string") return cause.code;
  if (e instanceof Error && e.name === "TimeoutError") return "timeout";
  return e instanceof Error ? e.message : String(e);
}

const enc = encodeURIComponent;

/** `p`, or a rejection with the signal's reason as soon as it aborts. */
function untilAborted<T>(p: Promise<T>, signal?: AbortSignal): Promise<T> {
  if (signal === undefined) return p;
  return new Promise<T>((resolve, reject) => {
    if (signal.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    p.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

export class MatrixSender implements MessageSender {
  private readonly base: string;
  private readonly o: Required<Omit<MatrixSenderOptions, "signal" | "onRetry" | "encrypt">> &
    Pick<MatrixSenderOptions, "signal" | "onRetry" | "encrypt">;

  constructor(options: MatrixSenderOptions) {
    this.base = options.homeserverUrl.replace(/\/+$/, "");
    this.o = {
      maxAttempts: 8,
      maxRateLimitWaits: 100,
      backoffInitialMs: 500,
      backoffMaxMs: 30_000,
      requestTimeoutMs: 30_000,
      ...options,
    };
  }

  /** Uses the homeserver and token of a matrix-bot-sdk MatrixClient (same device, same txn scope). */
  static fromClient(
    client: { homeserverUrl: string; accessToken: string },
    options: Omit<MatrixSenderOptions, "homeserverUrl" | "accessToken"> = {},
  ): MatrixSender {
    return new MatrixSender({
      ...options,
      homeserverUrl: client.homeserverUrl,
      accessToken: client.accessToken,
    });
  }

  send(roomId: RoomId, message: OutgoingMessage, txnId: string): Promise<EventId> {
    return this.sendEvent(roomId, "m.room.message", noticeContent(message), txnId);
  }

  edit(roomId: RoomId, originalEventId: EventId, message: OutgoingMessage, txnId: string): Promise<EventId> {
    return this.sendEvent(roomId, "m.room.message", editContent(originalEventId, message), txnId);
  }

  async react(roomId: RoomId, targetEventId: EventId, key: string, txnId: string): Promise<EventId | null> {
    if (key.length === 0 || key.length > MAX_REACTION_KEY_LENGTH) {
      throw new ChatSendError("rejected", `react in ${roomId}`, {
        attempts: 0,
        reason: `reaction key must be 1..${MAX_REACTION_KEY_LENGTH} characters, got ${key.length}`,
      });
    }
    try {
      return await this.sendEvent(roomId, "m.reaction", reactionContent(targetEventId, key), txnId);
    } catch (e) {
      // Synapse refuses a second identical annotation from the same sender: the reaction is there.
      if (e instanceof ChatSendError && e.details.errcode === "M_DUPLICATE_ANNOTATION") return null;
      throw e;
    }
  }

  /** Sends any event content with the given transaction id; resolves with its event id. */
  async sendEvent(roomId: RoomId, type: string, content: Content, txnId: string): Promise<EventId> {
    const operation = `send ${type} to ${roomId} (txn ${txnId})`;
    const bad = (reason: string) => new ChatSendError("rejected", operation, { attempts: 0, reason });
    if (!roomId.startsWith("!")) throw bad(`room id must start with "!", got "${roomId}"`);
    if (txnId.length === 0 || txnId.length > MAX_TXN_ID_LENGTH) {
      throw bad(`txnId must be 1..${MAX_TXN_ID_LENGTH} characters, got ${txnId.length}`);
    }
    let sent = { type, content };
    if (this.o.encrypt) {
      try {
        // Encryption waits for the crypto to be ready: a shutdown must not wait for that.
        sent = await untilAborted(this.o.encrypt(roomId, type, content), this.o.signal);
      } catch (e) {
        this.o.signal?.throwIfAborted();
        const reason = `cannot encrypt: ${e instanceof Error ? e.message : String(e)}`;
        throw new ChatSendError("unavailable", operation, { attempts: 0, reason }, { cause: e });
      }
    }
    const path = `/_matrix/client/v3/rooms/${enc(roomId)}/send/${enc(sent.type)}/${enc(txnId)}`;
    const body = await this.put(path, sent.content, operation);
    const eventId = body["event_id"];
    if (typeof eventId !== "string") {
      throw new ChatSendError("rejected", operation, { attempts: 1, reason: "response has no event_id" });
    }
    return eventId;
  }

  private backoff(failures: number): number {
    // Jitter, so several nodes that lost the homeserver together don't all come back in step.
    const policy = {
      baseMs: this.o.backoffInitialMs,
      capMs: this.o.backoffMaxMs,
      jitter: [0.8, 1.2] as const,
    };
    return backoffMs(policy, failures - 1, Math.random);
  }

  private async wait(event: RetryEvent): Promise<void> {
    this.o.onRetry?.(event);
    await abortableSleep(event.delayMs, this.o.signal);
  }

  private async put(path: string, content: Content, operation: string): Promise<Record<string, unknown>> {
    const payload = JSON.stringify(content);
    let attempts = 0;
    let failures = 0;
    let rateLimited = 0;
    for (;;) {
      this.o.signal?.throwIfAborted();
      attempts++;
      let status: number;
      let text: string;
      let retryAfterHeader: string | null;
      try {
        const timeout = AbortSignal.timeout(this.o.requestTimeoutMs);
        const res = await fetch(`${this.base}${path}`, {
          method: "PUT",
          headers: { authorization: `Bearer ${this.o.accessToken}`, "content-type": "application/json" },
          body: payload,
          signal: this.o.signal ? AbortSignal.any([this.o.signal, timeout]) : timeout,
        });
        status = res.status;
        retryAfterHeader = res.headers.get("retry-after");
        text = await res.text();
      } catch (e) {
        if (this.o.signal?.aborted) throw this.o.signal.reason;
        failures++;
        const error = describeNetworkError(e);
        if (failures >= this.o.maxAttempts) {
          throw new ChatSendError("unavailable", operation, { attempts, reason: error }, { cause: e });
        }
        await this.wait({
          reason: "network",
          operation,
          attempt: failures,
          delayMs: this.backoff(failures),
          error,
        });
        continue;
      }

      let json: Record<string, unknown> = {};
      try {
        const parsed: unknown = text ? JSON.parse(text) : {};
        if (parsed && typeof parsed === "object") json = parsed as Record<string, unknown>;
      } catch {
        // A proxy's HTML error page: the status code alone decides below.
      }
      if (status >= 200 && status < 300) return json;

      const errcode = typeof json["errcode"] === "string" ? json["errcode"] : undefined;
      const reason = typeof json["error"] === "string" ? json["error"] : undefined;
      if (status === 429) {
        rateLimited++;
        const asked = retryAfterMs(json, retryAfterHeader);
        if (rateLimited > this.o.maxRateLimitWaits || (asked ?? 0) > MAX_RATE_LIMIT_WAIT_MS) {
          throw new ChatSendError("unavailable", operation, { status, errcode, attempts, reason });
        }
        const delayMs = asked ?? this.backoff(rateLimited);
        await this.wait({
          reason: "rate_limited",
          operation,
          attempt: rateLimited,
          delayMs,
          status,
          errcode,
        });
        continue;
      }
      if (status >= 500 || status === 408) {
        failures++;
        if (failures >= this.o.maxAttempts) {
          throw new ChatSendError("unavailable", operation, { status, errcode, attempts, reason });
        }
        const delayMs = this.backoff(failures);
        await this.wait({ reason: "server_error", operation, attempt: failures, delayMs, status, errcode });
        continue;
      }
      throw new ChatSendError("rejected", operation, { status, errcode, attempts, reason });
    }
  }
}
