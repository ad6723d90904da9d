/**
 * What every kind of node does around its worker, written once for app/node.ts and
 * app/edge-node.ts: the heartbeat loop that keeps its row in the store, the worker's settings drawn
 * from the node's, and the graceful stop (docs/operations.md, "Stopping a node"): stop claiming,
 * let running tasks finish within stop_grace or kill them, stop the heartbeat, remove the row.
 */
import { FLEET_PROTOCOL, RELEASE } from "../domain/release.js";
import { formatDuration } from "../domain/duration.js";
import { publicTemplate } from "../domain/action-argv.js";
import type { Clock } from "../ports/clock.js";
import type { ActionDefinition } from "../ports/executor.js";
import type { Logger } from "../ports/logger.js";
import type { NodeHeartbeat, NodeStore, Session } from "../ports/store.js";
import type { Worker, WorkerSettings } from "./worker.js";

/** The node settings its heartbeat row and its worker are drawn from. */
export interface NodeShape {
  labels: string[];
  capacity: number;
  roomIds: string[];
  actions: ReadonlyMap<string, ActionDefinition>;
  taskLeaseMs: number;
  taskRenewEveryMs?: number;
  taskMarginMs?: number;
  workerPollMs: number;
}

export interface StopOptions {
  /** Kill running actions and write nothing (their leases expire and another node retries them). */
  abortRunning?: boolean;
  /**
   * A graceful stop waits at most this long for running actions (each named in the log), then
   * kills them as `abortRunning` does (config `stop_grace`). Absent: it waits for them to end.
   */
  graceMs?: number;
}

/** The worker of a node of this shape; the renewal and margin defaults stay the worker's own. */
export function workerSettings(shape: NodeShape, session: Session, debounceMs: number): WorkerSettings {
  return {
    session,
    roomIds: shape.roomIds,
    labels: shape.labels,
    capacity: shape.capacity,
    actions: shape.actions,
    taskLeaseMs: shape.taskLeaseMs,
    ...(shape.taskRenewEveryMs === undefined ? {} : { renewEveryMs: shape.taskRenewEveryMs }),
    ...(shape.taskMarginMs === undefined ? {} : { marginMs: shape.taskMarginMs }),
    pollMs: shape.workerPollMs,
    debounceMs,
  };
}

export interface HeartbeatDeps {
  store: Pick<NodeStore, "heartbeat">;
  clock: Clock;
  logger: Logger;
  /** Fields read anew for each beat (a core node's Matrix device state). */
  extra?: () => Partial<NodeHeartbeat>;
  /** Told of each failed beat, beside the log line (the HTTP API's metrics). */
  onError?: () => void;
  /** Done once before the loop's first beat (a core node's configured room caps). */
  before?: () => Promise<void>;
}

export interface HeartbeatLoop {
  /** One beat now, outside the loop; a failure is logged, never thrown. */
  beat(): Promise<void>;
  /** Aborted once the loop is stopped: what lasts as long as the node's life sleeps on it. */
  readonly signal: AbortSignal;
  /** Ends the loop and waits for its last beat. */
  stop(): Promise<void>;
}

/** Beats every `everyMs` until stopped; a failed beat is logged and the loop goes on. */
export function startHeartbeat(
  shape: NodeShape,
  session: Session,
  everyMs: number,
  deps: HeartbeatDeps,
): HeartbeatLoop {
  const { store, clock, logger: log } = deps;
  const actionSpecs = Object.fromEntries(
    [...shape.actions].map(([name, action]) => [name, publicTemplate(action)]),
  );
  const stopped = new AbortController();
  const beat = async (): Promise<void> => {
    try {
      await store.heartbeat({
        session,
        labels: shape.labels,
        capacity: shape.capacity,
        actions: [...shape.actions.keys()],
        roomIds: shape.roomIds,
        actionSpecs,
        ...deps.extra?.(),
        release: RELEASE,
        protocol: FLEET_PROTOCOL,
      });
    } catch (err) {
      deps.onError?.();
      log.warn({ err: String(err) }, "heartbeat failed");
    }
  };
  const loop = (async () => {
    if (deps.before !== undefined) await deps.before();
    while (!stopped.signal.aborted) {
      await beat();
      await clock.sleep(everyMs, stopped.signal);
    }
  })();
  return {
    beat,
    signal: stopped.signal,
    stop: async () => {
      stopped.abort();
      await loop;
    },
  };
}

/** What a graceful stop needs of a worker: what it runs now, and to stop it. */
export type DrainableWorker = Pick<Worker, "stop" | "runningTasks">;

export interface GracefulStopDeps {
  /** Null for a node that runs no tasks. */
  worker: DrainableWorker | null;
  heartbeat: HeartbeatLoop;
  store: Pick<NodeStore, "removeNode">;
  session: Session;
  clock: Clock;
  logger: Logger;
  /** Stopped while the worker drains, awaited before it (a core node hands its leadership over). */
  alongside?: () => Promise<unknown>;
  /** The last log line, once the row is gone. */
  stoppedMessage: string;
}

export interface GracefulStop {
  /** The first call stops gracefully; a later `abortRunning` one kills what still runs. */
  stop(options?: StopOptions): Promise<void>;
  /** Whether a stop was asked for: what starts late (claiming, leading) checks it first. */
  readonly requested: boolean;
}

export function gracefulStop(deps: GracefulStopDeps): GracefulStop {
  const { worker, clock, logger: log } = deps;

  /**
   * Says which tasks a graceful stop waits for, and kills what still runs once `graceMs` passed: a
   * container's stop grace period ends in a SIGKILL that would leave no word of what it cut short.
   */
  const boundDrain = (w: DrainableWorker, graceMs: number, drained: Promise<void>): void => {
    const waiting = w.runningTasks();
    if (waiting.length === 0) return;
    const grace = formatDuration(graceMs);
    for (const t of waiting)
      log.info(
        { run: t.runId, task: t.taskId, action: t.action, runningMs: t.runningMs },
        `stopping: waiting up to ${grace} for task ${t.taskId} (${t.action}, running for ${formatDuration(t.runningMs)}) to finish`,
      );
    const done = new AbortController();
    void drained.finally(() => done.abort());
    void clock.sleep(graceMs, done.signal).then(() => {
      if (done.signal.aborted) return;
      const left = w.runningTasks();
      if (left.length === 0) return;
      log.warn(
        { tasks: left.map((t) => `${t.runId}/${t.taskId}`) },
        `stop_grace (${grace}) passed: killing ${left.length} running action${left.length === 1 ? "" : "s"}; once their leases expire each task is retried if it has retries left`,
      );
      void w.stop({ abortRunning: true });
    });
  };

  let requested = false;
  let stopping: Promise<void> | null = null;
  return {
    get requested() {
      return requested;
    },
    stop(options: StopOptions = {}) {
      if (options.abortRunning === true && stopping !== null) {
        // A second, harder stop while draining: kill what still runs.
        void worker?.stop({ abortRunning: true });
        return stopping;
      }
      requested = true;
      stopping ??= (async () => {
        const workerStopped = worker?.stop(options) ?? Promise.resolve();
        if (worker !== null && options.abortRunning !== true && options.graceMs !== undefined)
          boundDrain(worker, options.graceMs, workerStopped);
        await deps.alongside?.();
        await workerStopped;
        await deps.heartbeat.stop();
        try {
          await deps.store.removeNode(deps.session);
        } catch (err) {
          log.warn({ err: String(err) }, "could not remove the node row");
        }
        log.info(deps.stoppedMessage);
      })();
      return stopping;
    },
  };
}
