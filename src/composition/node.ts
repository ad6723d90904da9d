/**
 * The composition root of a headless engine node (`dagbot node`, registered in
 * src/cli/subcommands/node.ts), until SIGINT/SIGTERM: the only place besides cli.ts that reads env
 * and signals for it. A first signal stops gracefully
 * (hand leadership over, stop claiming, let running tasks finish); a second one kills running
 * actions and leaves their tasks to be retried elsewhere once their leases expire.
 */
import { systemClock } from "../adapters/clock/system-clock.js";
import { startEngineNode } from "../app/node.js";
import { describeStoreLocation } from "../config/store-location.js";
import { commandPolicy, commandStep, localPermissions } from "./command-step.js";
import { scheduleAuthority } from "../app/schedule-authority.js";
import { engineMetricsRelay, startNodeHttpApi } from "./http-api.js";
import { engineSettings, makeLogger, nodeExecutor } from "./engine-settings.js";
import { openNodeStore } from "./store-open.js";
import { runEdgeNode } from "./edge-node.js";
import { ownNodeId } from "./node-identity.js";
import { resolveConfig } from "./config-resolve.js";
import type { CommonOptions } from "./config-resolve.js";
import type { StopStage } from "./stop-signals.js";
import { STOP_MESSAGES, onStopSignals } from "./stop-signals.js";

export interface NodeOptions extends CommonOptions {
  nodeId?: string;
}

export async function runNode(options: NodeOptions): Promise<number> {
  const config = resolveConfig(options, options.nodeId === undefined ? {} : { nodeId: options.nodeId }, {
    edge: true,
  });
  const logger = makeLogger(config);
  // An edge node opens no store: its worker talks to the core nodes (docs/operations.md, "Edge nodes").
  if (config.edge !== null) return runEdgeNode(config, config.edge, logger);

  // Signals are heard from the start: one that comes while the store is still unreachable ends the
  // wait (exit 0) instead of being lost.
  let onStop: (abortRunning: boolean) => void = () => {};
  let signalled!: () => void;
  let latest: StopStage | null = null;
  const firstSignal = new Promise<void>((resolve) => (signalled = resolve));
  onStopSignals((stage, signal) => {
    latest = stage;
    logger.info({ signal }, STOP_MESSAGES[stage]);
    signalled();
    onStop(stage === "hard");
  });

  const store = await openNodeStore(config, logger, firstSignal);
  if (store === null) return 0;
  logger.info({ store: describeStoreLocation(config.store), node: config.nodeId }, "store open");
  const bootId = await ownNodeId(config, store, logger);
  if (bootId === null) {
    await store.close();
    return 2;
  }

  const relay = engineMetricsRelay();
  const node = startEngineNode(engineSettings(config), {
    store,
    bootId,
    executor: nodeExecutor(config, process.env, logger),
    clock: systemClock,
    logger,
    processInbox: commandStep(config, store, logger),
    observer: relay.observer,
    // The same oracle and policy the node's commands are judged by.
    scheduleAuthority: scheduleAuthority({
      store,
      permissions: localPermissions(config),
      policy: commandPolicy(config),
      queueMessages: config.matrix !== null,
    }),
  });

  let api;
  try {
    api = await startNodeHttpApi(config, store, node, logger);
    relay.attach(api);
  } catch (err) {
    // Asked for an HTTP API that cannot listen (address in use, no permission): say so and stop.
    logger.error({ listen: config.http?.listen, err: String(err) }, "the HTTP API cannot listen; stopping");
    await node.stop();
    await store.close();
    return 1;
  }

  const stopped = new Promise<void>((resolve) => {
    onStop = (abortRunning) => {
      void (api?.close() ?? Promise.resolve())
        .catch(() => {})
        .then(() => node.stop({ abortRunning, graceMs: config.stopGraceMs }))
        .then(resolve);
    };
    // A signal that came while the store was being opened.
    if (latest !== null) onStop(latest === "hard");
  });
  await stopped;
  await store.close();
  return 0;
}
