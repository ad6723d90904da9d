/**
 * An edge node's engine (docs/operations.md, "Edge nodes"): only a heartbeat and a worker, over a
 * store port that is not a store connection but the core nodes' HTTP API (src/adapters/edge/). No
 * lease keeper, no leader loop, no chat: those need the store, and the core nodes hold it. The
 * worker is the same Worker as a core node's (docs/architecture.md §3, §4 step 4): its claims, renewals
 * and finishes are fenced by the same tokens, checked by the store behind the core.
 */
import type { Clock } from "../ports/clock.js";
import type { Executor } from "../ports/executor.js";
import type { Logger } from "../ports/logger.js";
import type { NodeStore, Session } from "../ports/store.js";
import type { EngineSettings } from "./node.js";
import type { StopOptions } from "./node-lifecycle.js";
import type { WorkerDeps } from "./worker.js";
import { gracefulStop, startHeartbeat, workerSettings } from "./node-lifecycle.js";
import { Worker } from "./worker.js";

export type EdgeSettings = Pick<
  EngineSettings,
  | "nodeId"
  | "labels"
  | "capacity"
  | "roomIds"
  | "actions"
  | "taskLeaseMs"
  | "taskRenewEveryMs"
  | "taskMarginMs"
  | "heartbeatEveryMs"
  | "workerPollMs"
> & { debounceMs: number };

export interface EdgeDeps {
  store: WorkerDeps["store"] & Pick<NodeStore, "heartbeat" | "removeNode">;
  executor: Executor;
  clock: Clock;
  logger: Logger;
  bootId: string;
}

export interface EdgeNode {
  readonly session: Session;
  runningTasks(): number;
  /** The worker's claims so far, by why they were sent (Worker.claims; the bench reads them). */
  readonly claims: Worker["claims"];
  /** Stop claiming, let running tasks finish (or kill them), stop the heartbeat, remove the node's row. */
  stop(options?: StopOptions): Promise<void>;
}

export function startEdgeNode(settings: EdgeSettings, deps: EdgeDeps): EdgeNode {
  const session: Session = { nodeId: settings.nodeId, bootId: deps.bootId };
  const log = deps.logger.child({ node: settings.nodeId });
  const { store, clock } = deps;
  const heartbeat = startHeartbeat(settings, session, settings.heartbeatEveryMs, {
    store,
    clock,
    logger: log,
  });
  const worker = new Worker(workerSettings(settings, session, settings.debounceMs), {
    store,
    executor: deps.executor,
    clock,
    logger: log,
  });
  worker.start();
  log.info(
    {
      rooms: settings.roomIds,
      labels: settings.labels,
      capacity: settings.capacity,
      actions: [...settings.actions.keys()],
    },
    "edge node started",
  );

  const stopper = gracefulStop({
    worker,
    heartbeat,
    store,
    session,
    clock,
    logger: log,
    stoppedMessage: "edge node stopped",
  });
  return {
    session,
    runningTasks: () => worker.runningCount,
    claims: worker.claims,
    stop: (options) => stopper.stop(options),
  };
}
