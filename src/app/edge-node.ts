/**
 * An edge node's engine (docs/operations.md, "Edge nodes"): only a heartbeat and a worker, over a
 * store port that is not a store connection but the core nodes' HTTP API (src/adapters/edge/). No
 * lease keeper, no leader loop, no chat: those need the store, and the core nodes hold it. The
 * worker is the same Worker as a core node's (docs/architecture.md §3, §4 step 4): its claims, renewals
 * and finishes are fenced by the same tokens, checked by the store behind the core.
 */
import { FLEET_PROTOCOL, RELEASE } from "../domain/release.js";
import { publicTemplate } from "../domain/action-argv.js";
import type { Clock } from "../ports/clock.js";
import type { Executor } from "../ports/executor.js";
import type { Logger } from "../ports/logger.js";
import type { NodeStore, Session } from "../ports/store.js";
import type { EngineSettings, StopOptions } from "./node.js";
import type { WorkerDeps } from "./worker.js";
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
  /** Stop claiming, let running tasks finish (or kill them), stop the heartbeat, remove the node's row. */
  stop(options?: StopOptions): Promise<void>;
}

export function startEdgeNode(settings: EdgeSettings, deps: EdgeDeps): EdgeNode {
  const session: Session = { nodeId: settings.nodeId, bootId: deps.bootId };
  const log = deps.logger.child({ node: settings.nodeId });
  const { store, clock } = deps;
  const actionSpecs = Object.fromEntries(
    [...settings.actions].map(([name, action]) => [name, publicTemplate(action)]),
  );
  const heartbeatStop = new AbortController();
  const heartbeat = (async () => {
    while (!heartbeatStop.signal.aborted) {
      try {
        await store.heartbeat({
          session,
          labels: settings.labels,
          capacity: settings.capacity,
          actions: [...settings.actions.keys()],
          roomIds: settings.roomIds,
          actionSpecs,
          release: RELEASE,
          protocol: FLEET_PROTOCOL,
        });
      } catch (err) {
        log.warn({ err: String(err) }, "heartbeat failed");
      }
      await clock.sleep(settings.heartbeatEveryMs, heartbeatStop.signal);
    }
  })();
  const worker = new Worker(
    {
      session,
      roomIds: settings.roomIds,
      labels: settings.labels,
      capacity: settings.capacity,
      actions: settings.actions,
      taskLeaseMs: settings.taskLeaseMs,
      ...(settings.taskRenewEveryMs === undefined ? {} : { renewEveryMs: settings.taskRenewEveryMs }),
      ...(settings.taskMarginMs === undefined ? {} : { marginMs: settings.taskMarginMs }),
      pollMs: settings.workerPollMs,
      debounceMs: settings.debounceMs,
    },
    { store, executor: deps.executor, clock, logger: log },
  );
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

  let stopping: Promise<void> | null = null;
  return {
    session,
    runningTasks: () => worker.runningCount,
    stop(options: StopOptions = {}) {
      if (options.abortRunning === true && stopping !== null) {
        void worker.stop({ abortRunning: true });
        return stopping;
      }
      stopping ??= (async () => {
        const stopped = worker.stop(options);
        // Past the grace, what still runs is killed: its lease expires and the task is retried.
        if (options.abortRunning !== true && options.graceMs !== undefined) {
          const done = new AbortController();
          void stopped.finally(() => done.abort());
          void clock.sleep(options.graceMs, done.signal).then(() => {
            if (!done.signal.aborted && worker.runningCount > 0) void worker.stop({ abortRunning: true });
          });
        }
        await stopped;
        heartbeatStop.abort();
        await heartbeat;
        try {
          await store.removeNode(session);
        } catch (err) {
          log.warn({ err: String(err) }, "could not remove the node row");
        }
        log.info("edge node stopped");
      })();
      return stopping;
    },
  };
}
