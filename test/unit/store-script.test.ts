/** The store's statements, written once, compiled for each dialect (src/adapters/store-common/script.ts). */
import { describe, expect, it } from "vitest";
import { compile, p, sql, valuesOf } from "../../src/adapters/store-common/script.js";

const S = sql("a test statement")`
  UPDATE t SET a = ${p.json("a")}, at = ${p.now} WHERE id = ${p.text("id")} AND (${p.bool("all")} OR id = ${p.text("id")})${p.only({ postgres: " FOR UPDATE" })}`;

describe("compile", () => {
  it("SQLite: one ? per placeholder in order, the clock where it is read, dialect text only for its dialect", () => {
    const c = compile(S, "sqlite");
    expect(c.text).toBe("\n  UPDATE t SET a = ?, at = ? WHERE id = ? AND (? OR id = ?)");
    expect(c.order.map((o) => (o.kind === "now" ? "now" : o.name))).toEqual(["a", "now", "id", "all", "id"]);
  });

  it("PostgreSQL: $1 is the clock when read, each name one typed $n however often it is used", () => {
    const c = compile(S, "postgres");
    expect(c.text).toBe(
      "\n  UPDATE t SET a = $2::jsonb, at = coalesce($1::bigint, floor(extract(epoch FROM now()) * 1000)::bigint) WHERE id = $3::text AND ($4::boolean OR id = $3::text) FOR UPDATE",
    );
    expect(c.order.map((o) => (o.kind === "now" ? "now" : o.name))).toEqual(["now", "a", "id", "all"]);
    const noClock = compile(sql("no clock")`SELECT ${p.int("n")}`, "postgres");
    expect(noClock.text).toBe("SELECT $1::bigint");
  });

  it("values follow the order, encoded per type; null stays null; a missing name is an error naming it", () => {
    const c = compile(S, "sqlite");
    const enc = (type: string, v: unknown) =>
      type === "json" ? JSON.stringify(v) : type === "bool" ? (v ? 1 : 0) : v;
    expect(valuesOf(c, S, { a: { x: 1 }, id: "r1", all: true }, enc, () => 42)).toEqual([
      '{"x":1}',
      42,
      "r1",
      1,
      "r1",
    ]);
    expect(valuesOf(c, S, { a: null, id: "r1", all: false }, enc, () => 42)).toEqual([
      null,
      42,
      "r1",
      0,
      "r1",
    ]);
    expect(() => valuesOf(c, S, { a: 1, all: true }, enc, () => 0)).toThrow(
      'statement "a test statement" was given no value for "id"',
    );
  });
});
