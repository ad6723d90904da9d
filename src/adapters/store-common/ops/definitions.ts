/**
 * Definitions, written once for both stores: the row publishing writes in the same transaction as a
 * definition's first run, the counters later runs move, schedule changes and skipped slots, and the
 * reads by definition (docs/architecture.md §3, "Schedule"). The rule of a schedule change is
 * scheduleVerdict's (src/domain/schedule.ts); these statements apply it.
 */
import type { ParsedDag } from "../../../domain/model.js";
import { definitionOf } from "../../../domain/params.js";
import { scheduleVerdict } from "../../../domain/schedule.js";
import { NotFoundError } from "../../../ports/errors.js";
import type {
  CommandContext,
  DefinitionRecord,
  LeaderFence,
  OutboxMessageInput,
  RunRecord,
  ScheduleChange,
  ScheduleChangeResult,
  SkippedSlots,
} from "../../../ports/store.js";
import { checkRoom } from "../checks.js";
import { runNumber, scheduleChangeLine, slotFiredLine, slotsSkippedLine } from "../definitions.js";
import { DEFINITION_COLUMNS, DEFINITION_FROM, RUN_COLUMNS } from "../records.js";
import type { Script } from "../script.js";
import { log, mappers, p, row, rows, run, sql, touch } from "../script.js";
import { holdFence } from "./fence.js";
import { markAnswered } from "./inbox-handled.js";
import { enqueue } from "./outbox.js";
import { SEQ } from "./run-reads.js";

const DEFAULT_SCHEDULED_LIMIT = 1000;
const DEFAULT_RUNS_LIMIT = 100;

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

const DEFINITION = sql("a definition")`
  SELECT ${DEFINITION_COLUMNS} FROM ${DEFINITION_FROM} WHERE d.room_id = ${p.text("roomId")} AND d.dag_id = ${p.text("dagId")}`;

// Locked on PostgreSQL (the definition's row, not its first run's): two changes of one schedule
// apply one after the other, each judged on the state the other left.
const DEFINITION_LOCKED = sql("a definition, locked")`
  SELECT ${DEFINITION_COLUMNS} FROM ${DEFINITION_FROM}
   WHERE d.room_id = ${p.text("roomId")} AND d.dag_id = ${p.text("dagId")}${p.only({ postgres: " FOR UPDATE OF d" })}`;

// The guard: the state the verdict was judged on. A resume moves slots_through to now, so the
// slots of the pause never fire (docs/architecture.md §3, "Schedule").
const CHANGE = sql("a schedule's state, changed")`
  UPDATE definitions SET schedule_state = ${p.text("to")}, schedule_state_by = ${p.text("by")},
         schedule_state_at = ${p.now}, schedule_state_reason = ${p.text("reason")}, updated_at = ${p.now},
         slots_through = CASE WHEN ${p.bool("resume")}
                              THEN ${GREATEST}(coalesce(slots_through, ${p.now}), ${p.now}) ELSE slots_through END
   WHERE room_id = ${p.text("roomId")} AND dag_id = ${p.text("dagId")} AND schedule_state = ${p.text("from")}`;

const SKIP = sql("a schedule's slots, skipped")`
  UPDATE definitions SET slots_through = ${GREATEST}(coalesce(slots_through, ${p.int("last")}), ${p.int("last")}),
         updated_at = ${p.now}
   WHERE room_id = ${p.text("roomId")} AND dag_id = ${p.text("dagId")}`;

const SCHEDULED = sql("the room's scheduled definitions")`
  SELECT ${DEFINITION_COLUMNS} FROM ${DEFINITION_FROM}
   WHERE d.room_id = ${p.text("roomId")} AND d.schedule_cron IS NOT NULL ORDER BY d.dag_id ${p.limit("limit")}`;

const RUNS_OF = sql("a definition's runs")`
  SELECT ${RUN_COLUMNS} FROM runs${p.only({ sqlite: " INDEXED BY runs_definition" })}
   WHERE room_id = ${p.text("roomId")} AND definition_id = ${p.text("dagId")}
   ORDER BY created_at DESC, ${SEQ} DESC ${p.limit("limit")}`;

/**
 * Pause, resume or delete a schedule (DefinitionStore.changeSchedule): the decision is
 * scheduleVerdict's on the row read (and locked) in the same transaction, applied with one guarded
 * UPDATE, with its notices queued in the same transaction.
 */
export function* changeSchedule(
  ctx: CommandContext<ScheduleChangeResult>,
  roomId: string,
  dagId: string,
  change: ScheduleChange,
  notices: readonly OutboxMessageInput[] = [],
): Script<ScheduleChangeResult> {
  const operation = `${change.action} schedule`;
  const m = yield* mappers();
  yield* holdFence(operation, ctx.fence);
  checkRoom(operation, ctx, roomId);
  const found = yield* row(DEFINITION_LOCKED, { roomId, dagId });
  const before = found === undefined ? null : m.toDefinition(found);
  if (before === null || before.schedule === null) throw new NotFoundError(operation, { roomId, dagId });
  const verdict = scheduleVerdict(change.action, before.scheduleState.state);
  let definition = before;
  if (verdict.kind === "done") {
    yield* run(CHANGE, {
      to: verdict.to,
      by: change.by,
      reason: change.reason,
      resume: change.action === "resume",
      roomId,
      dagId,
      from: before.scheduleState.state,
    });
    yield* log(roomId, scheduleChangeLine(ctx.fence, dagId, change));
    if (notices.length > 0) yield* enqueue(ctx.fence, notices);
    yield* touch("runs", roomId);
    const after = yield* row(DEFINITION, { roomId, dagId });
    if (after !== undefined) definition = m.toDefinition(after);
  }
  const result: ScheduleChangeResult = { kind: verdict.kind, definition };
  yield* markAnswered(ctx, result);
  return result;
}

export function* skipScheduleSlots(
  fence: LeaderFence,
  roomId: string,
  dagId: string,
  skipped: SkippedSlots,
): Script<void> {
  const operation = "skip schedule slots";
  yield* holdFence(operation, fence);
  checkRoom(operation, { fence }, roomId);
  const changed = yield* run(SKIP, { last: skipped.last, roomId, dagId });
  if (changed !== 1) throw new NotFoundError(operation, { roomId, dagId });
  yield* log(roomId, slotsSkippedLine(fence, dagId, skipped));
}

export function* getDefinition(roomId: string, dagId: string): Script<DefinitionRecord | null> {
  const m = yield* mappers();
  const found = yield* row(DEFINITION, { roomId, dagId });
  return found === undefined ? null : m.toDefinition(found);
}

export function* listScheduledDefinitions(
  roomId: string,
  options: { limit?: number } = {},
): Script<DefinitionRecord[]> {
  const m = yield* mappers();
  const limit = Math.max(0, Math.floor(options.limit ?? DEFAULT_SCHEDULED_LIMIT));
  return (yield* rows(SCHEDULED, { roomId, limit })).map(m.toDefinition);
}

export function* listDefinitionRuns(
  roomId: string,
  dagId: string,
  options: { limit?: number } = {},
): Script<RunRecord[]> {
  const m = yield* mappers();
  const limit = Math.max(0, Math.floor(options.limit ?? DEFAULT_RUNS_LIMIT));
  return (yield* rows(RUNS_OF, { roomId, dagId, limit })).map(m.toRun);
}
