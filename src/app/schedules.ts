/**
 * The leader's schedule loop (issue 12): while it leads a room, it turns the slots of the room's
 * scheduled definitions that came due into runs. A slot's run has the id `slotRunId(def, slot)`, so
 * the slot is recorded by the run row itself, created in one fenced transaction (createRun checks
 * the leader's term): a deposed leader's write is refused, and a new leader that tries a slot again
 * gets "exists". Which slots are due is worked out from the store (the definition's newest fired
 * slot, moved in the same transaction as the slot's run), never from memory alone, so a restart or a
 * change of leader neither repeats nor (under run_once) drops one.
 */
import { dagHash } from "../domain/canonical-hash.js";
import type { ParsedDag } from "../domain/model.js";
import { resolveParams } from "../domain/params.js";
import type { SlotInfo } from "../domain/schedule.js";
import { nextSlot, slotIsQuiet, slotRunId, slotsBetween, slotsToFire } from "../domain/schedule.js";
import type { Clock } from "../ports/clock.js";
import { isConflict } from "../ports/errors.js";
import type { Logger } from "../ports/logger.js";
import type { ChangeFeed, DefinitionRecord, DefinitionStore, LeaderFence, RunStore } from "../ports/store.js";
import { Waker, wakeOnChange } from "./wake.js";

export type ScheduleStore = Pick<DefinitionStore, "listScheduledDefinitions"> &
  Pick<RunStore, "createRun"> & { now(): Promise<number> };

/** The least time between two rounds: a burst of run changes costs one round per this. */
export const SCHEDULE_TICK_MS = 200;
/**
 * The longest a round waits with no slot due and no run change heard: a round reads the store
 * (2 statements and more), and rounds every 200 ms were 10 of a leader's idle statements a second.
 * New and confirmed definitions announce themselves (a "runs" change), and each known definition's
 * next slot sets the wake-up, so this only covers a notification lost without a reconnect.
 */
export const SCHEDULE_IDLE_MS = 10_000;
/** After a slot's time, so its round does not come a hair early. */
const SLOT_SLACK_MS = 20;
/** Under `skip`, a newest slot older than this when it is seen is missed, not fired. */
export const SKIP_GRACE_MS = 2_000;
/** How far back a new leader looks for missed slots (run_once catches up at most this far). */
export const CATCH_UP_HORIZON_MS = 24 * 60 * 60 * 1000;
/** Most slots looked at for one definition at once; a run_once catch-up stands for them all. */
const MAX_DUE = 10_000;

/** A definition whose schedule was dropped with its first run (rejected, expired or canceled), or has none. */
export function isDroppedSchedule(def: DefinitionRecord): boolean {
  const origin = def.origin;
  if (def.schedule === null || origin === null) return true;
  return origin.status === "rejected" || origin.status === "expired" || origin.status === "canceled";
}

/** A definition with a schedule whose first run was approved (confirmed, or auto-confirmed) and not dropped. */
export function isActiveSchedule(def: DefinitionRecord): boolean {
  const origin = def.origin;
  if (origin === null || isDroppedSchedule(def)) return false;
  return origin.confirmedBy !== null || origin.confirmDeadline === null;
}

/** A scheduled definition's run DAG for one slot: no schedule of its own, defaults for its params. */
export function slotDag(def: DefinitionRecord, slot: SlotInfo): ParsedDag {
  const { schedule: _schedule, ...base } = def.dag;
  const resolved = resolveParams(base, []);
  const quiet = def.schedule !== null && slotIsQuiet(def.schedule, slot);
  return {
    ...base,
    id: slotRunId(def.dagId, slot.at),
    definition: def.dagId,
    slot: quiet ? { ...slot, quiet: true } : slot,
    ...(base.params !== undefined && resolved.ok ? { values: resolved.values } : {}),
  };
}

/**
 * The slot after which `def`'s due slots are looked for: the newest handled this term, else the
 * newest any leader fired (the store's, moved with each slot run), else the definition's start;
 * never before the catch-up horizon. When the store's clock goes back, this stays ahead of it and
 * nothing fires until the clock passes it again: a slot at or before it was fired, covered by a
 * run_once catch-up or skipped already, and firing it again is what must never happen.
 */
export function resumeAfter(def: DefinitionRecord, handled: number | undefined, now: number): number {
  return handled ?? Math.max(def.createdAt, def.lastSlotAt ?? def.createdAt, now - CATCH_UP_HORIZON_MS);
}

export async function runScheduleLoop(
  deps: {
    store: ScheduleStore;
    clock: Clock;
    onStoreError?: (() => void) | undefined;
    /** Run changes of the room wake the loop (new definitions); without it the loop looks every SCHEDULE_TICK_MS. */
    feed?: ChangeFeed;
  },
  log: Logger,
  fence: LeaderFence,
  signal: AbortSignal,
  deposed: () => void,
): Promise<void> {
  const { store } = deps;
  const roomId = fence.roomId;
  /** The newest slot handled (fired, found fired, or skipped) per definition, this term. */
  const handled = new Map<string, number>();

  const waker = new Waker(deps.clock, SCHEDULE_TICK_MS);
  const unsubscribe = deps.feed === undefined ? () => {} : wakeOnChange(deps.feed, waker, ["runs"], [roomId]);
  try {
    while (!signal.aborted) {
      const waitMs = await round();
      if (waitMs === null) return;
      await waker.wait(waitMs, signal);
    }
  } finally {
    unsubscribe();
  }

  /** One look at the room's schedules; returns how long to wait before the next (unless woken). */
  async function round(): Promise<number | null> {
    let waitMs = deps.feed === undefined ? SCHEDULE_TICK_MS : SCHEDULE_IDLE_MS;
    try {
      const now = await store.now();
      // One indexed read per round: the room's scheduled definitions, each with its first run's
      // approval and newest fired slot, however many runs the room has.
      const active = (await store.listScheduledDefinitions(roomId)).filter(isActiveSchedule);
      const ids = new Set(active.map((d) => d.dagId));
      for (const id of [...handled.keys()]) if (!ids.has(id)) handled.delete(id);
      for (const def of active) {
        const id = def.dagId;
        const after = resumeAfter(def, handled.get(id), now);
        const spec = def.schedule!;
        const due = slotsBetween(spec, after, now, MAX_DUE);
        for (const slot of slotsToFire(due, spec.missed, now, SKIP_GRACE_MS)) {
          const dag = slotDag(def, slot);
          const result = await store.createRun(
            { fence },
            {
              roomId,
              dag,
              hash: dagHash(dag),
              publisher: def.publisher,
              publishEventId: null,
              needsConfirmation: false,
              confirmTimeoutMs: 0,
            },
          );
          log.info(
            {
              dag: id,
              run: dag.id,
              slot: new Date(slot.at).toISOString(),
              covers: slot.covers,
              result: result.kind,
            },
            result.kind === "created" ? "schedule fired" : "schedule slot already taken",
          );
        }
        const last = due.length > 0 ? due.at(-1)! : after;
        handled.set(id, last);
        // Wake for this definition's next slot (store clock; the round began at `now`).
        const next = nextSlot(spec, last);
        if (next !== null) waitMs = Math.min(waitMs, Math.max(0, next - now) + SLOT_SLACK_MS);
      }
    } catch (err) {
      if (isConflict(err)) {
        log.info({ reason: err.message }, "deposed: a fenced schedule write was rejected");
        deposed();
        return null;
      }
      deps.onStoreError?.();
      log.warn({ err: String(err) }, "schedule round failed; trying again");
      return SCHEDULE_TICK_MS;
    }
    return waitMs;
  }
}
