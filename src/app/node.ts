/**
 * One node's engine: its heartbeat, a lease keeper per room (running the leader loop while it leads)
 * and its worker, over an injected Store, Executor, Clock and Logger. No chat here: a chat adapter
 * feeds the inbox and drains the outbox beside it.
 */
import type { Clock } from "../ports/clock.js";
import type { ActionDefinition, Executor } from "../ports/executor.js";
import type { Logger } from "../ports/logger.js";
import type {
  ChangeFeed,
  LeaderFence,
  LeaseStore,
  NodeHeartbeat,
  RoomPolicy,
  Session,
  Store,
} from "../ports/store.js";
import type { EngineLoop, EngineObserver } from "./engine-observer.js";
import type { LeaseTimings } from "./lease-keeper.js";
import type { InboxStep, LeaderTimings, RetentionSettings } from "./leader.js";
import type { StopOptions } from "./node-lifecycle.js";
import type { ScheduleAuthority } from "./schedules.js";
import { LEASE_BATCH_WINDOW_MS, LeaseBatcher } from "./lease-batcher.js";
import { LeaseKeeper } from "./lease-keeper.js";
import { runLeaderLoop } from "./leader.js";
import { gracefulStop, startHeartbeat, workerSettings } from "./node-lifecycle.js";
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
  /**
   * The room policy this node's config asks for: set in rooms that have none; where the store holds
   * another one and a setting the config states disagrees, the node says so and does not lead.
   */
  policy?: { wanted: RoomPolicy; stated: readonly PolicySetting[] } | null;
}

export type PolicySetting =
  "power_level" | "allow" | "two_person_rule" | "auto_confirm" | "hook_auto_confirm" | "logs";

const POLICY_FIELD: Record<PolicySetting, keyof RoomPolicy> = {
  power_level: "powerLevel",
  allow: "allow",
  two_person_rule: "twoPersonRule",
  auto_confirm: "autoConfirm",
  hook_auto_confirm: "hookAutoConfirm",
  logs: "logs",
};

/** The stated settings whose value differs from the room's policy, as `key: config X, room Y`. */
export function policyDisagreements(
  wanted: RoomPolicy,
  stated: readonly PolicySetting[],
  room: RoomPolicy,
): string[] {
  // A list absent from a policy stored before it existed (hook_auto_confirm) is an empty one.
  const norm = (v: unknown): string =>
    JSON.stringify(Array.isArray(v) ? [...(v as string[])].sort() : v === undefined ? [] : v);
  return stated
    .filter((key) => norm(wanted[POLICY_FIELD[key]]) !== norm(room[POLICY_FIELD[key]]))
    .map((key) => `${key}: config ${norm(wanted[POLICY_FIELD[key]])}, room ${norm(room[POLICY_FIELD[key]])}`);
}

/**
 * The policy changes, as typed after `policy` (`["logs", "anyone"]`), that make the room's policy
 * state what the config states: the way out a node held back by a disagreement names, beside
 * changing the config to the room's. A list becomes one addition or removal per member.
 */
export function policyFixes(
  wanted: RoomPolicy,
  stated: readonly PolicySetting[],
  room: RoomPolicy,
): Array<[setting: string, value: string]> {
  const fixes: Array<[string, string]> = [];
  for (const key of stated) {
    const want: unknown = wanted[POLICY_FIELD[key]];
    const have: unknown = room[POLICY_FIELD[key]];
    if (Array.isArray(want) || Array.isArray(have)) {
      const w = (want ?? []) as string[];
      const h = (have ?? []) as string[];
      for (const u of w) if (!h.includes(u)) fixes.push([key, `+${u}`]);
      for (const u of h) if (!w.includes(u)) fixes.push([key, `-${u}`]);
    } else if (want !== have) {
      fixes.push([key, typeof want === "boolean" ? (want ? "on" : "off") : String(want)]);
    }
  }
  return fixes;
}

/** Why a node does not lead a room although it could: its [permissions] disagree with the room's. */
export interface PolicyConflict {
  /** `key: config X, room Y`, one per stated setting that differs. */
  disagreements: string[];
  /** The policy changes that end it (policyFixes); the other way out is a config that matches. */
  fixes: Array<[setting: string, value: string]>;
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
  /**
   * The state of this node's Matrix device, reported with each heartbeat for `!dag nodes`: the
   * encrypted events it could not decrypt so far, the last one's reason, whether it is cross-signed.
   */
  crypto?: () => Pick<NodeHeartbeat, "undecryptable" | "undecryptableReason" | "deviceSigned">;
  /** Observes failed lease renewals and the loops' store errors (the HTTP API's metrics). */
  observer?: EngineObserver;
  /** Whose authority schedules run on (app/schedule-authority.ts); absent: a schedule runs on its approval alone. */
  scheduleAuthority?: ScheduleAuthority | null;
}

export type { StopOptions } from "./node-lifecycle.js";

export interface EngineNode {
  readonly session: Session;
  /** The fence while this node leads `roomId`, else null. */
  leading(roomId: string): LeaderFence | null;
  runningTasks(): number;
  /** The rooms this node does not lead because its [permissions] disagree with theirs, and why. */
  policyConflicts(): ReadonlyMap<string, PolicyConflict>;
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
  const storeErrorOf = (loop: EngineLoop) => (): void => deps.observer?.storeError?.(loop);

  const cap = settings.initialCap;
  const heartbeat = startHeartbeat(settings, session, settings.heartbeatEveryMs, {
    store,
    clock,
    logger: log,
    ...(deps.crypto === undefined ? {} : { extra: deps.crypto }),
    onError: storeErrorOf("heartbeat"),
    ...(cap === undefined || cap === null
      ? {}
      : {
          before: async () => {
            for (const roomId of settings.roomIds) {
              await store.initRoomCap(roomId, cap).catch((err: unknown) => {
                log.warn({ room: roomId, err: String(err) }, "could not apply the configured room cap");
              });
            }
          },
        }),
  });

  // The rooms' acquires and renewals that coincide go to the store as one statement.
  const batcher = new LeaseBatcher(
    store,
    session,
    settings.lease.ttlMs,
    LEASE_BATCH_WINDOW_MS,
    settings.roomIds.length,
  );
  const leaseStore: LeaseStore & ChangeFeed = {
    acquireLease: (roomId, s, ttlMs) => batcher.acquireLease(roomId, s, ttlMs),
    renewLease: (fence, ttlMs) => batcher.renewLease(fence, ttlMs),
    releaseLease: (fence) => store.releaseLease(fence),
    getLease: (roomId) => store.getLease(roomId),
    syncLeases: (s, ttlMs, wishes) => store.syncLeases(s, ttlMs, wishes),
    onChange: (listener, topics) => store.onChange(listener, topics),
  };
  const keepers = settings.roomIds.map(
    (roomId) =>
      new LeaseKeeper({
        store: leaseStore,
        alignRenewals: true,
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
              schedules: store,
              afters: store,
              scheduleAuthority: deps.scheduleAuthority ?? null,
              onStoreError: storeErrorOf("leader"),
            },
            fence,
            signal,
            deposed,
          ),
        onChange: (fence) => deps.onLeadership?.(roomId, fence),
        onRenewFailure: (why) => deps.observer?.leaseRenewFailed?.(roomId, why),
        onStoreError: storeErrorOf("lease"),
      }),
  );

  const worker = settings.work
    ? new Worker(workerSettings(settings, session, settings.leader.debounceMs), {
        store,
        executor: deps.executor,
        clock,
        logger: log,
        onStoreError: storeErrorOf("worker"),
      })
    : null;
  const stopper = gracefulStop({
    worker,
    heartbeat,
    store,
    session,
    clock,
    logger: log,
    // Leadership is handed over at once (every lease released), not after the drain.
    alongside: () => Promise.all(keepers.map((k) => k.stop())),
    stoppedMessage: "node stopped",
  });

  /**
   * Sets the room's policy where none is stored; where one is and this config states something else,
   * says so loudly and returns false: a node must not lead under rules the room did not choose.
   */
  const conflicts = new Map<string, PolicyConflict>();
  /**
   * Sets the room's policy where none is stored; where one is and this config states something else,
   * says so loudly and waits, reading the room's policy again every acquire interval, until the two
   * agree (a `policy` change made them so): a node must not lead under rules the room did not choose,
   * and must not need a restart once they agree. False only when the node stops first.
   */
  const mayLead = async (roomId: string): Promise<boolean> => {
    const policy = settings.policy;
    if (policy === undefined || policy === null) return true;
    let said = "";
    while (!heartbeat.signal.aborted && !stopper.requested) {
      try {
        const { set, stored } = await store.initRoomPolicy(roomId, policy.wanted, settings.nodeId);
        if (set) {
          log.info({ room: roomId, policy: stored.policy }, "set the room's policy from this node's config");
          return true;
        }
        const diff = policyDisagreements(policy.wanted, policy.stated, stored.policy);
        if (diff.length === 0) {
          if (conflicts.delete(roomId))
            log.info(
              { room: roomId },
              "this node's [permissions] now agree with the room's policy; it may lead",
            );
          return true;
        }
        const fixes = policyFixes(policy.wanted, policy.stated, stored.policy);
        conflicts.set(roomId, { disagreements: diff, fixes });
        if (said !== diff.join("; ")) {
          said = diff.join("; ");
          log.error(
            {
              room: roomId,
              disagreements: diff,
              setBy: stored.setBy,
              fixes: fixes.map((f) => `policy ${f.join(" ")}`),
            },
            `this node's [permissions] disagree with the room's policy in the store (${said}); the room's policy stays, and this node will not lead the room until they agree: change the room's policy to the config's (${fixes.map((f) => `policy ${f.join(" ")}`).join(", ")}) or the config to the room's`,
          );
        }
      } catch (err) {
        log.warn({ room: roomId, err: String(err) }, "could not read the room's policy; retrying");
      }
      await clock.sleep(settings.lease.acquireEveryMs, heartbeat.signal);
    }
    return false;
  };

  // The row first, so `nodes` and the leader's view of actions see this node before it claims.
  void heartbeat.beat().then(async () => {
    if (stopper.requested) return;
    worker?.start();
    await Promise.all(
      keepers.map(async (k, i) => {
        const roomId = settings.roomIds[i] ?? "";
        if ((await mayLead(roomId)) && !stopper.requested) k.start();
      }),
    );
  });
  log.info(
    { boot: bootId, rooms: settings.roomIds, labels: settings.labels, capacity: settings.capacity },
    "node started",
  );

  return {
    session,
    leading: (roomId) => keepers[settings.roomIds.indexOf(roomId)]?.fence ?? null,
    runningTasks: () => worker?.runningCount ?? 0,
    policyConflicts: () => conflicts,
    stop: (options) => stopper.stop(options),
  };
}

function randomBootId(): string {
  return globalThis.crypto.randomUUID().slice(0, 8);
}
