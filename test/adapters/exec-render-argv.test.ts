/** renderArgv, the pure half of the executor: patterns are full matches and one element is one argv entry. */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { compileArgPattern, renderArgv } from "../../src/domain/action-argv.js";
import type { ActionTemplate } from "../../src/domain/action-argv.js";

const pgDump: ActionTemplate = {
  name: "pg_dump",
  argv: ["pg_dump", "--dbname={db}", "--file", "/backups/{db}-{day}.sql"],
  args: { db: { pattern: "[a-z]+" }, day: { pattern: "[0-9]{4}-[0-9]{2}-[0-9]{2}" } },
};

describe("renderArgv", () => {
  it("substitutes placeholders inside elements without splitting them", () => {
    expect(renderArgv(pgDump, { db: "app", day: "2024-05-01" })).toEqual({
      ok: true,
      argv: ["pg_dump", "--dbname=app", "--file", "/backups/app-2024-05-01.sql"],
    });
  });

  it("renders numbers and booleans as strings and checks those strings", () => {
    const sleep: ActionTemplate = {
      name: "sleep",
      argv: ["sleep", "{s}"],
      args: { s: { pattern: "[0-9]+" } },
    };
    expect(renderArgv(sleep, { s: 5 })).toEqual({ ok: true, argv: ["sleep", "5"] });
    expect(renderArgv(sleep, { s: 1.5 })).toEqual({
      ok: false,
      message: 'argument "s" does not match its pattern [0-9]+',
    });
    const flag: ActionTemplate = {
      name: "f",
      argv: ["x", "--on={b}"],
      args: { b: { pattern: "true|false" } },
    };
    expect(renderArgv(flag, { b: true })).toEqual({ ok: true, argv: ["x", "--on=true"] });
  });

  it("anchors patterns: a partial match is refused, alternations included", () => {
    const action: ActionTemplate = { name: "a", argv: ["x", "{v}"], args: { v: { pattern: "app|web" } } };
    expect(renderArgv(action, { v: "web" }).ok).toBe(true);
    for (const v of ["apple", "xweb", "app; rm -rf /", "web\n", ""]) {
      expect(renderArgv(action, { v })).toEqual({
        ok: false,
        message: 'argument "v" does not match its pattern app|web',
      });
    }
  });

  it("names a missing argument, an undeclared one, and reports every problem at once", () => {
    const result = renderArgv(pgDump, { db: "APP", extra: "1" });
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.message).toContain('argument "extra" is not accepted by action "pg_dump"');
    expect(result.message).toContain('argument "day" is missing (action "pg_dump" requires it)');
    expect(result.message).toContain('argument "db" does not match its pattern [a-z]+');
  });

  it("refuses NUL bytes, oversized values and non-scalar values", () => {
    const any: ActionTemplate = { name: "a", argv: ["x", "{v}"], args: { v: { pattern: "[\\s\\S]*" } } };
    expect(renderArgv(any, { v: "a\0b" })).toEqual({
      ok: false,
      message: 'argument "v" contains a NUL byte',
    });
    expect(renderArgv(any, { v: "x".repeat(70_000) })).toEqual({
      ok: false,
      message: 'argument "v" is longer than 65536 bytes',
    });
    expect(renderArgv(any, { v: { toString: () => "x" } as unknown as string }).ok).toBe(false);
  });

  it("never re-expands a value that looks like a placeholder", () => {
    const two: ActionTemplate = {
      name: "t",
      argv: ["x", "{a}{b}"],
      args: { a: { pattern: "[\\s\\S]*" }, b: { pattern: "[\\s\\S]*" } },
    };
    expect(renderArgv(two, { a: "{b}", b: "B" })).toEqual({ ok: true, argv: ["x", "{b}B"] });
  });

  it("reports a placeholder with no declared argument and keeps non-identifier braces literal", () => {
    const broken: ActionTemplate = { name: "b", argv: ["x", "{nope}", '{"json": 1}', "{}"], args: {} };
    expect(renderArgv(broken, {})).toEqual({
      ok: false,
      message: 'placeholder {nope} of action "b" has no declared argument',
    });
    const literal: ActionTemplate = { name: "l", argv: ["x", '{"json": 1}', "{}", "${HOME"], args: {} };
    expect(renderArgv(literal, {})).toEqual({ ok: true, argv: ["x", '{"json": 1}', "{}", "${HOME"] });
  });

  it("yields one argv entry per template element for any accepted value", () => {
    const action: ActionTemplate = {
      name: "p",
      argv: ["prog", "{v}", "pre-{v}-post", "--"],
      args: { v: { pattern: "[\\s\\S]*" } },
    };
    fc.assert(
      fc.property(
        fc.string({ unit: "binary", maxLength: 200 }).filter((s) => !s.includes("\0")),
        (v) => {
          const result = renderArgv(action, { v });
          expect(result).toEqual({ ok: true, argv: ["prog", v, `pre-${v}-post`, "--"] });
        },
      ),
    );
  });
});

describe("compileArgPattern", () => {
  it("refuses a pattern that only compiles once wrapped, which would escape the anchors", () => {
    expect(typeof compileArgPattern("[a-z]+)|(.*")).toBe("string");
    expect(typeof compileArgPattern("(")).toBe("string");
    const ok = compileArgPattern("[a-z]+");
    if (typeof ok === "string") throw new Error(ok);
    expect(ok.matches("abc")).toBe(true);
    expect(ok.matches("abc1")).toBe(false);
  });
});
