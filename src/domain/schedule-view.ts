/**
 * The leader's scheduling view of one room between whole passes (docs/architecture.md §4 step 4,
 * "Scheduling without rereading the room"). A whole pass reads every task of the room's open runs
 * and decides with decideSchedule; the view built from that same snapshot then lets the passes that
 * follow a task's end cost what changed instead of the size of the room:
 *
 * - each task keeps how many of its needs have not succeeded (`unmet`) and who needs it, so a
 *   success makes only its dependents ready;
 * - the ready tasks stay sorted in pick order (comparePickOrder), so admitting k of them costs k
 *   steps while the caps are full, not one step per blocked task;
 * - the caps are counted from the active tasks the store reports in the same transaction, never from
 *   the view, so a stale view can only miss work, never admit past a cap.
 *
 * - a conditional task (run-when.ts) is judged again whenever one of its needs ends, in a task's end
 *   or in a skip of the same decision, and joins the ready tasks or the skipped ones by its verdict.
 *
 * Between whole passes only workers change tasks, and only active ones (a claim, a finish); every
 * other writer (commands, the reaper, new runs) is followed by a whole pass. `ended` reports what
 * left the active set; anything the view cannot explain returns false, and the caller rebuilds
 * from a whole read, as it does after a fan-out's expansion (new rows) and when an instance's end
 * stops its fail_fast fan-out (decideSchedule decides both). Property-tested against decideSchedule (test/unit/schedule-view.test.ts).
 */
import type { TaskStatus } from "./model.js";
import type {
  ScheduleCaps,
  ScheduleDecision,
  ScheduleRun,
  ScheduleSnapshot,
  ScheduleTask,
  TaskRef,
} from "./scheduling.js";
import { admit, comparePickOrder, stopsFanOut } from "./scheduling.js";
import type { RunWhen, WhenVerdict } from "./run-when.js";
import { isConditional, judgeWhen } from "./run-when.js";
import { ACTIVE_TASK_STATUSES, SKIPPING_TASK_STATUSES } from "./task-states.js";

/** An active task as the store reports it: what the caps count. */
export interface ActiveTask {
  runId: string;
  taskId: string;
  concurrencyKey: string | null;
  /** An instance's fan-out (its limit counts its active instances); absent or null otherwise. */
  fanOut?: string | null;
}

/** A task that left the active set since the view last looked, with the status it has now. */
export interface EndedTask {
  runId: string;
  taskId: string;
  status: TaskStatus;
}

interface Entry {
  task: ScheduleTask;
  /** Needs not (yet) succeeded; a need missing from the snapshot never succeeds. */
  unmet: number;
  dependents: Entry[];
  /** Already among the ready tasks or the gates to open. */
  placed: boolean;
}

const keyOf = (runId: string, taskId: string): string => `${runId}\u0000${taskId}`;

export class ScheduleView {
  private readonly runs: Map<string, ScheduleRun>;
  private readonly entries = new Map<string, Entry>();
  /** Blocked tasks of running runs whose needs all succeeded, not gates: sorted in pick order. */
  private ready: Entry[] = [];
  /** Gates whose needs all succeeded and that have not opened. */
  private readonly gates = new Set<Entry>();
  /** Fan-out templates whose needs all succeeded: to expand. */
  private readonly fanOuts = new Set<Entry>();
  /** Tasks that ended badly and whose dependents are still to be skipped. */
  private seeds: Entry[] = [];
  /** What the view holds as active (queued, running, canceling), by key. */
  private readonly active = new Map<string, Entry>();
  /** Conditional tasks to judge in the next decision: a need of theirs ended since the last one. */
  private toJudge: Entry[] = [];

  constructor(snapshot: ScheduleSnapshot) {
    this.runs = new Map(snapshot.runs.map((r) => [r.runId, { ...r }]));
    for (const t of snapshot.tasks) {
      this.entries.set(keyOf(t.runId, t.taskId), { task: { ...t }, unmet: 0, dependents: [], placed: false });
    }
    for (const e of this.entries.values()) {
      for (const n of e.task.needs) {
        const need = this.entries.get(keyOf(e.task.runId, n));
        if (need === undefined || need.task.status !== "succeeded") e.unmet += 1;
        need?.dependents.push(e);
      }
      if (ACTIVE_TASK_STATUSES.has(e.task.status)) this.active.set(keyOf(e.task.runId, e.task.taskId), e);
      if (SKIPPING_TASK_STATUSES.has(e.task.status)) this.seeds.push(e);
      if (isConditional(e.task.when) && this.movable(e)) this.toJudge.push(e);
      this.offer(e, false);
    }
    this.ready.sort((a, b) => comparePickOrder(a.task, b.task));
  }

  /** A task's needs (task ids of its run), for a store that checks them before it queues. */
  needsOf(runId: string, taskId: string): readonly string[] {
    return this.entries.get(keyOf(runId, taskId))?.task.needs ?? [];
  }

  /** A task's run condition (absent: "succeeded"), for a store that checks it before it queues. */
  whenOf(runId: string, taskId: string): RunWhen | undefined {
    return this.entries.get(keyOf(runId, taskId))?.task.when;
  }

  /** Whether the store's open runs are exactly the view's, with the same status and cap. */
  sameRuns(runs: readonly ScheduleRun[]): boolean {
    if (runs.length !== this.runs.size) return false;
    for (const r of runs) {
      const mine = this.runs.get(r.runId);
      if (mine === undefined || mine.status !== r.status || mine.maxParallel !== r.maxParallel) return false;
    }
    return true;
  }

  /**
   * Of the store's active tasks, which the view held as active and are not any more: the caller
   * reads their statuses and hands them to `ended`. Null when the store holds an active task the
   * view does not know as active (a writer the view does not follow): rebuild.
   */
  left(storeActive: readonly ActiveTask[]): TaskRef[] | null {
    const still = new Set<string>();
    for (const a of storeActive) {
      const k = keyOf(a.runId, a.taskId);
      if (!this.active.has(k)) return null;
      still.add(k);
    }
    const gone: TaskRef[] = [];
    for (const [k, e] of this.active)
      if (!still.has(k)) gone.push({ runId: e.task.runId, taskId: e.task.taskId });
    return gone;
  }

  /** Takes in tasks that left the active set; false when one of them is not explained by a task's end. */
  ended(tasks: readonly EndedTask[]): boolean {
    for (const t of tasks) {
      const k = keyOf(t.runId, t.taskId);
      const e = this.active.get(k);
      if (e === undefined || ACTIVE_TASK_STATUSES.has(t.status) || t.status === "blocked") return false;
      // A fail_fast fan-out stopped by this end: a whole pass skips its instances not started.
      if (stopsFanOut({ ...e.task, status: t.status })) return false;
      this.active.delete(k);
      e.task.status = t.status;
      for (const d of e.dependents) if (isConditional(d.task.when)) this.toJudge.push(d);
      if (t.status === "succeeded") {
        for (const d of e.dependents) {
          d.unmet -= 1;
          this.offer(d, true);
        }
      } else if (SKIPPING_TASK_STATUSES.has(t.status)) this.seeds.push(e);
    }
    return true;
  }

  /** The same decision decideSchedule makes on the room as it is, with `storeActive` counted against the caps. */
  decide(storeActive: readonly ActiveTask[], caps: ScheduleCaps): ScheduleDecision {
    const skipped: Entry[] = [];
    const marked = new Set<Entry>();
    const judge = (e: Entry): WhenVerdict =>
      judgeWhen(
        e.task.when,
        e.task.needs.map((n) => {
          const need = this.entries.get(keyOf(e.task.runId, n));
          if (need === undefined) return { status: undefined };
          return {
            status: marked.has(need) ? "skipped" : need.task.status,
            isGate: need.task.isGate === true,
          };
        }),
      );
    const late = new Set<Entry>();
    const skip = (e: Entry): void => {
      marked.add(e);
      skipped.push(e);
      this.seeds.push(e);
    };
    // A conditional task is judged on its needs as they stand with this decision's skips counted.
    const settle = (e: Entry): void => {
      const verdict = judge(e);
      if (verdict === "skip") skip(e);
      else if (verdict === "run") late.add(e);
    };
    for (const e of this.toJudge.splice(0)) if (!marked.has(e) && this.movable(e)) settle(e);
    for (let next = this.seeds.pop(); next !== undefined; next = this.seeds.pop()) {
      for (const d of next.dependents) {
        if (marked.has(d) || !this.movable(d)) continue;
        if (isConditional(d.task.when)) settle(d);
        else skip(d);
      }
    }
    for (const e of late) if (!marked.has(e)) this.place(e, true);
    const ready = this.ready;
    const candidates = function* (): Generator<ScheduleTask> {
      for (const e of ready) if (!marked.has(e) && e.task.status === "blocked") yield e.task;
    };
    const toQueue = admit(
      candidates(),
      storeActive,
      (runId) => this.runs.get(runId)?.maxParallel ?? null,
      caps,
    );
    const bySeq = (a: Entry, b: Entry): number => {
      if (a.task.seq !== b.task.seq) return a.task.seq - b.task.seq;
      if (a.task.runId !== b.task.runId) return a.task.runId < b.task.runId ? -1 : 1;
      return a.task.taskId < b.task.taskId ? -1 : a.task.taskId > b.task.taskId ? 1 : 0;
    };
    const ref = (e: Entry): TaskRef => ({ runId: e.task.runId, taskId: e.task.taskId });
    const toOpen = [...this.gates]
      .filter((g) => !marked.has(g))
      .sort(bySeq)
      .map(ref);
    const toExpand = [...this.fanOuts]
      .filter((f) => !marked.has(f))
      .sort(bySeq)
      .map(ref);
    return { toQueue, toSkip: skipped.sort(bySeq).map(ref), toOpen, toExpand, toStop: [] };
  }

  /** Records what the caller wrote of a decision: queued tasks become active, skipped ones end, gates open. */
  applied(decision: ScheduleDecision): void {
    for (const r of decision.toSkip) {
      const e = this.entries.get(keyOf(r.runId, r.taskId));
      if (e !== undefined) e.task.status = "skipped";
    }
    for (const r of decision.toQueue) {
      const k = keyOf(r.runId, r.taskId);
      const e = this.entries.get(k);
      if (e === undefined) continue;
      e.task.status = "queued";
      this.active.set(k, e);
    }
    for (const r of decision.toOpen) {
      const e = this.entries.get(keyOf(r.runId, r.taskId));
      if (e === undefined) continue;
      e.task.gateOpen = true;
      this.gates.delete(e);
    }
    if (decision.toQueue.length + decision.toSkip.length > 0)
      this.ready = this.ready.filter((e) => e.task.status === "blocked");
    for (const r of [...decision.toSkip, ...decision.toExpand]) {
      const e = this.entries.get(keyOf(r.runId, r.taskId));
      if (e !== undefined) {
        this.gates.delete(e);
        this.fanOuts.delete(e);
      }
    }
  }

  private movable(e: Entry): boolean {
    return e.task.status === "blocked" && this.runs.get(e.task.runId)?.status === "running";
  }

  /** Puts a task whose needs all succeeded where the next decision looks for it; conditional ones are judged in decide. */
  private offer(e: Entry, sorted: boolean): void {
    if (e.unmet !== 0 || isConditional(e.task.when)) return;
    this.place(e, sorted);
  }

  /** Puts a task that may run where the next decision looks for it. */
  private place(e: Entry, sorted: boolean): void {
    if (e.placed || !this.movable(e)) return;
    e.placed = true;
    if (e.task.isGate === true) {
      if (e.task.gateOpen !== true) this.gates.add(e);
      return;
    }
    if (e.task.isFanOut === true) {
      this.fanOuts.add(e);
      return;
    }
    if (!sorted) {
      this.ready.push(e);
      return;
    }
    let lo = 0;
    let hi = this.ready.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (comparePickOrder(this.ready[mid]!.task, e.task) < 0) lo = mid + 1;
      else hi = mid;
    }
    this.ready.splice(lo, 0, e);
  }
}
