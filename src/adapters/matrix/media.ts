/**
 * Uploads to the homeserver's media repository (POST /_matrix/media/v3/upload) for `!dag graph`.
 * Rate limits, 5xx and network errors are retried a few times; what is left becomes a ChatSendError
 * (a 413 as failure "rejected" with its status, so the bot can say the picture was too large).
 */
import type { MediaUploader } from "../../ports/chat.js";
import { ChatSendError } from "../../ports/chat.js";
import type { Backoff } from "../../domain/backoff.js";
import { backoffMs } from "../../domain/backoff.js";

/** An upload retried after a network error or 5xx/429: 500 ms doubling (the attempts are few). */
const UPLOAD_BACKOFF: Backoff = { baseMs: 500, capMs: Number.POSITIVE_INFINITY };

export interface MatrixMediaOptions {
  homeserverUrl: string;
  accessToken: string;
  signal?: AbortSignal;
  /** Attempts before giving up on retryable failures. Default 3. */
  attempts?: number;
  /** Per attempt. Default 30 s. */
  timeoutMs?: number;
}

const sleep = (ms: number, signal?: AbortSignal): Promise<void> =>
  new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve();
    });
  });

export class MatrixMediaUploader implements MediaUploader {
  private readonly base: string;

  constructor(private readonly options: MatrixMediaOptions) {
    this.base = options.homeserverUrl.replace(/\/+$/, "");
  }

  async upload(data: Uint8Array, mimetype: string, filename: string): Promise<string> {
    const attempts = this.options.attempts ?? 3;
    const operation = `upload ${filename} (${data.byteLength} bytes)`;
    let last: { status?: number; errcode?: string; reason?: string } = {};
    for (let attempt = 1; attempt <= attempts; attempt++) {
      let res: Response;
      try {
        res = await fetch(`${this.base}/_matrix/media/v3/upload?filename=${encodeURIComponent(filename)}`, {
          method: "POST",
          headers: { authorization: `Bearer ${this.options.accessToken}`, "content-type": mimetype },
          body: data,
          signal: AbortSignal.any([
            AbortSignal.timeout(this.options.timeoutMs ?? 30_000),
            ...(this.options.signal ? [this.options.signal] : []),
          ]),
        });
      } catch (err) {
        last = { reason: err instanceof Error ? err.message : String(err) };
        if (this.options.signal?.aborted) break;
        await sleep(backoffMs(UPLOAD_BACKOFF, attempt - 1), this.options.signal);
        continue;
      }
      const text = await res.text();
      let json: Record<string, unknown> = {};
      try {
        const parsed: unknown = text === "" ? {} : JSON.parse(text);
        if (parsed !== null && typeof parsed === "object") json = parsed as Record<string, unknown>;
      } catch {
        // A proxy's HTML page (a 413 from nginx, typically): the status decides.
      }
      if (res.ok && typeof json["content_uri"] === "string") return json["content_uri"];
      last = {
        status: res.status,
        ...(typeof json["errcode"] === "string" ? { errcode: json["errcode"] } : {}),
        ...(typeof json["error"] === "string" ? { reason: json["error"] } : {}),
      };
      if (res.ok)
        throw new ChatSendError("rejected", operation, {
          ...last,
          attempts: attempt,
          reason: "no content_uri",
        });
      if (res.status !== 429 && res.status < 500) {
        throw new ChatSendError("rejected", operation, { ...last, attempts: attempt });
      }
      const retryAfter =
        typeof json["retry_after_ms"] === "number"
          ? json["retry_after_ms"]
          : backoffMs(UPLOAD_BACKOFF, attempt);
      if (attempt < attempts) await sleep(Math.min(retryAfter, 10_000), this.options.signal);
    }
    throw new ChatSendError("unavailable", operation, { ...last, attempts });
  }
}
