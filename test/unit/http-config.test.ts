// The [http] section's hardening keys: tokens limited to rooms of the node, the
// connection cap and the timeouts, their defaults and their checks, each problem named by its path.
import { describe, expect, it } from "vitest";
import { formatConfigIssues, parseConfig } from "../../src/config/load-config.js";

const HASH = "a".repeat(64);
const matrix = {
  homeserver_url: "https://matrix.example.org",
  user_id: "@bot:example.org",
  access_token: "secret-token",
  rooms: ["!a:example.org", "!b:example.org"],
};

function load(http: Record<string, unknown>, withMatrix = true) {
  return parseConfig(
    { node_id: "n1", ...(withMatrix ? { matrix } : {}), http: { listen: "127.0.0.1:8080", ...http } },
    { env: {} },
  );
}

describe("[http] hardening keys", () => {
  it("has safe defaults", () => {
    const r = load({ tokens: [{ name: "ci", sha256: HASH, level: "read" }] });
    expect(r.ok && r.config.http).toMatchObject({
      maxConnections: 512,
      headerTimeoutMs: 10_000,
      requestTimeoutMs: 30_000,
      keepAliveTimeoutMs: 5_000,
    });
    expect(r.ok && r.config.http?.tokens[0]?.rooms).toBeUndefined();
  });

  it("limits a token to rooms of the node", () => {
    const r = load({
      tokens: [{ name: "ci", sha256: HASH, level: "operate", rooms: ["!a:example.org"] }],
      max_connections: 64,
      max_streams: 10,
      header_timeout: "2s",
      request_timeout: "20s",
      keep_alive_timeout: "65s",
    });
    expect(r.ok, r.ok ? "" : formatConfigIssues(r.issues)).toBe(true);
    expect(r.ok && r.config.http).toMatchObject({
      tokens: [{ name: "ci", level: "operate", rooms: ["!a:example.org"] }],
      maxConnections: 64,
      headerTimeoutMs: 2_000,
      requestTimeoutMs: 20_000,
      keepAliveTimeoutMs: 65_000,
    });
    const local = load({ tokens: [{ name: "ci", sha256: HASH, level: "read", rooms: ["local"] }] }, false);
    expect(local.ok).toBe(true);
  });

  it("refuses a room the node does not serve, an empty list, a cap under max_streams and a header timeout over the request's", () => {
    const issues = (http: Record<string, unknown>): string => {
      const r = load(http);
      return r.ok ? "" : formatConfigIssues(r.issues);
    };
    const token = { name: "ci", sha256: HASH, level: "read" };
    expect(issues({ tokens: [{ ...token, rooms: ["!a:example.org", "!typo:example.org"] }] })).toBe(
      "http.tokens[0].rooms[1]: is not one of this node's rooms (!a:example.org, !b:example.org)",
    );
    expect(issues({ tokens: [{ ...token, rooms: [] }] })).toBe(
      "http.tokens[0].rooms: must name at least one room (leave rooms out for every room)",
    );
    expect(issues({ tokens: [token], max_connections: 100, max_streams: 100, header_timeout: "40s" })).toBe(
      [
        "http.max_connections: must be larger than http.max_streams (every event stream holds a connection)",
        "http.header_timeout: must be at most http.request_timeout (the headers are part of the request)",
      ].join("\n"),
    );
    const typo = load({ tokens: [{ name: "ci", sha256: HASH, level: "read", room: ["!a:example.org"] }] });
    expect(typo.ok ? "" : formatConfigIssues(typo.issues)).toBe(
      'http.tokens[0].room: unknown key (did you mean "rooms"?)',
    );
  });
});
