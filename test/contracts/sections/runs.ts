/** Store contract: runs (filled in next). */
import { it } from "vitest";
import type { ContractContext } from "../context.js";

export function runsSection(ctx: ContractContext): void {
  it("opens a store", async () => {
    await ctx.store();
  });
}
