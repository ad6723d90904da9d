/** Parameter pattern limits: size and complexity before compiling, cost of checks. */
import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { RE2JS } from "re2js";
import { parseDag } from "../../src/domain/dag.js";
import { compileParamPattern, estimateInstructions, PATTERN_LIMITS } from "../../src/domain/param-pattern.js";
import { resolveParams } from "../../src/domain/params.js";

/** A publish that stalled a backtracking matcher: 24 × `(?:.{0,999}){0,1}` and a 1,500-character default. */
export const STALLING_PATTERN = "(?:.{0,999}){0,1}".repeat(24);

function dagWith(params: Record<string, { pattern: string; default?: string }>): string {
  return JSON.stringify({ id: "p", params, tasks: [{ id: "a", action: "echo" }] });
}

function issuesOf(text: string): string[] {
  const result = parseDag(text, "json");
  return result.ok ? [] : result.issues.map((i) => `${i.path}: ${i.message}`);
}

describe("parameter pattern limits", () => {
  it("refuses the stalling publish by its pattern, naming the parameter and the limit", () => {
    const issues = issuesOf(dagWith({ big: { pattern: STALLING_PATTERN, default: "a".repeat(1500) } }));
    expect(issues).toEqual([
      `params.big.pattern: is 408 characters long; at most ${PATTERN_LIMITS.maxSource}`,
    ]);
  });

  it("refuses a repetition count over the limit, wherever it is written", () => {
    expect(compileParamPattern("(?:.{0,999}){0,1}")).toBe(
      "repeats {0,999} times; a repetition count is at most 100",
    );
    expect(compileParamPattern("a{101}")).toMatch(/repeats \{101\} times/);
    expect(compileParamPattern("a{5,}{200}")).toMatch(/repeats \{200\}/);
    expect(typeof compileParamPattern("[a-z]{1,100}")).toBe("object");
  });

  it("refuses nested repetitions that multiply past the instruction limit without compiling them", () => {
    // RE2 alone would accept it (product 1000) and compile ~2,000 instructions per copy.
    const nested = "(?:(?:.{0,10}){0,10}){0,10}".repeat(8);
    expect(estimateInstructions(nested)).toBeGreaterThan(4 * PATTERN_LIMITS.maxInstructions);
    expect(compileParamPattern(nested)).toMatch(
      /is too complex: it compiles to about \d+ instructions; at most 256/,
    );
    expect(compileParamPattern("(?:a?){95}a{95}")).toBe(
      "is too complex: it compiles to 287 instructions; at most 256 (a repetition {n,m} copies what it repeats m times)",
    );
    const issues = issuesOf(dagWith({ x: { pattern: "(?:a?){95}a{95}" } }));
    expect(issues).toEqual([expect.stringMatching(/^params\.x\.pattern: is too complex/)]);
  });

  it("keeps everyday patterns", () => {
    for (const p of [
      "[a-z0-9-]{1,64}",
      "(?:[0-9]{1,3}\\.){3}[0-9]{1,3}",
      "v?[0-9]+\\.[0-9]+\\.[0-9]+(-[a-z0-9.]+)?",
      "(staging|production|dev)",
      "[0-9a-f]{40}",
      ".{1,100}",
      "(?i)[[:alpha:]][a-z_]{0,31}",
    ])
      expect(compileParamPattern(p), p).toMatchObject({ instructions: expect.any(Number) });
  });

  it("the estimate is never far below the compiled size (it gates compiling)", () => {
    const atom = fc.constantFrom("a", ".", "[a-z]", "\\d", "(?:ab)", "[]x]", "\\pL", "\\x{41}");
    const quant = fc.constantFrom("", "*", "+", "?", "{3}", "{0,5}", "{2,}", "{1,9}");
    const piece = fc.tuple(atom, quant).map(([a, q]) => a + q);
    const seq = fc.array(piece, { minLength: 1, maxLength: 5 }).map((p) => p.join(""));
    const group = fc
      .tuple(fc.array(seq, { minLength: 1, maxLength: 3 }), quant)
      .map(([alts, q]) => `(?:${alts.join("|")})${q}`);
    const pattern = fc.array(fc.oneof(seq, group), { minLength: 1, maxLength: 4 }).map((p) => p.join(""));
    fc.assert(
      fc.property(pattern, (p) => {
        const size = RE2JS.compile(p).programSize();
        expect(estimateInstructions(p) * 2 + 8).toBeGreaterThanOrEqual(size);
      }),
      { numRuns: 300 },
    );
  });

  it("charges a command's value checks to one budget: each value, and all of them together", () => {
    const pattern = ".{1,100}"; // 201 instructions: 326 characters fit the budget of 65,536
    const one = issuesOf(dagWith({ a: { pattern: "[a-z]*.{1,100}", default: "a".repeat(400) } }));
    expect(one).toEqual([
      expect.stringMatching(
        /^params\.a\.default: parameter "a": checking its 400-character value × its pattern's \d+ instructions = \d+, over the 65536 one command may spend/,
      ),
    ]);
    const params: Record<string, { pattern: string; default: string }> = {};
    for (const name of ["a", "b", "c", "d"]) params[name] = { pattern, default: "x".repeat(100) };
    const three = issuesOf(dagWith(params));
    expect(three).toEqual([
      expect.stringMatching(
        /^params\.d\.default: .*= 20100; with the parameters checked before it, 80400, over the 65536/,
      ),
    ]);
    // A run's given values share one budget too.
    const open = "[a-z]*.{0,99}";
    const ok = parseDag(dagWith({ a: { pattern: open }, b: { pattern: open, default: "z" } }), "json");
    if (!ok.ok) throw new Error("unexpected");
    expect(resolveParams(ok.dag, [["a", "y".repeat(100)]]).ok).toBe(true);
    const both = resolveParams(ok.dag, [
      ["a", "y".repeat(200)],
      ["b", "y".repeat(200)],
    ]);
    expect(both).toMatchObject({ ok: false, message: expect.stringMatching(/^parameter "b": checking/) });
  });

  it("a stored DAG with a pattern over the limits is refused at run, not matched", () => {
    const stored = parseDag(dagWith({ a: { pattern: "[a-z]+" } }), "json");
    if (!stored.ok) throw new Error("unexpected");
    const old = { ...stored.dag, params: { a: { pattern: STALLING_PATTERN, default: null } } };
    expect(resolveParams(old, [["a", "a".repeat(1500)]])).toMatchObject({
      ok: false,
      message: 'parameter "a" has an invalid pattern: it is 408 characters long; at most 256',
    });
  });

  it("refuses values that would blow a 64 KiB document up into megabytes of arguments, before building them", () => {
    const refs = "{params.v}".repeat(400);
    const tasks = Array.from({ length: 15 }, (_, i) => ({ id: `t${i}`, action: "echo", args: { m: refs } }));
    const doc = parseDag(JSON.stringify({ id: "amp", params: { v: { pattern: ".*" } }, tasks }), "json");
    if (!doc.ok) throw new Error("unexpected");
    expect(resolveParams(doc.dag, [["v", "a".repeat(200)]])).toMatchObject({
      ok: false,
      message: "with these parameter values, tasks[0].args.m would be 80000 characters long; at most 65536",
    });
    expect(resolveParams(doc.dag, [["v", "a".repeat(4096)]])).toMatchObject({
      ok: false,
      message: expect.stringMatching(/tasks\[0\]\.args\.m would be 1638400 characters long/),
    });
    expect(resolveParams(doc.dag, [["v", "a".repeat(10)]]).ok).toBe(true);
    const few = tasks.map((t) => ({ ...t, args: { m: "{params.v}".repeat(6) } }));
    const many = parseDag(
      JSON.stringify({
        id: "amp",
        params: { v: { pattern: ".*" } },
        tasks: [...few, ...few.map((t) => ({ ...t, id: `${t.id}b` }))].concat(
          Array.from({ length: 20 }, (_, i) => ({
            id: `c${i}`,
            action: "echo",
            args: { m: "{params.v}".repeat(6) },
          })),
        ),
      }),
      "json",
    );
    if (!many.ok) throw new Error("unexpected");
    // 50 arguments of 6 × 4,096 characters: each fits one argv entry, together over 1 MiB.
    expect(resolveParams(many.dag, [["v", "b".repeat(4096)]])).toMatchObject({
      ok: false,
      message:
        "with these parameter values, the run's task arguments would come to more than 1048576 characters",
    });
  });
});
