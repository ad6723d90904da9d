/**
 * The leader's schedule loop: while it leads a room, it turns the slots of the room's
 * scheduled definitions that came due into runs. A slot's run has the id `slotRunId(def, slot)`, so
 * the slot is recorded by the run row itself, created in one fenced transaction (createRun checks
 * the leader's term): a deposed leader's write is refused, and a new leader that tries a slot again
 * gets "exists". Which slots are due is worked out from the store (the definition's newest fired
 * slot, moved in the same transaction as the slot's run), never from memory alone, so a restart or a
 * change of leader neither repeats nor (under run_once) drops one.
 *
 * A schedule has a state. A paused or deleted one fires nothing. Slots passed over
 * without a run (the `skip` policy, an owner no longer allowed) are recorded with their reason
 * (`schedule.skipped`, moving the definition's slotsThrough in the same transaction, so no later
 * leader considers them again) and logged. Before firing, the schedule's authority is checked
 * (ScheduleAuthority): when its owner may no longer run it, it pauses itself and says so once.
 * The schedule's states and where each rule lives: docs/architecture.md, "State machines".
 */
import { dagHash } from "../domain/canonical-hash.js";
import type { ParsedDag } from "../domain/model.js";
import { resolveParams } from "../domain/params.js";
import { definitionSource, runStartVerdict } from "../domain/run-authority.js";
import type { SlotInfo } from "../domain/schedule.js";
import { nextSlot, slotIsQuiet, slotRunId, slotsBetween, slotsToFire } from "../domain/schedule.js";
import type { Clock } from "../ports/clock.js";
import type { Logger } from "../ports/logger.js";
import type {
  ChangeFeed,
  DefinitionRecord,
  DefinitionStore,
  LeaderFence,
  OutboxMessageInput,
  RunRecord,
  RunStore,
  SkippedSlots,
} from "../ports/store.js";
import { runFencedRounds } from "./fenced-rounds.js";

export type ScheduleStore = Pick<
  DefinitionStore,
  "listScheduledDefinitions" | "changeSchedule" | "skipScheduleSlots"
> &
  Pick<RunStore, "createRun"> & { now(): Promise<number> };

/**
 * Whose authority a schedule runs on, checked before each slot fires. The
 * node builds it from the same permission oracle and room policy its commands use.
 */
export interface ScheduleAuthority {
  /**
   * Null while the schedule's owner (its publisher, and its confirmer under the two-person rule)
   * may still run it; else why not, in a sentence. Throws when it cannot tell (homeserver
   * unreachable): the round is then tried again, and no slot is fired or skipped on missing data.
   */
  refusal(def: DefinitionRecord): Promise<string | null>;
  /** The room message that says the schedule paused itself; null where nothing sends the room's messages. */
  notice(def: DefinitionRecord, reason: string, slot: number): OutboxMessageInput | null;
  /**
   * The message, in the upstream run's thread, that a definition declared `after` it did not start
   * and why; null (or absent) where nothing sends the room's messages.
   */
  afterSkippedNotice?(def: DefinitionRecord, upstream: RunRecord, reason: string): OutboxMessageInput | null;
}

/** The user a schedule's automatic changes are recorded under. */
export const SCHEDULE_SELF = "dagbot";

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

/**
 * A definition with a schedule whose first run was approved (confirmed, or auto-confirmed) and not
 * dropped: its slots run on that approval, by the rule every new run asks (docs/architecture.md §3,
 * "Authority"); the owner's living authority is asked besides (ScheduleAuthority).
 */
export function isApprovedSchedule(def: DefinitionRecord): boolean {
  if (isDroppedSchedule(def)) return false;
  return runStartVerdict(true, [definitionSource(def)]).kind === "start";
}

/** An approved schedule that is neither paused nor deleted: the leader fires its slots. */
export function isActiveSchedule(def: DefinitionRecord): boolean {
  return isApprovedSchedule(def) && def.scheduleState.state === "active";
}

/**
 * The slots of `due` that `fire` leaves without a run (oldest first), as one record, or null.
 * Under run_once none are left (the run stands for them); under skip, all but the fired newest.
 */
export function skippedOf(
  due: readonly number[],
  fire: readonly SlotInfo[],
  reason: string,
): SkippedSlots | null {
  const firedAt = new Set(fire.flatMap((f) => (f.covers > 1 ? due.filter((t) => t <= f.at) : [f.at])));
  const left = due.filter((t) => !firedAt.has(t));
  if (left.length === 0) return null;
  return { first: left[0]!, last: left.at(-1)!, count: left.length, reason };
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
  const through = Math.max(def.lastSlotAt ?? def.createdAt, def.slotsThrough ?? def.createdAt);
  return handled ?? Math.max(def.createdAt, through, now - CATCH_UP_HORIZON_MS);
}

export async function runScheduleLoop(
  deps: {
    store: ScheduleStore;
    clock: Clock;
    onStoreError?: (() => void) | undefined;
    /** Run changes of the room wake the loop (new definitions); without it the loop looks every SCHEDULE_TICK_MS. */
    feed?: ChangeFeed;
    /** Checked before each slot fires; absent, a schedule runs on its approval alone. */
    authority?: ScheduleAuthority | null;
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

  const rounds = { roomId, tickMs: SCHEDULE_TICK_MS, name: "schedule" };
  await runFencedRounds(deps, rounds, log, signal, deposed, round);

  /** One look at the room's schedules; returns how long to wait before the next (unless woken). */
  async function round(): Promise<number | null> {
    let waitMs = deps.feed === undefined ? SCHEDULE_TICK_MS : SCHEDULE_IDLE_MS;
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
      const refusal = due.length === 0 || !deps.authority ? null : await deps.authority.refusal(def);
      if (refusal !== null) {
        await pauseForAuthority(def, due, refusal);
        handled.set(id, due.at(-1)!);
        continue;
      }
      const fire = slotsToFire(due, spec.missed, now, SKIP_GRACE_MS);
      const skipped = skippedOf(due, fire, `missed: the schedule's missed policy is skip`);
      if (skipped !== null) await skip(def, skipped);
      for (const slot of fire) {
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
    return waitMs;
  }

  /** Records slots passed over without a run, with their reason: an event and a log line. */
  async function skip(def: DefinitionRecord, skipped: SkippedSlots): Promise<void> {
    await store.skipScheduleSlots(fence, roomId, def.dagId, skipped);
    log.info(
      {
        dag: def.dagId,
        first: new Date(skipped.first).toISOString(),
        last: new Date(skipped.last).toISOString(),
        count: skipped.count,
        reason: skipped.reason,
      },
      "schedule slots skipped",
    );
  }

  /**
   * The owner may no longer run it: the due slots are skipped, and the schedule pauses itself,
   * saying so in the room once (the notice is enqueued with the pause, only when the state changed).
   */
  async function pauseForAuthority(
    def: DefinitionRecord,
    due: readonly number[],
    reason: string,
  ): Promise<void> {
    await skip(def, { first: due[0]!, last: due.at(-1)!, count: due.length, reason });
    const notice = deps.authority?.notice(def, reason, due.at(-1)!) ?? null;
    const result = await store.changeSchedule(
      { fence },
      roomId,
      def.dagId,
      { action: "pause", by: SCHEDULE_SELF, reason },
      notice === null ? [] : [notice],
    );
    log.warn(
      { dag: def.dagId, reason, result: result.kind },
      "schedule paused: its owner may no longer run it",
    );
  }
}
