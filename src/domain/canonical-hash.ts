/** Canonical JSON (sorted keys, no whitespace) and the SHA-256 content hash of a parsed DAG. */
import { createHash } from "node:crypto";
import type { ParsedDag } from "./model.js";

/**
 * JSON with object keys sorted by code unit and no whitespace, so equal values always give equal
 * text. Accepts only what JSON can say exactly: it throws on non-finite numbers, bigints,
 * functions and cyclic structures rather than hash something lossy.
 */
export function canonicalJson(value: unknown): string {
  return write(value, new Set());
}

function write(value: unknown, seen: Set<object>): string {
  if (value === null) return "null";
  switch (typeof value) {
    case "string":
    case "boolean":
      return JSON.stringify(value);
    case "number":
      if (!Number.isFinite(value)) throw new TypeError(`canonicalJson: ${value} has no JSON form`);
      return JSON.stringify(value);
    case "object":
      break;
    default:
      throw new TypeError(`canonicalJson: a ${typeof value} has no JSON form`);
  }
  if (seen.has(value)) throw new TypeError("canonicalJson: cyclic structure");
  seen.add(value);
  let out: string;
  if (Array.isArray(value)) {
    out = `[${value.map((item: unknown) => (item === undefined ? "null" : write(item, seen))).join(",")}]`;
  } else {
    const parts: string[] = [];
    for (const key of Object.keys(value).sort()) {
      const item: unknown = Object.getOwnPropertyDescriptor(value, key)?.value;
      if (item !== undefined) parts.push(`${JSON.stringify(key)}:${write(item, seen)}`);
    }
    out = `{${parts.join(",")}}`;
  }
  seen.delete(value);
  return out;
}

/** The DAG's content hash: hex SHA-256 of the canonical JSON of the parsed, defaults-filled DAG. */
export function dagHash(dag: ParsedDag): string {
  return createHash("sha256").update(canonicalJson(dag), "utf8").digest("hex");
}
