/**
 * `npm run chaos`: the chaos scenarios alone, long versions (CHAOS_LONG=1 set by the script), one
 * file at a time so the scenarios do not fight over the 2 cores they measure. `npm test` runs the
 * short versions through the main config.
 */
import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    root: fileURLToPath(new URL("../..", import.meta.url)),
    include: ["test/chaos/**/*.test.ts"],
    pool: "forks",
    fileParallelism: false,
    testTimeout: 600_000,
    hookTimeout: 180_000,
    reporters: ["default"],
  },
});
