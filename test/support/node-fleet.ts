/**
 * The set-up of an end-to-end test that runs real `dagbot node` processes on one store and reads an
 * action's own records file: a fresh target per test, its store open, the nodes killed and the
 * target cleaned up after it (kept when the test failed). Shared by the fan-out and matrix tests.
 */
import { join } from "node:path";
import { afterEach, beforeAll } from "vitest";
import type { Store } from "../../src/ports/store.js";
import type { NodeProcess, StoreKind, Target } from "./engine-cluster.js";
import { createTarget, killAll, requireBuild, startNode, writeNodeConfig } from "./engine-cluster.js";

export interface FleetNodeOptions {
  capacity: number;
  /** Config appended to the node's (its actions). */
  extra?: string;
}

export interface NodeFleet {
  readonly target: Target;
  readonly store: Store;
  /** The records file in the target's folder, for actions that write one line per event. */
  readonly records: string;
  /** Writes a node's config and starts `dagbot node` on it; killed after the test. */
  startNode(nodeId: string, options: FleetNodeOptions): { config: string; node: NodeProcess };
  /** Starts one node per id, alike; their config paths in the same order. */
  startNodes(nodeIds: readonly string[], options: FleetNodeOptions): string[];
}

/**
 * Call in a describe block: requires the build before its tests and tears each test's fleet down
 * after it. The returned function opens a fresh fleet on `kind` named `label`.
 */
export function useNodeFleet(kind: StoreKind): (label: string) => Promise<NodeFleet> {
  let target: Target | null = null;
  let store: Store | null = null;
  const nodes: NodeProcess[] = [];

  beforeAll(() => requireBuild());

  afterEach(async (context) => {
    await killAll(nodes.splice(0));
    await store?.close();
    await target?.cleanup(context.task.result?.state === "fail");
    target = null;
    store = null;
  });

  return async (label) => {
    const t = await createTarget(kind, label);
    target = t;
    store = await t.open();
    const start = (nodeId: string, o: FleetNodeOptions) => {
      const config = writeNodeConfig(t, { nodeId, ...o });
      const node = startNode(t, config, nodeId);
      nodes.push(node);
      return { config, node };
    };
    return {
      target: t,
      store,
      records: join(t.dir, "records.jsonl"),
      startNode: start,
      startNodes: (ids, o) => ids.map((id) => start(id, o).config),
    };
  };
}
