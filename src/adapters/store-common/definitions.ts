/**
 * What both stores' definitions share: the run number an `<id>.N` run id carries, and the rules and
 * event-log lines of schedule changes and slots.
 */
import type { SlotInfo } from "../../domain/schedule.js";
import type { LeaderFence, ScheduleAction, ScheduleChange, SkippedSlots } from "../../ports/store.js";
import type { LogLine } from "./records.js";
import { sessionKey } from "./records.js";

/** Run numbers above this are not counted: `!dag run` never names one (it stops at 9999). */
const MAX_RUN_NUMBER = 1_000_000;

/** N when `runDagId` is a run of `definitionId` named `<id>.N` (the id maybe shortened to fit), else null. */
export function runNumber(runDagId: string, definitionId: string): number | null {
  if (runDagId === definitionId) return null;
  const m = /\.(\d{1,7})$/.exec(runDagId);
  if (m === null) return null;
  const n = Number(m[1]);
  return n >= 2 && n <= MAX_RUN_NUMBER ? n : null;
}

const SCHEDULE_EVENT: Record<ScheduleAction, string> = {
  pause: "schedule.paused",
  resume: "schedule.resumed",
  delete: "schedule.deleted",
};

/** The event-log line of a schedule change. */
export function scheduleChangeLine(fence: LeaderFence, dagId: string, change: ScheduleChange): LogLine {
  return {
    kind: SCHEDULE_EVENT[change.action],
    term: fence.term,
    actor: sessionKey(fence.session),
    data: { dagId, by: change.by, reason: change.reason },
  };
}

/** The event-log line of a slot run's creation (its run's own line is `run.created`). */
export function slotFiredLine(fence: LeaderFence, runId: string, dagId: string, slot: SlotInfo): LogLine {
  return {
    kind: "schedule.fired",
    runId,
    term: fence.term,
    actor: sessionKey(fence.session),
    data: { dagId, slot: slot.at, covers: slot.covers },
  };
}

/** The event-log line of slots passed over without a run. */
export function slotsSkippedLine(fence: LeaderFence, dagId: string, skipped: SkippedSlots): LogLine {
  return {
    kind: "schedule.skipped",
    term: fence.term,
    actor: sessionKey(fence.session),
    data: { dagId, first: skipped.first, last: skipped.last, count: skipped.count, reason: skipped.reason },
  };
}
