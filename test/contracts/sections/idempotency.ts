/**
 * Store contract: idempotency keys. The first caller of (scope, key) stores its result; every later
 * or racing caller gets that stored result back, and scopes never share keys.
 */
import { expect, it } from "vitest";
import { race } from "../../support/store-fixtures.js";
import type { ContractContext } from "../context.js";

const RACERS = 16;

export function idempotencySection(ctx: ContractContext): void {
  it("the first caller stores its result; later callers get the stored one back; scopes are separate", async () => {
    const store = await ctx.store();
    const key = ctx.uid("key");
    expect(await store.rememberIdempotencyKey("confirm", key, { runId: "r1", n: 1 })).toEqual({
      kind: "new",
    });
    expect(await store.rememberIdempotencyKey("confirm", key, { runId: "r2", n: 2 })).toEqual({
      kind: "existing",
      result: { runId: "r1", n: 1 },
    });
    expect(await store.rememberIdempotencyKey("http", key, { other: true })).toEqual({ kind: "new" });
    expect(await store.rememberIdempotencyKey("http", key, {})).toEqual({
      kind: "existing",
      result: { other: true },
    });
  });

  it("readIdempotencyKey reads what is stored under a key and stores nothing itself", async () => {
    const store = await ctx.store();
    const key = ctx.uid("key");
    expect(await store.readIdempotencyKey("http-answer", key)).toBeNull();
    // The read left nothing behind: the first real result is still the one kept.
    expect(await store.rememberIdempotencyKey("http-answer", key, { status: 201 })).toEqual({ kind: "new" });
    expect(await store.readIdempotencyKey("http-answer", key)).toEqual({ status: 201 });
    expect(await store.readIdempotencyKey("other", key)).toBeNull();
  });

  it(`${RACERS} connections racing on one key: exactly one "new", everyone else reads the winner's result`, async () => {
    const key = ctx.uid("race");
    const stores = await Promise.all(Array.from({ length: RACERS }, () => ctx.open()));
    const { values, errors } = await race(
      stores.map((s, i) => () => s.rememberIdempotencyKey("api", key, { racer: i })),
    );
    expect(errors).toEqual([]);
    const winners = values.flatMap((v, i) => (v.kind === "new" ? [i] : []));
    expect(winners).toHaveLength(1);
    for (const v of values) if (v.kind === "existing") expect(v.result).toEqual({ racer: winners[0] });
  });
}
