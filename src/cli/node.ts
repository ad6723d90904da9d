/**
 * `dagbot node`: a headless engine node (no chat) until SIGINT/SIGTERM. The composition root of a
 * node: the only place besides cli.ts that reads env and signals. A first signal stops gracefully
 * (hand leadership over, stop claiming, let running tasks finish); a second one kills running
 * actions and leaves their tasks to be retried elsewhere once their leases expire.
 */
import type { Command } from "commander";
import { createProcessExecutor, pickBaseEnv } from "../adapters/exec/process-executor.js";
import { systemClock } from "../adapters/clock/system-clock.js";
import { startEngineNode } from "../app/node.js";
import { describeStoreLocation } from "../config/store-location.js";
import { commandStep } from "./command-step.js";
import {
  engineSettings,
  makeLogger,
  openConfiguredStore,
  resolveConfig,
  runCli,
  withCommonOptions,
} from "./engine-setup.js";
import type { CommonOptions } from "./engine-setup.js";

interface NodeOptions extends CommonOptions {
  nodeId?: string;
}

export function registerNode(program: Command): void {
  withCommonOptions(
    program
      .command("node")
      .description(
        "Run a headless node (engine only, no chat): lead its rooms when elected, run tasks, until SIGINT or SIGTERM.",
      )
      .option("--node-id <id>", "this node's id (overrides DAGBOT_NODE_ID and node_id)"),
    "Logs are JSON lines on stderr. The first SIGINT/SIGTERM stops gracefully: leadership is released at once,\n" +
      "no new task is claimed and running tasks finish; a second signal kills running actions (their tasks are\n" +
      "retried elsewhere once their leases expire). Exit status: 0 after a stop, 2 for a bad config, 1 when the\n" +
      "store cannot be opened.",
  ).action((options: NodeOptions) => runCli("node", () => runNode(options)));
}

async function runNode(options: NodeOptions): Promise<number> {
  const config = resolveConfig(options, options.nodeId === undefined ? {} : { nodeId: options.nodeId });
  const logger = makeLogger(config);
  const store = await openConfiguredStore(config);
  logger.info({ store: describeStoreLocation(config.store), node: config.nodeId }, "store open");

  const node = startEngineNode(engineSettings(config), {
    store,
    executor: createProcessExecutor({ baseEnv: pickBaseEnv(process.env) }),
    clock: systemClock,
    logger,
    processInbox: commandStep(config, store, logger),
  });

  let signals = 0;
  const stopped = new Promise<void>((resolve) => {
    const onSignal = (signal: NodeJS.Signals): void => {
      signals += 1;
      logger.info(
        { signal },
        signals === 1 ? "stopping gracefully" : "stopping now: killing running actions",
      );
      void node.stop({ abortRunning: signals > 1 }).then(resolve);
    };
    process.on("SIGINT", onSignal);
    process.on("SIGTERM", onSignal);
  });
  await stopped;
  await store.close();
  return 0;
}
