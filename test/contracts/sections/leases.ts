/** Store contract: leases (filled in next). */
import { it } from "vitest";
import type { ContractContext } from "../context.js";

export function leasesSection(ctx: ContractContext): void {
  it("opens a store", async () => {
    await ctx.store();
  });
}
