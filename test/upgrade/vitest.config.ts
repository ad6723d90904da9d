/**
 * `npm run upgrade-test`: the upgrade test alone (test/upgrade/run.mjs starts it on Node 22+ and
 * finds the Node 20 the previous release runs on). Not part of `npm test`: the root config leaves
 * test/upgrade/ out. One upgrade at a time: each runs up to five node processes of two releases.
 */
import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    root: fileURLToPath(new URL("../..", import.meta.url)),
    include: ["test/upgrade/**/*.test.ts"],
    pool: "forks",
    fileParallelism: false,
    // Builds the previous release once (the first run takes minutes; see releases.ts).
    globalSetup: ["test/upgrade/global-setup.ts"],
    // One store's whole upgrade from one release (30-60 s on a busy 2-core machine); eight of them
    // (test/upgrade/releases.ts: four previous releases, two stores) one after another.
    testTimeout: 150_000,
    hookTimeout: 60_000,
    reporters: ["default"],
  },
});
