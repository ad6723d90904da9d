/**
 * Bearer tokens of the HTTP API: the config holds each token's SHA-256 (never the token), a caller's
 * token is hashed, its hash looked up among the configured ones and confirmed in constant time, and
 * the match gives the token's name (the sender of its commands), level and rooms. The token itself is
 * never stored or logged.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import type { HttpToken, HttpTokenLevel } from "../../config/node-config.js";

export interface Caller {
  /** The configured token's name: commands are sent as `http:<name>`. */
  name: string;
  level: HttpTokenLevel;
  /** The only rooms the token may use; absent: every room of the node. */
  rooms?: readonly string[];
  /** An edge token's node: the only node id its /v1/edge/ calls may speak for. */
  node?: string;
  /** An edge token's labels: the only ones its offers and heartbeats may name; absent: any. */
  labels?: readonly string[];
  /** An edge token's actions: the only ones its offers and heartbeats may name; absent: any. */
  actions?: readonly string[];
}

export function sha256Hex(text: string): string {
  return createHash("sha256").update(text, "utf8").digest("hex");
}

/** A bearer token longer than this is refused unhashed: hashing megabytes per request is a cheap attack. */
const MAX_TOKEN_CHARS = 512;

export function tokenVerifier(
  tokens: readonly HttpToken[],
): (authorization: string | undefined) => Caller | null {
  // By the hash, the first entry of a hash configured twice. A lookup keyed by the presented token's
  // SHA-256 costs the same for any size of table (a core with 1,000 edge tokens compared each
  // request's hash 1,000 times), and what its timing could tell is about the digest of the token the
  // caller sent, which the caller knows already: nothing of a configured token without a preimage
  // of its hash. The one candidate is still compared in constant time.
  const known = new Map<string, { caller: Caller; hash: Buffer }>();
  for (const t of tokens) {
    const hash = Buffer.from(t.sha256, "hex");
    const key = hash.toString("hex");
    if (known.has(key)) continue;
    known.set(key, {
      caller: {
        name: t.name,
        level: t.level,
        ...(t.rooms === undefined ? {} : { rooms: t.rooms }),
        ...(t.node === undefined ? {} : { node: t.node }),
        ...(t.labels === undefined ? {} : { labels: t.labels }),
        ...(t.actions === undefined ? {} : { actions: t.actions }),
      },
      hash,
    });
  }
  return (authorization) => {
    if (authorization === undefined) return null;
    const match = /^Bearer +([\x21-\x7e]+) *$/i.exec(authorization);
    const token = match?.[1];
    if (token === undefined || token.length > MAX_TOKEN_CHARS) return null;
    const hash = createHash("sha256").update(token, "utf8").digest();
    const k = known.get(hash.toString("hex"));
    return k !== undefined && k.hash.length === hash.length && timingSafeEqual(hash, k.hash)
      ? { ...k.caller }
      : null;
  };
}

/**
 * Whether a token of `level` may call a route that needs `needed`. An edge token calls the /v1/edge/
 * routes and nothing else, and only an edge token calls them (docs/security.md, edge tokens).
 */
export function allows(level: HttpTokenLevel, needed: HttpTokenLevel): boolean {
  if (level === "edge" || needed === "edge") return level === needed;
  return needed === "read" || level === "operate";
}

/** Whether an edge caller may speak for the session of `nodeId`: its token names that node. */
export function maySpeakFor(caller: Caller, nodeId: string): boolean {
  return caller.level === "edge" && caller.node === nodeId;
}

/**
 * What an edge caller's offer or heartbeat names beyond its token's scope (`labels`, `actions`), as
 * words for a 403; null when all of it is within. A token without a list allows any of that kind.
 */
export function beyondScope(
  caller: Caller,
  named: { labels: readonly string[]; actions: readonly string[] },
): string | null {
  for (const kind of ["labels", "actions"] as const) {
    const allowed = caller[kind];
    if (allowed === undefined) continue;
    const extra = named[kind].find((name) => !allowed.includes(name));
    if (extra !== undefined)
      return `this token may not name ${kind === "labels" ? "label" : "action"} "${extra}" (its ${kind}: ${
        allowed.length === 0 ? "none" : allowed.join(", ")
      })`;
  }
  return null;
}

/** Whether the caller's token may read or act on the room. */
export function mayUseRoom(caller: Caller, roomId: string): boolean {
  return caller.rooms === undefined || caller.rooms.includes(roomId);
}
