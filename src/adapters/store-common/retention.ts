/**
 * What both stores' pruning shares: the argument check and the outbox rows it may delete. The
 * outbox txn id families are the ones render/messages.ts writes (`reply.<event id>`,
 * `card.<run id>`, `card.<run id>.<state>`, `final.<run id>`); a run id is a 36-character UUID.
 */
import { TERMINAL_RUN_STATUSES } from "../../domain/run-states.js";
import type { PruneLimits, PruneResult } from "../../ports/store.js";

export const TERMINAL_RUN_LIST = `(${[...TERMINAL_RUN_STATUSES].map((s) => `'${s}'`).join(",")})`;

/**
 * The outbox rows (alias `o`) pruning may delete besides the age and status test: replies, whose
 * inbox row is already `replied` and never handled again, and a run's card messages once the run
 * itself is gone. A card row must outlive its run: the card keeper and the outbox find the card's
 * event id through it, and a missing `card.<run>` or `final.<run>` row would be sent again.
 */
export const PRUNABLE_OUTBOX = `(o.txn_id LIKE 'reply.%'
    OR (o.txn_id LIKE 'card.%' AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.run_id = substr(o.txn_id, 6, 36)))
    OR (o.txn_id LIKE 'final.%' AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.run_id = substr(o.txn_id, 7, 36))))`;

export function checkPruneLimits(limits: PruneLimits): void {
  for (const key of ["olderThanMs", "nodesOlderThanMs", "keysOlderThanMs", "runs", "rows"] as const) {
    const v = limits[key];
    if (!Number.isSafeInteger(v) || v < (key === "runs" || key === "rows" ? 1 : 0))
      throw new RangeError(
        `prune: ${key} must be a ${key.endsWith("Ms") ? "non-negative" : "positive"} integer, got ${String(v)}`,
      );
  }
}

export const nothingPruned = (r: PruneResult): boolean =>
  r.runs + r.tasks + r.events + r.inbox + r.outbox + r.nodes + r.keys === 0;
