/**
 * Store contract: run conditions (`when`, src/domain/run-when.ts; docs/dag-format.md "Run
 * conditions"). The schedule step waits for every need of a conditional task to end, then queues it
 * or skips it by its condition, in whole and incremental steps alike: a `when = "failed"` cleanup
 * runs behind a failure and is skipped after a success, a `when = "done"` one runs either way, a
 * `when = "denied"` branch runs behind a denied approval gate (which does not count as a failure).
 * The run's outcome stays what its tasks say: a failure or a deny fails the run whatever ran after.
 * The write re-checks the condition on the needs as the store has them, whatever the view thought.
 */
import { expect, it } from "vitest";
import type { GateSpec } from "../../../src/domain/gates.js";
import type { ParsedDag } from "../../../src/domain/model.js";
import type { LeaderFence, RunRecord, Store } from "../../../src/ports/store.js";
import {
  becomeLeader,
  cmd,
  dag,
  failed,
  offer,
  ok,
  runInput,
  session,
  task,
} from "../../support/store-fixtures.js";
import type { ContractContext } from "../context.js";

const LONG_LEASE = 60 * 60_000;

const GATE: GateSpec = {
  who: "operators",
  approvers: 1,
  publisherMayApprove: true,
  timeoutMs: null,
  onTimeout: "fail",
  description: "ship it",
  form: {},
};

export function runConditionsSection(ctx: ContractContext): void {
  const setup = async (
    d: ParsedDag,
  ): Promise<{ store: Store; room: string; fence: LeaderFence; run: RunRecord }> => {
    const store = await ctx.store();
    const room = ctx.uid("!when");
    const fence = await becomeLeader(store, room);
    await store.renewLease(fence, LONG_LEASE);
    const r = await store.createRun(cmd(fence), runInput(room, d));
    if (r.kind !== "created") throw new Error(`expected created, got ${r.kind}`);
    return { store, room, fence, run: r.run };
  };
  const statuses = async (store: Store, run: RunRecord): Promise<Record<string, string>> =>
    Object.fromEntries((await store.listTasks(run.runId)).map((t) => [t.taskId, t.status]));
  /** Claims every queued task of the room and ends it: `failing` ones fail, the rest succeed. */
  const work = async (store: Store, room: string, failing: readonly string[] = []): Promise<string[]> => {
    const w = session("w");
    const ran: string[] = [];
    for (
      let c = await store.claimTask(offer(w, [room]));
      c !== null;
      c = await store.claimTask(offer(w, [room]))
    ) {
      ran.push(c.task.taskId);
      await store.finishTask(c.token, failing.includes(c.task.taskId) ? failed : ok);
    }
    return ran.sort();
  };
  const pipeline = (id: string): ParsedDag =>
    dag(id, [
      task("build"),
      task("test", { needs: ["build"] }),
      task("cleanup", { needs: ["build", "test"], when: "failed" }),
      task("always", { needs: ["test"], when: "done" }),
      task("alarm", { needs: ["test"], when: "failed" }),
      task("after-cleanup", { needs: ["cleanup"] }),
    ]);

  for (const incremental of [false, true]) {
    const how = incremental ? "incremental" : "whole";
    it(`a failure runs its when = "failed" cleanup and its when = "done" task; the run still fails (${how} steps)`, async () => {
      const { store, room, fence, run } = await setup(pipeline(ctx.uid("fail")));
      expect((await store.getTask(run.runId, "cleanup"))?.when).toBe("failed");
      expect((await store.getTask(run.runId, "test"))?.when).toBeUndefined();
      expect(await store.scheduleStep(fence)).toEqual({ queued: 1, skipped: 0 });
      expect(await work(store, room, ["build"])).toEqual(["build"]);
      // test is skipped behind build; in the same step cleanup (build failed) and always (its
      // need ended) run; alarm's need was skipped, not failed: its condition is not met.
      expect(await store.scheduleStep(fence, incremental)).toEqual({ queued: 2, skipped: 2 });
      expect(await statuses(store, run)).toEqual({
        build: "failed",
        test: "skipped",
        cleanup: "queued",
        always: "queued",
        alarm: "skipped",
        "after-cleanup": "blocked",
      });
      expect(await work(store, room)).toEqual(["always", "cleanup"]);
      expect(await store.scheduleStep(fence, incremental)).toEqual({ queued: 1, skipped: 0 });
      expect(await work(store, room)).toEqual(["after-cleanup"]);
      await store.scheduleStep(fence, incremental);
      const outcomes = await store.deriveRunOutcomes(fence);
      expect(outcomes.map((o) => o.to)).toEqual(["failed"]);
    });

    it(`a success skips the when = "failed" cleanup and what needs it, runs the when = "done" task; the run succeeds (${how} steps)`, async () => {
      const { store, room, fence, run } = await setup(pipeline(ctx.uid("pass")));
      await store.scheduleStep(fence);
      expect(await work(store, room)).toEqual(["build"]);
      expect(await store.scheduleStep(fence, incremental)).toEqual({ queued: 1, skipped: 0 });
      expect((await statuses(store, run)).cleanup).toBe("blocked");
      expect(await work(store, room)).toEqual(["test"]);
      expect(await store.scheduleStep(fence, incremental)).toEqual({ queued: 1, skipped: 3 });
      expect(await statuses(store, run)).toMatchObject({
        cleanup: "skipped",
        "after-cleanup": "skipped",
        alarm: "skipped",
        always: "queued",
      });
      expect(await work(store, room)).toEqual(["always"]);
      await store.scheduleStep(fence, incremental);
      expect((await store.deriveRunOutcomes(fence)).map((o) => o.to)).toEqual(["succeeded"]);
    });

    it(`a denied gate runs its when = "denied" branch, not the when = "failed" one; the run fails (${how} steps)`, async () => {
      const { store, room, fence, run } = await setup(
        dag(ctx.uid("deny"), [
          task("build"),
          task("ship", { action: "approve", needs: ["build"], gate: GATE }),
          task("deploy", { needs: ["ship"] }),
          task("notify", { needs: ["ship"], when: "denied" }),
          task("rollback", { needs: ["ship"], when: "failed" }),
        ]),
      );
      await store.scheduleStep(fence);
      expect(await work(store, room)).toEqual(["build"]);
      expect(await store.scheduleStep(fence, incremental)).toMatchObject({
        queued: 0,
        skipped: 0,
        opened: 1,
      });
      const denied = await store.decideGate(cmd(fence), room, run.dagId, "ship", {
        decision: "deny",
        by: "local:a",
        face: "cli",
        values: {},
        reason: "not today",
      });
      expect(denied.verdict.kind).toBe("denied");
      // A command is followed by a whole step (docs/architecture.md §4): the view follows only workers.
      expect(await store.scheduleStep(fence)).toEqual({ queued: 1, skipped: 2 });
      expect(await statuses(store, run)).toEqual({
        build: "succeeded",
        ship: "failed",
        deploy: "skipped",
        notify: "queued",
        rollback: "skipped",
      });
      expect(await work(store, room)).toEqual(["notify"]);
      await store.scheduleStep(fence, incremental);
      expect((await store.deriveRunOutcomes(fence)).map((o) => o.to)).toEqual(["failed"]);
    });
  }

  it("the write re-checks a conditional task's condition on the needs as the store has them, whatever the view thought", async () => {
    const { store, room, fence, run } = await setup(
      dag(ctx.uid("guard"), [task("a"), task("z"), task("cleanup", { needs: ["a"], when: "failed" })]),
    );
    await store.setRoomCap(room, 1, { fence });
    expect(await store.scheduleStep(fence)).toEqual({ queued: 1, skipped: 0 });
    const w = session("w");
    const first = await store.claimTask(offer(w, [room]));
    expect(first?.task.taskId).toBe("a");
    await store.finishTask(first!.token, failed);
    // z takes the one slot; cleanup is ready in the leader's view.
    expect(await store.scheduleStep(fence, true)).toEqual({ queued: 1, skipped: 0 });
    expect(await statuses(store, run)).toEqual({ a: "failed", z: "queued", cleanup: "blocked" });
    // Behind every store call's back, a succeeded after all: cleanup's condition no longer holds.
    await ctx.capabilities.setTaskStatus(run.runId, "a", "succeeded");
    const second = await store.claimTask(offer(w, [room]));
    await store.finishTask(second!.token, ok);
    const steps = [await store.scheduleStep(fence, true), await store.scheduleStep(fence, true)];
    expect(steps.map((r) => r.queued)).toEqual([0, 0]);
    expect((await store.getTask(run.runId, "cleanup"))?.status).toBe("skipped");
  });
}
