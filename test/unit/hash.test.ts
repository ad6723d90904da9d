// The canonical JSON and content hash: stable under key order, whitespace, JSON↔TOML and spelled-out
// defaults; different content gives a different hash; the hash of an example is pinned.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import fc from "fast-check";
import { stringify as toToml } from "smol-toml";
import { describe, expect, it } from "vitest";
import { canonicalJson, dagHash } from "../../src/domain/canonical-hash.js";
import type { ParseDagResult } from "../../src/domain/dag.js";
import { formatIssue, parseDag } from "../../src/domain/dag.js";

type Doc = Record<string, unknown> & { tasks: Record<string, unknown>[] };

function hashOf(result: ParseDagResult): string {
  if (!result.ok) throw new Error(result.issues.map(formatIssue).join("\n"));
  return result.hash;
}

const id = fc.stringMatching(/^[A-Za-z0-9_.-]{1,12}$/);
const argName = fc.stringMatching(/^[A-Za-z_][A-Za-z0-9_]{0,11}$/);
const argValue = fc.oneof(
  fc.string({ maxLength: 16 }),
  fc.integer({ min: -1_000_000, max: 1_000_000 }),
  fc.boolean(),
  fc.double({ min: -1e6, max: 1e6, noNaN: true, noDefaultInfinity: true }),
);
const duration = fc.constantFrom("500ms", "30s", "10m", "1h", "1h30m", "2d");

/** A random valid document as a plain object, optional keys present or not. */
const anyDoc: fc.Arbitrary<Doc> = fc
  .record(
    {
      id,
      description: fc.string({ maxLength: 40 }),
      max_parallel: fc.integer({ min: 1, max: 50 }),
      tasks: fc.uniqueArray(id, { minLength: 1, maxLength: 6 }).chain((ids) =>
        fc.tuple(
          ...ids.map((taskId, i) =>
            fc.record(
              {
                id: fc.constant(taskId),
                action: fc.constantFrom("echo", "sleep", "fail"),
                args: fc.dictionary(
                  argName.filter((k) => !["__proto__", "constructor", "prototype"].includes(k)),
                  argValue,
                  {
                    maxKeys: 3,
                  },
                ),
                needs: fc.subarray(ids.slice(0, i)),
                on: fc.record(
                  { labels: fc.uniqueArray(id, { maxLength: 2 }), node: id },
                  { requiredKeys: [] },
                ),
                timeout: duration,
                queue_timeout: duration,
                retry_backoff: duration,
                retries: fc.integer({ min: 0, max: 10 }),
                concurrency_key: id,
                priority: fc.integer({ min: -1000, max: 1000 }),
              },
              { requiredKeys: ["id", "action"] },
            ),
          ),
        ),
      ),
    },
    { requiredKeys: ["id", "tasks"] },
  )
  .map((doc) => doc as Doc);

/** The same value with every table's keys in an order chosen by `seed`. */
function reorderKeys(value: unknown, seed: number): unknown {
  if (Array.isArray(value)) return value.map((item) => reorderKeys(item, seed));
  if (typeof value !== "object" || value === null) return value;
  const score = (key: string) =>
    [...key].reduce((h, ch) => (h * 31 + ch.charCodeAt(0) + seed) % 1_000_003, seed);
  const keys = Object.keys(value).sort((a, b) => score(a) - score(b) || (a < b ? -1 : 1));
  return Object.fromEntries(
    keys.map((key) => [key, reorderKeys((value as Record<string, unknown>)[key], seed)]),
  );
}

/** The same document with every default written out. */
function spellOutDefaults(doc: Doc): Doc {
  return {
    ...doc,
    tasks: doc.tasks.map((task) => ({
      args: {},
      needs: [],
      retries: 0,
      priority: 0,
      retry_backoff: "1000ms",
      ...task,
      on: { labels: [], ...(task["on"] as object | undefined) },
    })),
  };
}

describe("canonicalJson", () => {
  it("sorts keys at every level and writes no whitespace", () => {
    expect(canonicalJson({ b: 1, a: { d: [3, { z: null, y: "é\n" }], c: true } })).toBe(
      '{"a":{"c":true,"d":[3,{"y":"é\\n","z":null}]},"b":1}',
    );
  });

  it("skips undefined properties like JSON, and writes undefined array items as null", () => {
    expect(canonicalJson({ a: undefined, b: [undefined] })).toBe('{"b":[null]}');
  });

  it.each([
    ["NaN", Number.NaN],
    ["Infinity", Number.POSITIVE_INFINITY],
    ["a bigint", 1n],
    ["a function", () => 1],
    ["a symbol", Symbol("x")],
  ])("refuses %s rather than hash something lossy", (_name, value) => {
    expect(() => canonicalJson({ value })).toThrow(TypeError);
  });

  it("refuses a cyclic structure but allows a shared one", () => {
    const shared = { x: 1 };
    expect(canonicalJson({ a: shared, b: shared })).toBe('{"a":{"x":1},"b":{"x":1}}');
    const cyclic: Record<string, unknown> = {};
    cyclic["self"] = cyclic;
    expect(() => canonicalJson(cyclic)).toThrow(/cyclic/);
  });

  it("keeps an own __proto__ key as data", () => {
    expect(canonicalJson(JSON.parse('{"__proto__":1,"a":2}'))).toBe('{"__proto__":1,"a":2}');
  });
});

describe("dagHash", () => {
  it("is pinned for the hello example: stored hashes must stay comparable across versions", () => {
    const text = readFileSync(join(import.meta.dirname, "../../config/examples/hello.toml"), "utf8");
    const result = parseDag(text, "toml");
    if (!result.ok) throw new Error("hello.toml is invalid");
    expect(result.hash).toBe(dagHash(result.dag));
    expect(canonicalJson(result.dag.tasks[1])).toBe(
      '{"action":"sleep","args":{"seconds":1},"concurrencyKey":null,"id":"pause","needs":["greet"],' +
        '"on":{"labels":[],"node":null},"priority":0,"queueTimeoutMs":null,"retries":0,"retryBackoffMs":1000,"timeoutMs":null}',
    );
    expect(result.hash).toBe("5fed1640bb7ecd03ccc2ef3d8703d51031172e8d847ec4c0136db866208d30e9");
  });

  it("does not change with key order or whitespace", () => {
    fc.assert(
      fc.property(anyDoc, fc.nat(), fc.constantFrom(0, 1, 2, "\t", " \n "), (doc, seed, indent) => {
        const plain = hashOf(parseDag(JSON.stringify(doc), "json"));
        expect(hashOf(parseDag(JSON.stringify(reorderKeys(doc, seed), null, indent), "json"))).toBe(plain);
      }),
      { numRuns: 300 },
    );
  });

  it("does not change between JSON and TOML", () => {
    fc.assert(
      fc.property(anyDoc, fc.nat(), (doc, seed) => {
        const fromJson = hashOf(parseDag(JSON.stringify(doc), "json"));
        expect(hashOf(parseDag(toToml(doc), "toml"))).toBe(fromJson);
        expect(hashOf(parseDag(toToml(reorderKeys(doc, seed)), "toml"))).toBe(fromJson);
      }),
      { numRuns: 300 },
    );
  });

  it("does not change when defaults are spelled out", () => {
    fc.assert(
      fc.property(anyDoc, (doc) => {
        expect(hashOf(parseDag(JSON.stringify(spellOutDefaults(doc)), "json"))).toBe(
          hashOf(parseDag(JSON.stringify(doc), "json")),
        );
      }),
      { numRuns: 200 },
    );
  });

  it("differs whenever the parsed content differs", () => {
    fc.assert(
      fc.property(anyDoc, anyDoc, (a, b) => {
        const ra = parseDag(JSON.stringify(a), "json");
        const rb = parseDag(JSON.stringify(b), "json");
        if (!ra.ok || !rb.ok) throw new Error("generated an invalid document");
        expect(ra.hash === rb.hash).toBe(canonicalJson(ra.dag) === canonicalJson(rb.dag));
      }),
      { numRuns: 300 },
    );
  });

  it.each([
    ["the DAG id", (d: Doc) => ({ ...d, id: `${String(d["id"])}x` })],
    [
      "a task's priority",
      (d: Doc) => ({ ...d, tasks: [{ ...d.tasks[0], priority: 7 }, ...d.tasks.slice(1)] }),
    ],
    [
      "an argument",
      (d: Doc) => ({ ...d, tasks: [{ ...d.tasks[0], args: { extra: "1" } }, ...d.tasks.slice(1)] }),
    ],
    [
      "an argument's type",
      (d: Doc) => ({ ...d, tasks: [{ ...d.tasks[0], args: { n: "1" } }, ...d.tasks.slice(1)] }),
    ],
    ["the task order", (d: Doc) => ({ ...d, tasks: [...d.tasks].reverse() })],
    ["a timeout", (d: Doc) => ({ ...d, tasks: [{ ...d.tasks[0], timeout: "1s" }, ...d.tasks.slice(1)] })],
  ])("changes with %s", (_what, change) => {
    const base: Doc = {
      id: "d",
      tasks: [
        { id: "a", action: "echo", args: { n: 1 }, timeout: "2s", priority: 1 },
        { id: "b", action: "echo" },
      ],
    };
    expect(hashOf(parseDag(JSON.stringify(change(base)), "json"))).not.toBe(
      hashOf(parseDag(JSON.stringify(base), "json")),
    );
  });
});
