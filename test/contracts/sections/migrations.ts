/**
 * Store contract: migrations. Reopening (also several openers at once) applies nothing twice and
 * keeps the data; a store whose schema is newer than the code is refused with SchemaTooNewError.
 */
import { expect, it } from "vitest";
import { SchemaTooNewError } from "../../../src/ports/errors.js";
import type { ContractContext } from "../context.js";

export function migrationsSection(ctx: ContractContext): void {
  it("reopening, also by several connections at once, is idempotent and keeps the data", async () => {
    const store = await ctx.store();
    const version = await ctx.capabilities.schemaVersion();
    expect(version).toBeGreaterThanOrEqual(1);
    const room = ctx.uid("!mig");
    await store.setRoomCap(room, 7);
    const again = await Promise.all(Array.from({ length: 4 }, () => ctx.open()));
    expect(await ctx.capabilities.schemaVersion()).toBe(version);
    for (const s of again) expect(await s.getRoomCap(room)).toBe(7);
  });

  it("refuses a store written by a newer dagbot, and opens again once the version is back", async () => {
    await ctx.store();
    const version = await ctx.capabilities.schemaVersion();
    await ctx.capabilities.forceSchemaVersion(version + 1);
    try {
      const refused = await ctx.open().catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(SchemaTooNewError);
      expect(refused).toMatchObject({ found: version + 1, supported: version });
      expect(await ctx.capabilities.schemaVersion()).toBe(version + 1);
    } finally {
      await ctx.capabilities.forceSchemaVersion(version);
    }
    const reopened = await ctx.open();
    expect(await reopened.getRoomCap(ctx.uid("!mig"))).toBe(16);
  });
}
