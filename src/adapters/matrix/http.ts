/**
 * Plain Client-Server API requests for what intake and the permission oracle ask the homeserver
 * directly (state, /messages, joins), without matrix-bot-sdk's request logging: an expected 404
 * (a room without an encryption state event) is an answer here, not an error to log.
 */

export class MatrixRequestError extends Error {
  override readonly name = "MatrixRequestError";
  constructor(
    readonly operation: string,
    readonly status: number,
    readonly errcode: string | undefined,
    reason: string | undefined,
    /** A 429's retry_after_ms, as the server said it (a number >= 0), else undefined. */
    readonly retryAfterMs?: number,
    /** A 401's soft_logout flag. */
    readonly softLogout = false,
  ) {
    super(`${operation}: HTTP ${status}${errcode ? ` ${errcode}` : ""}${reason ? `: ${reason}` : ""}`);
  }
}

export interface MatrixHttp {
  /** Resolves with the JSON body of a 2xx answer; throws MatrixRequestError otherwise (network errors as they come). */
  request(
    method: string,
    path: string,
    options?: {
      body?: unknown;
      query?: Record<string, string | number | undefined>;
      timeoutMs?: number;
      signal?: AbortSignal;
    },
  ): Promise<Record<string, unknown>>;
}

export function matrixHttp(homeserverUrl: string, accessToken: string): MatrixHttp {
  const base = homeserverUrl.replace(/\/+$/, "");
  return {
    async request(method, path, options = {}) {
      const query = Object.entries(options.query ?? {})
        .filter((entry): entry is [string, string | number] => entry[1] !== undefined)
        .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`)
        .join("&");
      const res = await fetch(`${base}${path}${query === "" ? "" : `?${query}`}`, {
        method,
        headers: { authorization: `Bearer ${accessToken}`, "content-type": "application/json" },
        body: options.body === undefined ? undefined : JSON.stringify(options.body),
        signal: AbortSignal.any([
          AbortSignal.timeout(options.timeoutMs ?? 30_000),
          ...(options.signal ? [options.signal] : []),
        ]),
      });
      const text = await readCapped(res, `${method} ${path.split("?")[0]}`);
      let json: Record<string, unknown> = {};
      try {
        const parsed: unknown = text === "" ? {} : JSON.parse(text);
        if (parsed !== null && typeof parsed === "object") json = parsed as Record<string, unknown>;
      } catch {
        // A proxy's HTML error page: the status decides.
      }
      if (!res.ok) {
        const errcode = typeof json["errcode"] === "string" ? json["errcode"] : undefined;
        const reason = typeof json["error"] === "string" ? json["error"] : undefined;
        const retryAfter = json["retry_after_ms"];
        throw new MatrixRequestError(
          `${method} ${path.split("?")[0]}`,
          res.status,
          errcode,
          reason,
          typeof retryAfter === "number" && Number.isFinite(retryAfter) && retryAfter >= 0
            ? retryAfter
            : undefined,
          json["soft_logout"] === true,
        );
      }
      return json;
    },
  };
}

/**
 * The most of an answer that is read. The homeserver is semi-trusted: an endless or huge body must
 * not take the node's memory. What intake asks for is far smaller (a sync with its filter, a page
 * of 100 events of at most 64 KiB each).
 */
export const MAX_RESPONSE_BYTES = 64 * 1024 * 1024;

/** The homeserver's answer is larger than MAX_RESPONSE_BYTES; it was not read further. */
export class ResponseTooLargeError extends Error {
  override readonly name = "ResponseTooLargeError";
}

async function readCapped(res: Response, operation: string): Promise<string> {
  const declared = Number(res.headers.get("content-length"));
  if (Number.isFinite(declared) && declared > MAX_RESPONSE_BYTES) {
    await res.body?.cancel();
    throw new ResponseTooLargeError(
      `${operation}: the answer is ${declared} bytes, over ${MAX_RESPONSE_BYTES}`,
    );
  }
  if (res.body === null) return "";
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of res.body) {
    size += chunk.byteLength;
    if (size > MAX_RESPONSE_BYTES) {
      // Leaving the for-await cancels the stream (its iterator's return()).
      throw new ResponseTooLargeError(`${operation}: the answer is over ${MAX_RESPONSE_BYTES} bytes`);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString("utf8");
}

export const enc = encodeURIComponent;

export const isNotFound = (e: unknown): boolean => e instanceof MatrixRequestError && e.status === 404;
