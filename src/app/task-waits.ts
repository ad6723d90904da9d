/**
 * Why a run's tasks wait, from store reads: the room's load and live nodes read once per room (two
 * reads whatever the number of runs or tasks), then the domain rule (src/domain/wait-reasons.ts) per
 * run over the tasks the caller already holds. Every face that shows tasks goes through here.
 */
import type { WaitNode, WaitReason } from "../domain/wait-reasons.js";
import { explainWaits } from "../domain/wait-reasons.js";
import type { NodeStore, RoomLoad, RunRecord, Scheduler, TaskRecord } from "../ports/store.js";

/** What the rule needs of the room, read once for any number of runs. */
export interface RoomWaitFacts {
  load: RoomLoad;
  /** Live nodes serving the room. */
  nodes: WaitNode[];
  /** The store's clock when it was read. */
  now: number;
}

export type WaitReader = Pick<Scheduler, "roomLoad"> &
  Pick<NodeStore, "listNodes"> & { now(): Promise<number> };

/** `liveWithinMs`: a node silent longer than this offers nothing (retention.node_gone_after). */
export async function readRoomWaits(
  store: WaitReader,
  roomId: string,
  liveWithinMs: number,
): Promise<RoomWaitFacts> {
  const [load, nodes, now] = await Promise.all([store.roomLoad(roomId), store.listNodes(), store.now()]);
  return {
    load,
    nodes: nodes
      .filter((n) => n.roomIds.includes(roomId) && n.heartbeatAgeMs <= liveWithinMs)
      .map((n) => ({
        nodeId: n.session.nodeId,
        actions: n.actions,
        labels: n.labels,
        free: n.capacity - n.runningTasks,
      })),
    now,
  };
}

/** The reason of each waiting task of `run`, by task id. */
export function waitsOf(
  run: Pick<RunRecord, "status" | "maxParallel">,
  tasks: readonly TaskRecord[],
  room: RoomWaitFacts,
): Map<string, WaitReason> {
  return explainWaits({
    runStatus: run.status,
    maxParallel: run.maxParallel,
    tasks,
    roomCap: room.load.cap,
    roomActive: room.load.active,
    keysHeld: room.load.keys,
    nodes: room.nodes,
    now: room.now,
  });
}
