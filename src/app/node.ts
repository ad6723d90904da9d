/**
 * One node's engine: its heartbeat, a lease keeper per room (running the leader loop while it leads)
 * and its worker, over an injected Store, Executor, Clock and Logger. No chat here: a chat adapter
 * feeds the inbox and drains the outbox beside it.
 */
import { publicTemplate } from "../domain/action-argv.js";
import type { Clock } from "../ports/clock.js";
import type { ActionDefinition, Executor } from "../ports/executor.js";
import type { Logger } from "../ports/logger.js";
import type { LeaderFence, Session, Store } from "../ports/store.js";
import type { LeaseTimings } from "./lease-keeper.js";
import type { InboxStep, LeaderTimings, RetentionSettings } from "./leader.js";
import { LeaseKeeper } from "./lease-keeper.js";
import { runLeaderLoop } from "./leader.js";
import { Worker } from "./worker.js";

export interface EngineSettings {
  nodeId: string;
  labels: string[];
  capacity: number;
  /** Rooms this node leads (when elected) and serves tasks of. */
  roomIds: string[];
  actions: ReadonlyMap<string, ActionDefinition>;
  lease: LeaseTimings;
  leader: LeaderTimings;
  /** The task lease a worker holds while running a task. */
  taskLeaseMs: number;
  /** How often a worker renews a running task's lease; default a third of taskLeaseMs. */
  taskRenewEveryMs?: number;
  /** How long before its lease could expire a task's action must be gone; default a tenth of taskLeaseMs. */
  taskMarginMs?: number;
  heartbeatEveryMs: number;
  /** Worker's claim poll with no change (retry backoffs passing). */
  workerPollMs: number;
  /** Whether this node runs tasks (a coordinator-only node sets false). */
  work: boolean;
  /** The room cap this node's config asks for, applied only to rooms that never had one (initRoomCap). */
  initialCap?: number | null;
  /** What the leader prunes and when; null or absent keeps everything. */
  retention?: RetentionSettings | null;
}

export interface EngineDeps {
  store: Store;
  executor: Executor;
  clock: Clock;
  logger: Logger;
  /** The inbox processing step of the command table; null leaves commands waiting in the inbox. */
  processInbox: InboxStep | null;
  /** The boot id of this life of the node; random by default. */
  bootId?: string;
  /** Observes leadership changes of this node's rooms. */
  onLeadership?: (roomId: string, fence: LeaderFence | null) => void;
}

export interface StopOptions {
  /** Kill running actions and write nothing (their leases expire and another node retries them). */
  abortRunning?: boolean;
}

export interface EngineNode {
  readonly session: Session;
  /** The fence while this node leads `roomId`, else null. */
  leading(roomId: string): LeaderFence | null;
  runningTasks(): number;
  /**
   * Graceful stop: stop claiming, hand leadership over at once (release every lease), let running
   * tasks finish (or abort them), stop the heartbeat and remove this node's row.
   */
  stop(options?: StopOptions): Promise<void>;
}

export function startEngineNode(settings: EngineSettings, deps: EngineDeps): EngineNode {
  const bootId = deps.bootId ?? randomBootId();
  const session: Session = { nodeId: settings.nodeId, bootId };
  const log = deps.logger.child({ node: settings.nodeId });
  const { store, clock } = deps;

  const actionSpecs = Object.fromEntries(
    [...settings.actions].map(([name, action]) => [name, publicTemplate(action)]),
  );
  const heartbeatStop = new AbortController();
  const beat = async (): Promise<void> => {
    try {
      await store.heartbeat({
        session,
        labels: settings.labels,
        capacity: settings.capacity,
        actions: [...settings.actions.keys()],
        roomIds: settings.roomIds,
        actionSpecs,
      });
    } catch (err) {
      log.warn({ err: String(err) }, "heartbeat failed");
    }
  };
  const heartbeat = (async () => {
    if (settings.initialCap !== undefined && settings.initialCap !== null) {
      const cap = settings.initialCap;
      for (const roomId of settings.roomIds) {
        await store.initRoomCap(roomId, cap).catch((err: unknown) => {
          log.warn({ room: roomId, err: String(err) }, "could not apply the configured room cap");
        });
      }
    }
    while (!heartbeatStop.signal.aborted) {
      await beat();
      await clock.sleep(settings.heartbeatEveryMs, heartbeatStop.signal);
    }
  })();

  const keepers = settings.roomIds.map(
    (roomId) =>
      new LeaseKeeper({
        store,
        clock,
        logger: log,
        session,
        roomId,
        timings: settings.lease,
        lead: (fence, signal, deposed) =>
          runLeaderLoop(
            {
              store,
              clock,
              logger: log,
              timings: settings.leader,
              processInbox: deps.processInbox,
              retention: settings.retention ?? null,
            },
            fence,
            signal,
            deposed,
          ),
        onChange: (fence) => deps.onLeadership?.(roomId, fence),
      }),
  );

  const worker = settings.work
    ? new Worker(
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
          debounceMs: settings.leader.debounceMs,
        },
        { store, executor: deps.executor, clock, logger: log },
      )
    : null;

  // The row first, so `nodes` and the leader's view of actions see this node before it claims.
  let stopRequested = false;
  void beat().then(() => {
    if (stopRequested) return;
    for (const k of keepers) k.start();
    worker?.start();
  });
  log.info(
    { boot: bootId, rooms: settings.roomIds, labels: settings.labels, capacity: settings.capacity },
    "node started",
  );

  let stopping: Promise<void> | null = null;
  return {
    session,
    leading: (roomId) => keepers[settings.roomIds.indexOf(roomId)]?.fence ?? null,
    runningTasks: () => worker?.runningCount ?? 0,
    stop(options: StopOptions = {}) {
      if (options.abortRunning === true && stopping !== null) {
        // A second, harder stop while draining: kill what still runs.
        void worker?.stop({ abortRunning: true });
        return stopping;
      }
      stopRequested = true;
      stopping ??= (async () => {
        const workerStopped = worker?.stop(options) ?? Promise.resolve();
        await Promise.all(keepers.map((k) => k.stop()));
        await workerStopped;
        heartbeatStop.abort();
        await heartbeat;
        try {
          await store.removeNode(session);
        } catch (err) {
          log.warn({ err: String(err) }, "could not remove the node row");
        }
        log.info("node stopped");
      })();
      return stopping;
    },
  };
}

function randomBootId(): string {
  return globalThis.crypto.randomUUID().slice(0, 8);
}
