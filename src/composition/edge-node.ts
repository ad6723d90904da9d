/**
 * The composition root of an edge node (`dagbot node` with an [edge] section; docs/operations.md,
 * "Edge nodes"): no store is opened; the worker and the heartbeat talk to the core nodes' HTTP API
 * with the edge token, until SIGINT/SIGTERM (a first signal drains, a second kills running actions).
 */
import { systemClock } from "../adapters/clock/system-clock.js";
import { EdgeStore } from "../adapters/edge/edge-store.js";
import { startEdgeNode } from "../app/edge-node.js";
import { DEFAULT_LEADER_TIMINGS } from "../app/leader.js";
import type { EdgeConfig, NodeConfig } from "../config/node-config.js";
import type { Logger } from "../ports/logger.js";
import { engineSettings, nodeExecutor } from "./engine-settings.js";
import { STOP_MESSAGES, onStopSignals } from "./stop-signals.js";

export async function runEdgeNode(config: NodeConfig, edge: EdgeConfig, logger: Logger): Promise<number> {
  const store = new EdgeStore({
    cores: edge.cores,
    token: edge.token,
    logger,
    requestTimeoutMs: edge.requestTimeoutMs,
  });
  const settings = engineSettings(config);
  const bootId = globalThis.crypto.randomUUID().slice(0, 8);
  logger.info({ cores: edge.cores, node: config.nodeId }, "edge node: no store; talking to the core nodes");
  // A core node's settings serve as they are: the edge reads only the fields EdgeSettings names.
  const node = startEdgeNode(
    { ...settings, debounceMs: DEFAULT_LEADER_TIMINGS.debounceMs },
    { store, executor: nodeExecutor(config, process.env, logger), clock: systemClock, logger, bootId },
  );
  await new Promise<void>((resolve) => {
    onStopSignals((stage, signal) => {
      logger.info({ signal }, STOP_MESSAGES[stage]);
      void node.stop({ abortRunning: stage === "hard", graceMs: config.stopGraceMs }).then(resolve);
    });
  });
  store.close();
  return 0;
}
