/**
 * Definitions, written once for both stores: the row publishing writes in the same transaction as a
 * definition's first run, the counters later runs move, schedule changes and skipped slots, and the
 * reads by definition (docs/architecture.md §3, "Schedule"). The rule of a schedule change is
 * scheduleVerdict's (src/domain/schedule.ts); these statements apply it.
 */
import type { ParsedDag } from "../../../domain/model.js";
import { definitionOf } from "../../../domain/params.js";
import type { LeaderFence } from "../../../ports/store.js";
import { NotFoundError } from "../../../ports/errors.js";
import { runNumber, slotFiredLine } from "../definitions.js";
import type { Script } from "../script.js";
import { log, p, run, sql } from "../script.js";

/** The larger of two values (SQLite's two-argument max is PostgreSQL's greatest). */
export const GREATEST = p.only({ sqlite: "max", postgres: "greatest" });

// A definition whose first run is gone is adopted by the new one (its runs keep pointing at it).
const PUBLISH = sql("a definition, published")`
  INSERT INTO definitions (room_id, dag_id, hash, dag, schedule_cron, schedule_timezone, schedule_missed,
                           publisher, first_run_id, created_at, updated_at)
  VALUES (${p.text("roomId")}, ${p.text("dagId")}, ${p.text("hash")}, ${p.json("doc")}, ${p.text("cron")},
          ${p.text("timezone")}, ${p.text("missed")}, ${p.text("publisher")}, ${p.text("runId")}, ${p.now}, ${p.now})
  ON CONFLICT (room_id, dag_id) DO UPDATE SET hash = excluded.hash, dag = excluded.dag,
    schedule_cron = excluded.schedule_cron, schedule_timezone = excluded.schedule_timezone,
    schedule_missed = excluded.schedule_missed, publisher = excluded.publisher,
    first_run_id = excluded.first_run_id, created_at = excluded.created_at, updated_at = excluded.updated_at,
    schedule_state = 'active', schedule_state_by = NULL, schedule_state_at = NULL,
    schedule_state_reason = NULL, slots_through = NULL`;

// A slot's time moves the newest slot and what the schedule considered, never back; a run `<id>.N` its number.
const RUN_OF = sql("a definition's counters, moved by a run of it")`
  UPDATE definitions
     SET last_slot_at = CASE WHEN ${p.int("slotAt")} IS NULL THEN last_slot_at
                             ELSE ${GREATEST}(coalesce(last_slot_at, ${p.int("slotAt")}), ${p.int("slotAt")}) END,
         slots_through = CASE WHEN ${p.int("slotAt")} IS NULL THEN slots_through
                              ELSE ${GREATEST}(coalesce(slots_through, ${p.int("slotAt")}), ${p.int("slotAt")}) END,
         last_run_number = ${GREATEST}(last_run_number, coalesce(${p.int("number")}, 0)), updated_at = ${p.now}
   WHERE room_id = ${p.text("roomId")} AND dag_id = ${p.text("dagId")}`;

/**
 * Inside a new run's transaction, after its row is written: a DAG without `definition` creates its
 * definition (or adopts one whose first run is gone); a DAG with one moves that definition's newest
 * slot and run number, and logs `schedule.fired` for a slot. NotFoundError when that one is missing.
 */
export function* recordDefinition(
  roomId: string,
  fence: LeaderFence,
  runId: string,
  dag: ParsedDag,
  hash: string,
  publisher: string,
): Script<void> {
  const of = dag.definition;
  if (of === undefined) {
    const doc = definitionOf(dag);
    yield* run(PUBLISH, {
      roomId,
      dagId: dag.id,
      hash,
      doc,
      cron: doc.schedule?.cron ?? null,
      timezone: doc.schedule?.timezone ?? null,
      missed: doc.schedule?.missed ?? null,
      publisher,
      runId,
    });
    return;
  }
  const changed = yield* run(RUN_OF, {
    slotAt: dag.slot?.at ?? null,
    number: runNumber(dag.id, of),
    roomId,
    dagId: of,
  });
  if (changed !== 1) throw new NotFoundError("create run", { roomId, definition: of });
  if (dag.slot !== undefined) yield* log(roomId, slotFiredLine(fence, runId, of, dag.slot));
}
