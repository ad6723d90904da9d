/**
 * A fleet of three `dagbot node` processes for the tests of DAGs that run after another DAG's runs
 * (test/e2e/after-chain*.test.ts): actions `stamp` (appends its run's uuid to records.txt),
 * `release` (the same, and publishes version=<v>) and `fail` (exits 1); nodes stopped and the store
 * closed after each test, its folder kept when the test failed.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, expect } from "vitest";
import type { RunRecord, Store } from "../../src/ports/store.js";
import type { NodeProcess, Target } from "./engine-cluster.js";
import {
  ROOM,
  cli,
  createTarget,
  killAll,
  startNode,
  waitForRunStatus,
  writeDag,
  writeNodeConfig,
} from "./engine-cluster.js";
import { waitFor } from "./store-wait.js";

export const ENDED = (s: string): boolean => s === "succeeded" || s === "failed" || s === "canceled";

/** Call inside a describe block: registers the afterEach that stops the fleet. */
export function useAfterFleet(kind: "sqlite" | "postgres") {
  let target: Target | null = null;
  let store: Store | null = null;
  const nodes: NodeProcess[] = [];

  afterEach(async (context) => {
    await killAll(nodes);
    nodes.length = 0;
    await store?.close();
    store = null;
    await target?.cleanup(context.task.result?.state === "fail");
  });

  /** Three nodes with `stamp` (appends its run's uuid to records.txt) and `fail` (exits 1). */
  async function fleet(
    label: string,
    lease: { ttl: string; renewEvery: string } = { ttl: "2s", renewEvery: "500ms" },
  ) {
    target = await createTarget(kind, label);
    const records = join(target.dir, "records.txt");
    const script = "require('fs').appendFileSync(process.argv[1], process.env.DAGBOT_RUN_ID + '\\n')";
    const release =
      "const fs = require('fs'); fs.appendFileSync(process.argv[1], process.env.DAGBOT_RUN_ID + '\\n'); " +
      "fs.appendFileSync(process.env.DAGBOT_OUTPUT, 'version=' + process.argv[2] + '\\n')";
    const extra = [
      "[actions.stamp]",
      `argv = [${JSON.stringify(process.execPath)}, "-e", ${JSON.stringify(script)}, ${JSON.stringify(records)}]`,
      'timeout = "10s"',
      'kill_grace = "300ms"',
      "",
      // Records its run like stamp, and publishes version=<v> as its output (DAGBOT_OUTPUT).
      "[actions.release]",
      `argv = [${JSON.stringify(process.execPath)}, "-e", ${JSON.stringify(release)}, ${JSON.stringify(records)}, "{v}"]`,
      "args = { v = { pattern = '[0-9.]{1,20}' } }",
      'timeout = "10s"',
      'kill_grace = "300ms"',
      "",
      "[actions.fail]",
      `argv = [${JSON.stringify(process.execPath)}, "-e", "process.exit(1)"]`,
      'timeout = "10s"',
      'kill_grace = "300ms"',
      "",
    ].join("\n");
    const configs = ["node-a", "node-b", "node-c"].map((nodeId) => {
      const config = writeNodeConfig(target!, { nodeId, extra, ...lease });
      nodes.push(startNode(target!, config, nodeId));
      return config;
    });
    store = await target.open();
    const s = store;
    await waitFor(
      "three heartbeats",
      () => s.listNodes(),
      (n) => n.length >= 3,
      { timeoutMs: 15_000, intervalMs: 50 },
    );
    await waitFor(
      "a leader",
      () => s.getLease(ROOM),
      (l) => l?.holder !== null && l !== null,
      {
        timeoutMs: 15_000,
        intervalMs: 50,
      },
    );
    const recorded = (): string[] =>
      existsSync(records) ? readFileSync(records, "utf8").trim().split("\n").filter(Boolean) : [];
    return { s, configs, recorded, t: target };
  }

  /** Publishes a DAG (auto-confirmed) and waits for its first run to end. */
  async function publish(s: Store, t: Target, config: string, dag: Record<string, unknown>): Promise<void> {
    const path = writeDag(t, dag);
    const r = await cli(["submit", path, "--confirm", "--config", config], { cwd: t.dir });
    expect(r.code, r.stderr).toBe(0);
    await waitForRunStatus(s, String(dag["id"]), ENDED);
  }

  const runsOf = async (s: Store, id: string): Promise<RunRecord[]> =>
    (await s.listDefinitionRuns(ROOM, id)).sort((a, b) => a.createdAt - b.createdAt);

  return { fleet, publish, runsOf, nodes };
}
