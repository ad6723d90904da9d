import { configDefaults, defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // The upgrade test runs two releases on two Node lines: `npm run upgrade-test`, not `npm test`;
    // the packed install is `npm run packed-test`.
    exclude: [...configDefaults.exclude, "test/upgrade/**", "test/packed/**"],
    // Installs Synapse and bakes its template DB once before the workers start (fast when present).
    globalSetup: ["test/support/matrix-global-setup.ts"],
    // Store and chat tests start real processes and servers; give them room on a 2-core machine.
    testTimeout: 30_000,
    hookTimeout: 180_000,
    pool: "forks",
    reporters: ["default"],
  },
});
