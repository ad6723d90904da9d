/**
 * Whom the leader wakes when tasks are ready: as many nodes as there are tasks to take,
 * not every node. Pure: the leader's loop feeds it the store's ClaimDemand and its memory of
 * recent wakes, and sends the wake to the nodes it returns.
 */
import type { ClaimDemand } from "../ports/store.js";

/**
 * A node woken this recently that has not claimed yet is still expected to claim what it was woken
 * for: not woken again (its claim, heard as a `tasks` change naming it, ends the hold sooner).
 */
export const WAKE_HOLD_MS = 300;
/**
 * A node whose last claim (heard this recently) left fitting tasks behind claims again by itself as
 * its slots free: it is not woken, and its free slots count as taken.
 */
export const SELF_SERVE_MS = 250;
/** A node woken this recently that left tasks unclaimed goes after the others next time. */
export const WAKE_DEPRIORITIZE_MS = 5_000;

export interface RecentWake {
  at: number;
  /** How many tasks it was woken for. */
  expected: number;
}

export interface WakePlan {
  /** The nodes to wake and how many tasks each is expected to take. */
  targets: Array<{ nodeId: string; take: number }>;
  /** Ready tasks no woken (or still expected) node will take: nobody free that fits. */
  unassigned: number;
}

/**
 * Nodes by what they can take (min of free slots and fitting tasks), most first; nodes that serve
 * themselves (`selfServing`: their last claim within SELF_SERVE_MS left more) are left to it; nodes woken
 * within WAKE_HOLD_MS count for what they were woken for and are not woken again; nodes woken
 * within WAKE_DEPRIORITIZE_MS come last (a node that did not claim, perhaps gone); `rotation`
 * breaks ties so equal nodes take turns.
 */
export function planWake(
  demand: ClaimDemand,
  recent: ReadonlyMap<string, RecentWake>,
  now: number,
  rotation: number,
  selfServing: ReadonlyMap<string, number> = new Map(),
): WakePlan {
  let remaining = demand.ready;
  const candidates: Array<{ nodeId: string; take: number; late: boolean; order: number }> = [];
  const n = demand.nodes.length;
  demand.nodes.forEach((node, i) => {
    const since = selfServing.get(node.nodeId);
    if (since !== undefined && now - since < SELF_SERVE_MS) {
      remaining -= Math.min(Math.max(0, node.free), node.fits);
      return;
    }
    const r = recent.get(node.nodeId);
    if (r !== undefined && now - r.at < WAKE_HOLD_MS) {
      remaining -= r.expected;
      return;
    }
    const take = Math.min(Math.max(0, node.free), node.fits);
    if (take <= 0) return;
    const late = r !== undefined && now - r.at < WAKE_DEPRIORITIZE_MS;
    candidates.push({ nodeId: node.nodeId, take, late, order: (i + rotation) % Math.max(1, n) });
  });
  candidates.sort((a, b) => Number(a.late) - Number(b.late) || b.take - a.take || a.order - b.order);
  const targets: WakePlan["targets"] = [];
  for (const c of candidates) {
    if (remaining <= 0) break;
    targets.push({ nodeId: c.nodeId, take: Math.min(c.take, remaining) });
    remaining -= c.take;
  }
  return { targets, unassigned: Math.max(0, remaining) };
}
