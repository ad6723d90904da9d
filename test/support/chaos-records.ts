/**
 * What the actions themselves say happened (test/support/engine-fixtures/record.mjs appends a start
 * and an end line per attempt): intervals during which each attempt's process ran, and the
 * side-effect guarantees (docs/architecture.md §8) counted from them. Times are wall-clock ms of this machine, the
 * same clock as the store's event times (SQLite: the nodes' Date.now; PostgreSQL: the local server).
 */
import { existsSync, readFileSync } from "node:fs";
import type { LogEvent } from "../../src/ports/store.js";
import { isRunning } from "./process-tree.js";

export interface ActionRecord {
  ev: "start" | "end";
  run: string;
  task: string;
  attempt: number;
  pid: number;
  child: number;
  t: number;
  why?: string;
}

export function readRecords(path: string): ActionRecord[] {
  if (!existsSync(path)) return [];
  const out: ActionRecord[] = [];
  for (const line of readFileSync(path, "utf8").split("\n")) {
    if (!line.startsWith("{")) continue;
    try {
      out.push(JSON.parse(line) as ActionRecord);
    } catch {
      // A line being written right now.
    }
  }
  return out;
}

/**
 * Watches the records file and the started processes: an action killed with SIGKILL writes no end,
 * so the first time its pid is seen gone stands for its end.
 */
export class ActionWatch {
  private readonly deaths = new Map<number, number>();
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly path: string) {}

  start(everyMs = 25): void {
    const tick = (): void => {
      const recs = readRecords(this.path);
      const ended = new Set(recs.filter((r) => r.ev === "end").map((r) => r.pid));
      const now = Date.now();
      for (const r of recs) {
        if (r.ev !== "start" || ended.has(r.pid) || this.deaths.has(r.pid)) continue;
        if (!isRunning(r.pid)) this.deaths.set(r.pid, now);
      }
      this.timer = setTimeout(tick, everyMs);
    };
    tick();
  }

  stop(): void {
    if (this.timer !== null) clearTimeout(this.timer);
  }

  /** One interval per started attempt: its end is its end record, else when it was seen gone. */
  intervals(): AttemptInterval[] {
    const recs = readRecords(this.path);
    const ends = new Map(recs.filter((r) => r.ev === "end").map((r) => [r.pid, r.t]));
    return recs
      .filter((r) => r.ev === "start")
      .map((r) => ({
        run: r.run,
        task: r.task,
        attempt: r.attempt,
        pid: r.pid,
        start: r.t,
        end: ends.get(r.pid) ?? this.deaths.get(r.pid) ?? Number.POSITIVE_INFINITY,
      }));
  }
}

export interface AttemptInterval {
  run: string;
  task: string;
  attempt: number;
  pid: number;
  start: number;
  /** +Infinity: still running, never seen to end. */
  end: number;
}

const overlap = (a: AttemptInterval, b: AttemptInterval): boolean => a.start < b.end && b.start < a.end;

/** Pairs of attempts of one task that ran at the same time (each pair once), described. */
export function overlappingAttempts(intervals: readonly AttemptInterval[]): string[] {
  return pairsWithin(intervals, (i) => `${i.run}/${i.task}`);
}

/** Pairs of actions sharing a concurrency key that ran at the same time. */
export function keyOverlaps(
  intervals: readonly AttemptInterval[],
  keyOf: (i: AttemptInterval) => string | null,
): string[] {
  return pairsWithin(
    intervals.filter((i) => keyOf(i) !== null),
    (i) => keyOf(i)!,
  );
}

function pairsWithin(
  intervals: readonly AttemptInterval[],
  groupOf: (i: AttemptInterval) => string,
): string[] {
  const groups = new Map<string, AttemptInterval[]>();
  for (const i of intervals) groups.set(groupOf(i), [...(groups.get(groupOf(i)) ?? []), i]);
  const out: string[] = [];
  for (const [group, list] of groups) {
    for (let x = 0; x < list.length; x++)
      for (let y = x + 1; y < list.length; y++) {
        const a = list[x]!;
        const b = list[y]!;
        if (overlap(a, b)) {
          const both = Math.min(a.end, b.end) - Math.max(a.start, b.start);
          out.push(
            `${group}: ${a.task}#${a.attempt} (pid ${a.pid}) and ${b.task}#${b.attempt} (pid ${b.pid}) ran together for ${both} ms`,
          );
        }
      }
  }
  return out;
}

/** The highest number of intervals (optionally of one subset) running at one instant. */
export function maxAtOnce(intervals: readonly AttemptInterval[]): number {
  const edges = intervals.flatMap((i) => [
    { t: i.start, d: 1 },
    { t: i.end, d: -1 },
  ]);
  // An end and a start at the same millisecond do not overlap: ends first.
  edges.sort((a, b) => a.t - b.t || a.d - b.d);
  let now = 0;
  let max = 0;
  for (const e of edges) {
    now += e.d;
    max = Math.max(max, now);
  }
  return max;
}

/**
 * When each attempt's claim ended without its executor: the first later event of the task that the
 * leader wrote (a term: the reaper requeuing or failing it) or a new claim, keyed `run/task#attempt`.
 * The executor's own writes (no term) end its claim normally; a cancel (task.canceling) leaves it.
 */
export function claimLostAt(events: readonly LogEvent[]): Map<string, number> {
  const holder = new Map<string, { key: string; actor: string | null }>();
  const lost = new Map<string, number>();
  for (const e of events) {
    if (e.runId === null || e.taskId === null || !e.kind.startsWith("task.")) continue;
    const task = `${e.runId}/${e.taskId}`;
    const current = holder.get(task);
    if (current !== undefined) {
      if ((e.term !== null && e.kind !== "task.canceling") || e.kind === "task.running") {
        lost.set(current.key, e.at);
        holder.delete(task);
      } else if (e.term === null && e.actor === current.actor) {
        holder.delete(task);
      }
    }
    if (e.kind === "task.running")
      holder.set(task, { key: `${task}#${String(e.data["attempt"])}`, actor: e.actor });
  }
  return lost;
}

/** Attempts whose action started, or was still running, after their claim was lost. */
export function afterClaimLost(
  intervals: readonly AttemptInterval[],
  lostAt: ReadonlyMap<string, number>,
): { started: string[]; running: string[] } {
  const started: string[] = [];
  const running: string[] = [];
  for (const i of intervals) {
    const at = lostAt.get(`${i.run}/${i.task}#${i.attempt}`);
    if (at === undefined) continue;
    if (i.start > at)
      started.push(`${i.task}#${i.attempt} started ${i.start - at} ms after its claim was lost`);
    else if (i.end > at)
      running.push(`${i.task}#${i.attempt} ran ${i.end - at} ms past the loss of its claim`);
  }
  return { started, running };
}
