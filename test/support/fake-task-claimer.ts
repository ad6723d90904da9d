/**
 * A TaskClaimer & ChangeFeed in memory for the Worker's unit tests: it hands out the tasks it is
 * given once each, answers renewals as `renewals` says (granted, refused, failing, hanging) and
 * records every call with the FakeClock's time. With `latencyMs`, a claim or finish is answered
 * that long after it is sent (on the FakeClock), so claims and finishes can be in flight together.
 */
import { ConflictError, StoreError } from "../../src/ports/errors.js";
import type {
  ChangeFeed,
  ClaimBatch,
  ClaimedTask,
  NodeOffer,
  RunStore,
  TaskClaimer,
  TaskRecord,
  TaskResult,
  TaskToken,
} from "../../src/ports/store.js";
import type { TaskStatus } from "../../src/domain/model.js";
import type { FakeClock } from "./fake-clock.js";
import type { RenewalMode } from "./fake-lease-store.js";
import { taskFixture } from "./task-record.js";

export function taskRecord(runId: string, taskId: string, action: string): TaskRecord {
  return taskFixture({ runId, taskId, status: "running", version: 2, action });
}

export class FakeTaskClaimer implements TaskClaimer, ChangeFeed, Pick<RunStore, "getTask" | "listTasks"> {
  renewals: RenewalMode = "grant";
  /** How long a claim or finish takes to answer, on the FakeClock; 0 answers at once. */
  latencyMs = 0;
  /** At most this many tasks per claim whatever max asks (a claim cut short, e.g. by a wake's count). */
  claimLimit = Number.POSITIVE_INFINITY;
  /** When set, finishAndClaim rejects with it and changes nothing (a refused or failed transaction). */
  finishAndClaimError: Error | null = null;
  /** Until this monotonic time, every finish (alone or with a claim) fails as a store outage would. */
  finishFailsUntil = Number.NEGATIVE_INFINITY;
  /** What a claim that left nothing ready says of the soonest waiting task (ms until ready). */
  nextReadyInMs: number | null = null;
  readonly calls: Array<{ op: string; at: number }> = [];
  readonly finished: TaskResult[] = [];
  /** The task ids ("run/task") of the finishes recorded, in order. */
  readonly finishedTasks: string[] = [];
  private readonly queue: TaskRecord[] = [];

  constructor(private readonly clock: FakeClock) {}

  add(task: TaskRecord): void {
    this.queue.push(task);
  }

  claimTask(offer: NodeOffer): Promise<ClaimedTask | null> {
    const task = this.queue.shift();
    if (task === undefined) return Promise.resolve(null);
    this.calls.push({ op: "claim", at: this.clock.monotonicMs() });
    const token: TaskToken = {
      runId: task.runId,
      taskId: task.taskId,
      version: task.version,
      session: offer.session,
    };
    return Promise.resolve({ token, task: { ...task, executor: offer.session } });
  }

  /** A claim statement of its own (op "claims"), not the claim inside finishAndClaim. */
  async claimTasks(offer: NodeOffer, max: number): Promise<ClaimBatch> {
    this.calls.push({ op: "claims", at: this.clock.monotonicMs() });
    await this.answer();
    return this.take(offer, max);
  }

  private async answer(): Promise<void> {
    if (this.latencyMs > 0) await this.clock.sleep(this.latencyMs);
  }

  private async take(offer: NodeOffer, max: number): Promise<ClaimBatch> {
    const claimed: ClaimedTask[] = [];
    while (claimed.length < Math.min(max, this.claimLimit)) {
      const c = await this.claimTask(offer);
      if (c === null) break;
      claimed.push(c);
    }
    const more = this.queue.length > 0;
    return { claimed, more, nextReadyInMs: more ? null : this.nextReadyInMs };
  }

  renewTaskLease(
    _token: TaskToken,
    leaseMs: number,
  ): Promise<{ leaseExpiresAt: number; status: TaskStatus }> {
    this.calls.push({ op: `renew:${this.renewals}`, at: this.clock.monotonicMs() });
    switch (this.renewals) {
      case "hang":
        return new Promise<never>(() => undefined);
      case "fail":
        return Promise.reject(new StoreError("renew task lease", { cause: new Error("connection refused") }));
      case "conflict":
        return Promise.reject(new ConflictError("renew task lease", { version: 2 }, { version: 3 }));
      case "grant":
        return Promise.resolve({ leaseExpiresAt: this.clock.monotonicMs() + leaseMs, status: "running" });
    }
  }

  /** The words of each release asked for; answered like a renewal in the current mode. */
  readonly releases: string[] = [];

  releaseTask(_token: TaskToken, why: string): Promise<{ status: TaskStatus }> {
    this.calls.push({ op: `release:${this.renewals}`, at: this.clock.monotonicMs() });
    if (this.renewals === "grant") this.releases.push(why);
    switch (this.renewals) {
      case "hang":
        return new Promise<never>(() => undefined);
      case "fail":
        return Promise.reject(new StoreError("release task", { cause: new Error("connection refused") }));
      case "conflict":
        return Promise.reject(new ConflictError("release task", { version: 2 }, { version: 3 }));
      case "grant":
        return Promise.resolve({ status: "queued" });
    }
  }

  writeTaskOutput(): Promise<void> {
    this.calls.push({ op: "output", at: this.clock.monotonicMs() });
    return Promise.resolve();
  }

  async finishTask(token: TaskToken, result: TaskResult): Promise<{ status: TaskStatus }> {
    this.calls.push({ op: "finish", at: this.clock.monotonicMs() });
    await this.answer();
    this.failFinishNow();
    return this.record(token, result);
  }

  private failFinishNow(): void {
    if (this.clock.monotonicMs() < this.finishFailsUntil)
      throw new StoreError("finish task", { cause: new Error("connection refused") });
  }

  private record(token: TaskToken, result: TaskResult): { status: TaskStatus } {
    this.finished.push(result);
    this.finishedTasks.push(`${token.runId}/${token.taskId}`);
    return { status: result.outcome === "canceled" ? "canceled" : result.outcome };
  }

  async finishAndClaim(
    token: TaskToken,
    result: TaskResult,
    offer: NodeOffer,
    max: number,
  ): Promise<{ status: TaskStatus; batch: ClaimBatch }> {
    this.calls.push({ op: "claim-after-finish", at: this.clock.monotonicMs() });
    await this.answer();
    if (this.finishAndClaimError !== null) throw this.finishAndClaimError;
    this.failFinishNow();
    // The claim picks from the queue as it was before the finish, as the stores do.
    const batch = await this.take(offer, max);
    return { ...this.record(token, result), batch };
  }

  getTask(): Promise<TaskRecord | null> {
    return Promise.resolve(null);
  }

  listTasks(): Promise<TaskRecord[]> {
    return Promise.resolve([]);
  }

  onChange(): () => void {
    return () => undefined;
  }
}
