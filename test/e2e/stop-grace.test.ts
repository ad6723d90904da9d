/**
 * Stopping is bounded and said: a real `dagbot node` given SIGTERM names each running task it waits
 * for and kills what still runs once `stop_grace` passed; a second signal kills at once. The
 * default stop_grace stays shorter than the compose file's stop_grace_period.
 */
import { existsSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NodeProcess, Target } from "../support/engine-cluster.js";
import {
  REPO,
  cli,
  createTarget,
  markerExists,
  marksDir,
  requireBuild,
  startNode,
  writeDag,
  writeNodeConfig,
} from "../support/engine-cluster.js";
import { waitFor } from "../support/store-wait.js";
import { parseDuration } from "../../src/domain/duration.js";
import { loadConfig } from "../../src/config/load-config.js";
import type { Store } from "../../src/ports/store.js";

let target: Target;
let store: Store;
let failed = false;
const running: NodeProcess[] = [];

beforeAll(async () => {
  requireBuild();
  target = await createTarget("sqlite", "stop-grace");
  store = await target.open();
});

afterAll(async () => {
  for (const n of running) n.kill("SIGKILL");
  await Promise.all(running.map((n) => n.exited));
  await store.close();
  await target.cleanup(failed);
});

let started = 0;

/** A node running one long `work` task of run `id`; resolves once the action started. */
async function nodeRunning(nodeId: string, id: string, topLevel: string): Promise<NodeProcess> {
  const config = writeNodeConfig(target, { nodeId });
  // A top-level key goes before the config's tables.
  writeFileSync(config, `${topLevel}\n${readFileSync(config, "utf8")}`);
  const node = startNode(target, config, nodeId);
  running.push(node);
  await waitFor(
    `${nodeId}'s heartbeat`,
    () => store.listNodes(),
    (ns) => ns.some((n) => n.session.nodeId === nodeId),
  );
  const dag = writeDag(target, { id, tasks: [{ id: "slow", action: "work", args: { ms: "60000" } }] });
  const submitted = await cli(["submit", dag, "--config", config, "--confirm"]);
  expect(submitted.code, submitted.stderr).toBe(0);
  await waitFor(
    "the action to start",
    () => (existsSync(marksDir(target)) ? readdirSync(marksDir(target)) : []),
    (names) => names.filter((n) => n.endsWith(".slow.1.start")).length >= started + 1,
  );
  started += 1;
  return node;
}

describe("stopping", () => {
  it("names the task it waits for and kills it once stop_grace passed", async () => {
    try {
      const node = await nodeRunning("graceful", "grace", 'stop_grace = "1s"');
      node.kill("SIGTERM");
      const { code } = await node.exited;
      expect(code).toBe(0);
      const log = readFileSync(node.logPath, "utf8");
      expect(log).toContain("stopping: waiting up to 1s for task slow (work, running for");
      expect(log).toContain("stop_grace (1s) passed: killing 1 running action");
      const run = await store.getRun("local", "grace");
      expect(markerExists(target, run!.runId, "slow", 1, "end")).toBe(false);
    } catch (e) {
      failed = true;
      throw e;
    }
  }, 60_000);

  it("kills at once on a second signal, before the default stop_grace passes", async () => {
    try {
      const node = await nodeRunning("twice", "twice", "");
      node.kill("SIGTERM");
      await waitFor(
        "the wait to be said",
        () => readFileSync(node.logPath, "utf8"),
        (log) => log.includes("stopping: waiting up to 8s for task slow"),
      );
      node.kill("SIGTERM");
      const { code } = await node.exited;
      expect(code).toBe(0);
      const log = readFileSync(node.logPath, "utf8");
      expect(log).toContain("stopping now: killing running actions");
      expect(log).not.toContain("stop_grace (8s) passed");
    } catch (e) {
      failed = true;
      throw e;
    }
  }, 60_000);

  it("has a default shorter than the compose file's stop_grace_period", () => {
    const compose = readFileSync(join(REPO, "docker", "compose.yaml"), "utf8");
    const period = /stop_grace_period:\s*(\S+)/.exec(compose)?.[1];
    expect(period).toBeDefined();
    const loaded = loadConfig({ file: join(REPO, "config", "local.toml"), env: {} });
    if (!loaded.ok) throw new Error(JSON.stringify(loaded));
    expect(loaded.config.stopGraceMs).toBe(8_000);
    expect(parseDuration(period!)).toBeGreaterThan(loaded.config.stopGraceMs);
  });
});
