/**
 * DAG schedules: `schedule = "<cron>"` (croner's syntax: 5 fields, or 6 with seconds
 * first), `timezone` (IANA, default UTC) and `missed = "skip" | "run_once"`. The leader turns the
 * slots that came due into runs whose id names the slot (`<id>.s20261126T080500`), so a slot is
 * recorded by the run it creates, in one transaction, and a second leader finds it taken.
 */
import { Cron } from "croner";

export type MissedPolicy = "skip" | "run_once";

/**
 * A schedule's state: active fires its slots; paused fires none until resumed; deleted
 * never fires again (a later publish that creates the definition anew schedules afresh).
 */
export type ScheduleState = "active" | "paused" | "deleted";
export type ScheduleAction = "pause" | "resume" | "delete";

/**
 * The one rule of schedule changes: the state an action leads to, or why it changes nothing
 * (already in that state; a deleted schedule cannot be paused or resumed). The stores apply it
 * with a guarded UPDATE on the state they read.
 */
export function scheduleVerdict(
  action: ScheduleAction,
  from: ScheduleState,
): { kind: "done"; to: ScheduleState } | { kind: "already" | "wrong-state" } {
  const to: ScheduleState = action === "pause" ? "paused" : action === "resume" ? "active" : "deleted";
  if (from === to) return { kind: "already" };
  if (from === "deleted") return { kind: "wrong-state" };
  return { kind: "done", to };
}

export interface ScheduleSpec {
  cron: string;
  timezone: string;
  missed: MissedPolicy;
}

/** The slot a scheduled run fired for: `at` its time; `covers` the missed slots it stands for (run_once). */
export interface SlotInfo {
  /** No status card or final message of its own in chat (slotIsQuiet). */
  quiet?: true;
  at: number;
  covers: number;
  firstCovered: number;
}

/** Why `spec` cannot be used, or null. */
export function scheduleProblem(cron: string, timezone: string): string | null {
  if (cron.length > 200) return "is longer than 200 characters";
  try {
    const c = new Cron(cron, { timezone, paused: true });
    c.nextRun(new Date(0));
    return null;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}

const cache = new Map<string, Cron>();

function cronOf(spec: Pick<ScheduleSpec, "cron" | "timezone">): Cron {
  const key = `${spec.timezone}\n${spec.cron}`;
  let c = cache.get(key);
  if (c === undefined) {
    c = new Cron(spec.cron, { timezone: spec.timezone, paused: true });
    if (cache.size > 500) cache.clear();
    cache.set(key, c);
  }
  return c;
}

/** The first slot strictly after `after` (ms), or null when the expression has none. */
export function nextSlot(spec: Pick<ScheduleSpec, "cron" | "timezone">, after: number): number | null {
  const next = cronOf(spec).nextRun(new Date(after));
  return next === null ? null : next.getTime();
}

/**
 * Slots in (after, upTo], oldest first, at most `max` (the newest `max` when there are more). The
 * walk takes at most about 2 × `max` steps: past `max` slots it jumps to about `max` average
 * intervals before `upTo` (a day of a per-second schedule is 86,400 steps, some 15 s of blocking
 * work, longer than a lease), so a long gap yields `max` slots ending with the true newest one.
 */
export function slotsBetween(
  spec: Pick<ScheduleSpec, "cron" | "timezone">,
  after: number,
  upTo: number,
  max: number,
): number[] {
  const out: number[] = [];
  let t = after;
  let steps = 0;
  for (;;) {
    const next = nextSlot(spec, t);
    if (next === null || next > upTo) break;
    out.push(next);
    if (out.length > max) out.shift();
    t = next;
    if (++steps === max) {
      const from = Math.floor(upTo - (max + 1) * ((t - after) / steps));
      if (from > t) t = from;
    }
  }
  return out;
}

/**
 * What to fire, given the slots due since the last fired one (oldest first). One due slot is fired.
 * More than one means slots were missed (no leader, a stalled store, a clock jump): `skip` fires
 * only the newest, and only when it is at most `graceMs` old; `run_once` fires one run for the
 * newest that stands for all of them.
 */
export function slotsToFire(
  due: readonly number[],
  missed: MissedPolicy,
  now: number,
  graceMs: number,
): SlotInfo[] {
  const newest = due.at(-1);
  if (newest === undefined) return [];
  if (due.length === 1 || missed === "run_once")
    return [{ at: newest, covers: due.length, firstCovered: due[0]! }];
  return now - newest <= graceMs ? [{ at: newest, covers: 1, firstCovered: newest }] : [];
}

/** The most status cards a schedule posts to its room: one a minute. */
export const CARD_EVERY_MS = 60_000;

/**
 * Whether a slot's run stays out of the chat (no status card, no final message): a schedule that
 * fires more often than once a minute shows only its first slot of each minute (UTC), so
 * `* * * * * *` posts one card a minute, not sixty, and the room stays readable. A catch-up run
 * (covering missed slots) is always shown. The quiet runs are in `!dag list <id>` like any other.
 */
export function slotIsQuiet(spec: Pick<ScheduleSpec, "cron" | "timezone">, slot: SlotInfo): boolean {
  if (slot.covers > 1) return false;
  const minute = Math.floor(slot.at / CARD_EVERY_MS) * CARD_EVERY_MS;
  return nextSlot(spec, minute - 1) !== slot.at;
}

/** The run id of a slot: the definition's id (shortened to fit) and the slot's UTC time to the second. */
export function slotRunId(dagId: string, at: number): string {
  const stamp = new Date(at)
    .toISOString()
    .replace(/[-:]/g, "")
    .replace(/\.\d+Z$/, "");
  const suffix = `.s${stamp}`;
  return dagId.slice(0, 64 - suffix.length) + suffix;
}
