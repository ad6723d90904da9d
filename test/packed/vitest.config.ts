/**
 * `npm run packed-test`: the package as npm packs it, installed into a scratch prefix and started in
 * an encrypted room (docs/getting-started.md, "Install from the package"). Not in `npm test`: packing builds and
 * installing downloads, about 1–2 minutes on a busy 2-core machine.
 */
import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    root: fileURLToPath(new URL("../..", import.meta.url)),
    include: ["test/packed/**/*.test.ts"],
    globalSetup: ["test/support/matrix-global-setup.ts"],
    pool: "forks",
    testTimeout: 60_000,
    hookTimeout: 300_000,
    reporters: ["default"],
  },
});
