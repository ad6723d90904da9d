/**
 * The wiring of `dagbot run`: N in-process engine nodes on one store, and the check that keeps them
 * out of a room someone else's fleet serves. A one-shot run on a shared store would otherwise join
 * that room as full nodes: lead it, fire its schedules and run its tasks (docs/architecture.md,
 * "Faces"). The CLI parses the options and prints the progress; this starts and stops the nodes.
 */
import { systemClock } from "../adapters/clock/system-clock.js";
import { startEngineNode } from "../app/node.js";
import { isApprovedAfter } from "../app/after.js";
import { isActiveSchedule } from "../app/schedules.js";
import type { NodeConfig } from "../config/node-config.js";
import type { Logger } from "../ports/logger.js";
import type { Store } from "../ports/store.js";
import { commandStep } from "./command-step.js";
import { engineSettings, nodeExecutor } from "./engine-settings.js";

export interface LocalNodes {
  /** Stops every node; `abortRunning` kills running actions instead of letting them finish. */
  stop(options: { abortRunning: boolean }): Promise<void>;
}

export function startLocalNodes(
  config: NodeConfig,
  store: Store,
  logger: Logger,
  nodeIds: readonly string[],
): LocalNodes {
  const executor = nodeExecutor(config, process.env, logger);
  // A run has tasks to start within moments: the supervisor's start overlaps the election and publish.
  executor.prepare?.();
  const processInbox = commandStep(config, store, logger);
  const nodes = nodeIds.map((nodeId) =>
    startEngineNode(engineSettings(config, { nodeId }), {
      store,
      executor,
      clock: systemClock,
      logger,
      processInbox,
    }),
  );
  return {
    stop: async (options) => {
      await Promise.all(nodes.map((n) => n.stop(options)));
    },
  };
}

/**
 * What else lives in a room: nodes other than ours with a fresh heartbeat, active schedules, and
 * approved DAGs that run after another DAG's runs (a leader fires those too).
 */
export interface RoomActivity {
  liveNodes: string[];
  schedules: string[];
  triggers: string[];
}

/**
 * Who else uses the room. A node counts as live while its heartbeat is younger than two lease TTLs
 * (a node that stopped a moment ago, e.g. an earlier `dagbot run`, does not make a room shared);
 * nodes named like ours are earlier lives of this same command.
 */
export async function roomActivity(
  store: Store,
  config: NodeConfig,
  roomId: string,
  ownNodeIds: readonly string[],
): Promise<RoomActivity> {
  const nodes = await store.listNodes();
  const liveNodes = nodes
    .filter(
      (n) =>
        n.roomIds.includes(roomId) &&
        n.heartbeatAgeMs <= 2 * config.lease.ttlMs &&
        !ownNodeIds.includes(n.session.nodeId),
    )
    .map((n) => n.session.nodeId);
  const definitions = await store.listScheduledDefinitions(roomId, { limit: 100 });
  const schedules = definitions.filter(isActiveSchedule).map((d) => d.dagId);
  const afters = await store.listAfterDefinitions(roomId, { limit: 100 });
  const triggers = afters.filter(isApprovedAfter).map((d) => d.dagId);
  return {
    liveNodes: [...new Set(liveNodes)].sort(),
    schedules: schedules.sort(),
    triggers: triggers.sort(),
  };
}

export function isShared(activity: RoomActivity): boolean {
  return activity.liveNodes.length > 0 || activity.schedules.length > 0 || activity.triggers.length > 0;
}
