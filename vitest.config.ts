import { configDefaults, defineConfig } from "vitest/config";

/**
 * Files whose assertions depend on timing under CPU load: kill -9 and SIGSTOP of nodes, leases and
 * task leases left to expire, fixed windows measured on the wall clock, rate limits, render and
 * deadline bounds. They run one at a time, after everything else, so no other file takes the cores
 * they measure (docs/architecture.md §3, "Task lease": a node starved past its lease loses it).
 */
const TIMING = [
  "test/chaos/**/*.test.ts",
  // kill -9 of a node or of the leader, then a takeover when its lease expires.
  "test/e2e/lost-node.test.ts",
  "test/e2e/store-outage.test.ts",
  "test/e2e/matrix-failover.test.ts",
  "test/e2e/matrix-leader-kill-room.test.ts",
  "test/e2e/action-lifetime.test.ts",
  "test/e2e/stop-grace.test.ts",
  "test/e2e/schedules-fleet.test.ts",
  "test/e2e/after-chain-leader-kill.test.ts",
  "test/e2e/for-each-leader-kill.test.ts",
  "test/e2e/gates-fleet.test.ts",
  "test/e2e/engine-retention.test.ts",
  "test/e2e/http-events.test.ts",
  "test/e2e/node-store-reach.test.ts",
  // Leases of under a second, renewals and acquisitions counted in a window.
  "test/e2e/engine-loops.test.ts",
  "test/e2e/engine-leaks.test.ts",
  "test/e2e/engine-metrics.test.ts",
  "test/e2e/quiet-followers.test.ts",
  // Real processes raced or killed mid-write, deadlines and timeouts of actions.
  "test/adapters/exec.test.ts",
  "test/adapters/exec-supervisor.test.ts",
  "test/adapters/sqlite-crash.test.ts",
  "test/adapters/postgres-crash.test.ts",
  "test/adapters/sqlite-processes.test.ts",
  // Synapse's rate limiter, a render's time bound, waits measured with performance.now().
  "test/adapters/matrix-sender-ratelimit.test.ts",
  "test/adapters/graph-renderer.test.ts",
  "test/unit/store-watch.test.ts",
];

/** What every group shares. */
const shared = {
  // Store and chat tests start real processes and servers; give them room on a 2-core machine.
  testTimeout: 30_000,
  hookTimeout: 180_000,
  pool: "forks",
} as const;

export default defineConfig({
  test: {
    // Installs Synapse and bakes its template DB once before the workers start (fast when present).
    // Set on the root only: vitest runs the root's global setup before any project's files.
    globalSetup: ["test/support/matrix-global-setup.ts"],
    reporters: ["default"],
    projects: [
      {
        test: {
          ...shared,
          name: "waiting",
          include: ["test/**/*.test.ts"],
          // The upgrade test runs two releases on two Node lines: `npm run upgrade-test`, not
          // `npm test`; the packed install is `npm run packed-test`.
          exclude: [...configDefaults.exclude, "test/upgrade/**", "test/packed/**", ...TIMING],
          // Most files wait on real processes, Synapse and timers rather than compute: three at a
          // time keep both cores busy (vitest's default here, cores - 1, is one file at a time).
          maxWorkers: 3,
          sequence: { groupOrder: 0 },
        },
      },
      {
        test: {
          ...shared,
          name: "timing",
          include: TIMING,
          fileParallelism: false,
          maxWorkers: 1,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
