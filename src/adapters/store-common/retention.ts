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

/**
 * The runs (alias `r`) pruning keeps whatever their age: a definition's first run while other runs
 * of that definition remain (the definition must outlive them, and publishing compares against its
 * first run) or while its schedule is approved and not deleted (the schedule is its record; a
 * deleted one lets its runs go with age, and the id is free to publish anew once they are gone).
 */
export const KEPT_FIRST_RUN = `EXISTS (SELECT 1 FROM definitions d
    WHERE d.room_id = r.room_id AND d.dag_id = r.dag_id AND d.first_run_id = r.run_id
      AND ((d.schedule_cron IS NOT NULL AND d.schedule_state <> 'deleted'
            AND r.status NOT IN ('rejected','expired','canceled'))
           OR EXISTS (SELECT 1 FROM runs x
                       WHERE x.room_id = r.room_id AND x.definition_id = d.dag_id AND x.run_id <> r.run_id)))`;

/** Definitions of these ids (alias `d`) with no run left: they go with their last run. */
export const ORPHAN_DEFINITION = `NOT EXISTS (SELECT 1 FROM runs x WHERE x.room_id = d.room_id AND x.definition_id = d.dag_id)`;

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
  r.runs + r.tasks + r.events + r.inbox + r.outbox + r.nodes + r.keys + r.definitions === 0;
