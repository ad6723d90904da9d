/** Store contract: inbox (filled in next). */
import { it } from "vitest";
import type { ContractContext } from "../context.js";

export function inboxSection(ctx: ContractContext): void {
  it("opens a store", async () => {
    await ctx.store();
  });
}
