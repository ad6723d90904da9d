/**
 * What a command handler may touch: a narrow slice of the store, the sender and their standing,
 * the permission policy from the node config, and the DAG library loader. Chat (the inbox step),
 * the CLI and the HTTP API each build one of these and call the same table (table.ts).
 */
import type { DagFormat } from "../../domain/dag.js";
import type { SenderStanding } from "../../ports/permissions.js";
import type {
  AfterStore,
  DefinitionStore,
  LeaderFence,
  LeaseStore,
  NodeStore,
  PolicyStore,
  RoomPolicy,
  RunStore,
  Scheduler,
} from "../../ports/store.js";

/** The store capabilities handlers use: run decisions and reads, definitions, the room cap, nodes, the lease. */
export type CommandStore = Pick<
  RunStore,
  | "createRun"
  | "confirmRun"
  | "rejectRun"
  | "cancelRun"
  | "getRun"
  | "getRunById"
  | "listRuns"
  | "pageRuns"
  | "listTasks"
  | "countTaskStatuses"
  | "getTask"
  | "decideGate"
  | "markTask"
> &
  Pick<
    DefinitionStore,
    "getDefinition" | "listDefinitionRuns" | "listScheduledDefinitions" | "changeSchedule"
  > &
  Pick<AfterStore, "listAfterDefinitions" | "listAfterFirings"> &
  Pick<Scheduler, "setRoomCap" | "getRoomCap" | "roomLoad"> &
  Pick<PolicyStore, "getRoomPolicy" | "setRoomPolicy" | "proposePolicyChange" | "getPolicyProposal"> &
  Pick<NodeStore, "listNodes"> &
  Pick<LeaseStore, "getLease"> & {
    /** The store's clock, so replies show times every node agrees on. */
    now(): Promise<number>;
  };

/** The permission and confirmation settings of the node config (`permissions`, `limits.confirm_timeout`). */
export interface CommandPolicy {
  /** Room power level needed for publish, confirm, reject, cancel, retry and cap (config default 50). */
  requiredPowerLevel: number;
  /** User ids allowed those commands whatever their power level. */
  allowlist: readonly string[];
  /** Nobody may confirm a run they published (the local operator excepted, see permissions.ts). */
  twoPersonRule: boolean;
  /** Publishers whose runs start without a confirmation step. */
  autoConfirm: readonly string[];
  /** Webhooks (by hook id) whose runs start without a confirmation step; absent: none. */
  hookAutoConfirm?: readonly string[];
  /** Who may read task output with `logs`: operators (the default) or anyone in the room. */
  logs?: "operators" | "anyone";
  /** Who may ask for pictures with `graph`: anyone in the room (the default) or operators. */
  graph?: "operators" | "anyone";
  /** A pending run expires when nobody confirms it within this time. */
  confirmTimeoutMs: number;
  /**
   * A node whose heartbeat is older than this does not count: its actions are not "known" when a DAG
   * is checked, and `!dag nodes` shows it as gone (retention.node_gone_after).
   */
  nodeStaleAfterMs: number;
}

/**
 * Reads a DAG file of the node's library folder by name (already checked against the library name
 * pattern). The node implements it (the app does not read files); a node without a library answers
 * `{ ok: false, message: "this node has no DAG library folder configured" }`.
 */
export type DagLibrary = (
  name: string,
) => Promise<{ ok: true; text: string; format: DagFormat } | { ok: false; message: string }>;

export interface HandlerContext {
  store: CommandStore;
  /** The leader's fence for this room; null where the caller does not lead (writes then answer "not-leader"). */
  fence: LeaderFence | null;
  roomId: string;
  sender: string;
  /**
   * The chat event of the command: an inbox row that a state-changing handler marks handled in the
   * same transaction as its effect (CommandContext), and the publish event a status card
   * threads under. Null from the CLI and HTTP.
   */
  eventId: string | null;
  standing: SenderStanding;
  policy: CommandPolicy;
  loadDag: DagLibrary;
}

/** The room policy a CommandPolicy carries (what the store holds for the room). */
export function roomPolicyOf(policy: CommandPolicy): RoomPolicy {
  return {
    powerLevel: policy.requiredPowerLevel,
    allow: [...policy.allowlist],
    twoPersonRule: policy.twoPersonRule,
    autoConfirm: [...policy.autoConfirm],
    ...(policy.hookAutoConfirm === undefined ? {} : { hookAutoConfirm: [...policy.hookAutoConfirm] }),
    logs: policy.logs ?? "operators",
    ...(policy.graph === undefined ? {} : { graph: policy.graph }),
  };
}

/** A CommandPolicy whose permissions are the room's stored policy; the node's own settings stay. */
export function withRoomPolicy(policy: CommandPolicy, room: RoomPolicy): CommandPolicy {
  return {
    ...policy,
    requiredPowerLevel: room.powerLevel,
    allowlist: room.allow,
    twoPersonRule: room.twoPersonRule,
    autoConfirm: room.autoConfirm,
    ...(room.hookAutoConfirm === undefined ? {} : { hookAutoConfirm: room.hookAutoConfirm }),
    logs: room.logs,
    ...(room.graph === undefined ? {} : { graph: room.graph }),
  };
}
