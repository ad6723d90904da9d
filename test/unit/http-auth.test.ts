// Bearer tokens of the HTTP API: matched by their SHA-256 against the config, levels, malformed headers.
import { describe, expect, it } from "vitest";
import { allows, sha256Hex, tokenVerifier } from "../../src/adapters/http/auth.js";

const ops = "operate-token-0123456789abcdef";
const viewer = "read-token-0123456789abcdef";
const verify = tokenVerifier([
  { name: "ops", sha256: sha256Hex(ops), level: "operate" },
  { name: "viewer", sha256: sha256Hex(viewer), level: "read" },
]);

describe("tokenVerifier", () => {
  it("finds the caller whose configured hash is the token's", () => {
    expect(verify(`Bearer ${ops}`)).toEqual({ name: "ops", level: "operate" });
    expect(verify(`bearer ${viewer}`)).toEqual({ name: "viewer", level: "read" });
  });

  it("refuses a missing, wrong, hashed or malformed credential", () => {
    for (const header of [
      undefined,
      "",
      "Bearer",
      `Bearer ${ops}x`,
      `Bearer ${sha256Hex(ops)}`,
      `Basic ${Buffer.from(`u:${ops}`).toString("base64")}`,
      `Bearer ${ops} extra`,
      `Bearer ${"a".repeat(10_000)}`,
      `Bearer ${ops}\u0000`,
    ]) {
      expect(verify(header), String(header).slice(0, 40)).toBeNull();
    }
  });

  it("finds a caller among many tokens, the first of a hash configured twice, whatever the hex case", () => {
    const edges = Array.from({ length: 1000 }, (_, i) => ({
      name: `edge-${i}`,
      sha256: i % 2 === 0 ? sha256Hex(`edge-token-${i}`) : sha256Hex(`edge-token-${i}`).toUpperCase(),
      level: "edge" as const,
      node: `edge-${i}`,
    }));
    const many = tokenVerifier([
      ...edges,
      { name: "again", sha256: sha256Hex("edge-token-7"), level: "operate" },
    ]);
    expect(many("Bearer edge-token-7")).toEqual({ name: "edge-7", level: "edge", node: "edge-7" });
    expect(many("Bearer edge-token-998")).toEqual({ name: "edge-998", level: "edge", node: "edge-998" });
    expect(many("Bearer edge-token-1000")).toBeNull();
  });

  it("gives read tokens the reads only", () => {
    expect(allows("read", "read")).toBe(true);
    expect(allows("read", "operate")).toBe(false);
    expect(allows("operate", "operate")).toBe(true);
    expect(allows("operate", "read")).toBe(true);
  });
});
