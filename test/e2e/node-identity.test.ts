/**
 * One node id, one process: real `dagbot node` processes on one store. A second live process with a
 * node's id exits 2 naming the holder's host and pid, and leaves the holder's row alone; after the
 * holder is killed with SIGKILL, a restart on the same host starts at once (its earlier life is gone).
 */
import { readFileSync } from "node:fs";
import { hostname } from "node:os";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NodeProcess, Target } from "../support/engine-cluster.js";
import { createTarget, requireBuild, startNode, writeNodeConfig } from "../support/engine-cluster.js";
import { waitFor } from "../support/store-wait.js";
import type { Store } from "../../src/ports/store.js";

let target: Target;
let store: Store;
let failed = false;
const running: NodeProcess[] = [];

beforeAll(async () => {
  requireBuild();
  target = await createTarget("sqlite", "node-identity");
  store = await target.open();
});

afterAll(async () => {
  for (const n of running) n.kill("SIGKILL");
  await Promise.all(running.map((n) => n.exited));
  await store.close();
  await target.cleanup(failed);
});

function start(config: string, label: string): NodeProcess {
  const node = startNode(target, config, label);
  running.push(node);
  return node;
}

async function rowOf(pid: number | undefined): Promise<void> {
  await waitFor(
    `the heartbeat of process ${pid}`,
    () => store.listNodes(),
    (nodes) => nodes.some((n) => n.session.nodeId === "twin" && n.session.bootId.includes(`.${pid}@`)),
    { timeoutMs: 20_000 },
  );
}

describe("one node id, one process", () => {
  it("refuses a second live process (exit 2, naming host and pid); a restart after kill -9 starts", async () => {
    try {
      const config = writeNodeConfig(target, { nodeId: "twin" });
      const first = start(config, "twin-1");
      await rowOf(first.child.pid);

      const second = start(config, "twin-2");
      const { code } = await second.exited;
      expect(code).toBe(2);
      const log = readFileSync(second.logPath, "utf8");
      expect(log).toContain(
        `node id twin is already in use by process ${first.child.pid} on host ${hostname()}`,
      );
      // The holder runs on, its row its own.
      expect(first.child.exitCode).toBeNull();
      const rows = (await store.listNodes()).filter((n) => n.session.nodeId === "twin");
      expect(rows.map((n) => n.session.bootId)).toEqual([expect.stringContaining(`.${first.child.pid}@`)]);

      first.kill("SIGKILL");
      await first.exited;
      const third = start(config, "twin-3");
      await rowOf(third.child.pid);
      expect(third.child.exitCode).toBeNull();
      // The log is written asynchronously: the line may reach the file after the heartbeat's row.
      await waitFor(
        "the restart to say its predecessor is gone",
        () => readFileSync(third.logPath, "utf8"),
        (log) => log.includes("earlier process on this host, which is gone"),
      );
    } catch (e) {
      failed = true;
      throw e;
    }
  }, 90_000);
});
