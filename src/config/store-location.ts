/** Where the shared store lives: `sqlite:PATH` (one host) or a `postgres://` URL (several hosts). */

export type StoreLocation = { kind: "sqlite"; path: string } | { kind: "postgres"; url: string };

export const DEFAULT_STORE = "sqlite:./data/dagbot.db";

const STORE_HINT = 'use "sqlite:PATH" (like "sqlite:./data/dagbot.db") or a postgres://user@host/db URL';

/**
 * Parses a store string. Messages never repeat the input, which may hold a password. A relative
 * SQLite path is relative to the working directory of the process, like every other path on the command line.
 */
export function parseStoreLocation(
  text: string,
): { ok: true; store: StoreLocation } | { ok: false; message: string } {
  if (text.startsWith("sqlite:")) {
    const path = text.slice("sqlite:".length);
    if (path.trim() === "") return { ok: false, message: `sqlite: needs a file path; ${STORE_HINT}` };
    if (path.includes("\0")) return { ok: false, message: "the SQLite path contains a NUL byte" };
    return { ok: true, store: { kind: "sqlite", path } };
  }
  if (/^postgres(ql)?:\/\//.test(text)) {
    let url: URL;
    try {
      url = new URL(text);
    } catch {
      return { ok: false, message: `is not a valid postgres:// URL; ${STORE_HINT}` };
    }
    if (url.hostname === "") return { ok: false, message: "the postgres:// URL needs a host" };
    return { ok: true, store: { kind: "postgres", url: text } };
  }
  return {
    ok: false,
    message: 'must be "sqlite:PATH" (like "sqlite:./data/dagbot.db") or a postgres:// URL',
  };
}

export const REDACTED = "[redacted]";

/** The store as a string safe for logs and screens: a PostgreSQL password (in userinfo or query) is replaced. */
export function describeStoreLocation(store: StoreLocation): string {
  if (store.kind === "sqlite") return `sqlite:${store.path}`;
  return redactPostgresUrl(store.url);
}

export function redactPostgresUrl(text: string): string {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return REDACTED;
  }
  const user = url.username === "" ? "" : url.username;
  const auth = url.password !== "" ? `${user}:${REDACTED}@` : user !== "" ? `${user}@` : "";
  const params = new URLSearchParams(url.search);
  const query = [...params.entries()]
    .map(
      ([key, value]) => `${key}=${/pass|secret|token|key/i.test(key) ? REDACTED : encodeURIComponent(value)}`,
    )
    .join("&");
  return `${url.protocol}//${auth}${url.host}${url.pathname}${query === "" ? "" : `?${query}`}${url.hash}`;
}
