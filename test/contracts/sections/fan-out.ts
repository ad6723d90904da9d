/**
 * Store contract: fan-out (for_each, src/domain/fan-out.ts). When the producer succeeded, the
 * leader's scheduling step replaces the template by one instance per item of its list, in one fenced
 * write: the template's row is gone, each instance is an ordinary blocked task with the template's
 * action and retries, its item and its arguments with the item put in, and what needed the template
 * needs every instance. A stale fence's step expands nothing, and a second step never expands
 * again. Instances are admitted under their fan-out's max_parallel; with fail_fast, an instance's
 * failure skips the instances not started; zero items let the dependents go on.
 */
import { expect, it } from "vitest";
import type { ForEachSpec } from "../../../src/domain/model.js";
import { ConflictError } from "../../../src/ports/errors.js";
import type { LeaderFence, Store } from "../../../src/ports/store.js";
import {
  becomeLeader,
  dag,
  failed,
  LEASE_TTL_MS,
  offer,
  ok,
  publishRunning,
  session,
  task,
} from "../../support/store-fixtures.js";
import type { ContractContext } from "../context.js";

const LIST = { hosts: { pattern: "[a-z0-9.-]+", list: true as const, maxItems: 100 } };

export function fanOutSection(ctx: ContractContext): void {
  const setup = async (forEach: Partial<ForEachSpec> = {}, retries = 0) => {
    const store = await ctx.store();
    const room = ctx.uid("!fanout");
    const fence = await becomeLeader(store, room);
    const spec: ForEachSpec = {
      producer: "discover",
      output: "hosts",
      maxParallel: null,
      failFast: false,
      ...forEach,
    };
    const d = dag(ctx.uid("fleet"), [
      task("discover", { outputs: LIST }),
      task("deploy", {
        needs: ["discover"],
        args: { host: "{item}", n: "{item.index}", fixed: 7 },
        retries,
        forEach: spec,
      }),
      // Another action: the workers below (offering echo) never claim it.
      task("report", { action: "notify", needs: ["deploy", "discover"] }),
    ]);
    const run = await publishRunning(store, fence, d);
    return { store, room, fence, run };
  };
  const statuses = async (store: Store, runId: string): Promise<Record<string, string>> =>
    Object.fromEntries((await store.listTasks(runId)).map((t) => [t.taskId, t.status]));
  /** The producer claimed and finished with `hosts` as its list. */
  const produce = async (store: Store, room: string, hosts: string[]): Promise<void> => {
    const claimed = await store.claimTask(offer(session("worker"), [room]));
    expect(claimed?.task.taskId).toBe("discover");
    await store.finishTask(claimed!.token, { ...ok, outputs: { hosts } });
  };
  const active = (s: Record<string, string>): number =>
    Object.values(s).filter((v) => v === "queued" || v === "running").length;
  const fanOutEvents = async (store: Store, room: string) =>
    (await store.readEvents(room, 0)).filter((e) => e.kind === "fan_out.expanded");

  it("replaces the template by one instance per item in one fenced write, and never twice", async () => {
    const { store, room, fence, run } = await setup({ maxParallel: 8 });
    expect(await statuses(store, run.runId)).toEqual({
      discover: "queued",
      deploy: "blocked",
      report: "blocked",
    });
    await produce(store, room, ["web1", "web2", "db.example"]);
    const step = await store.scheduleStep(fence);
    expect(step.expanded).toBe(1);
    const tasks = await store.listTasks(run.runId);
    expect(tasks.map((t) => t.taskId)).toEqual([
      "discover",
      "report",
      "deploy[item=0]",
      "deploy[item=1]",
      "deploy[item=2]",
    ]);
    const second = tasks.find((t) => t.taskId === "deploy[item=1]")!;
    expect(second).toMatchObject({
      status: "blocked",
      action: "echo",
      args: { host: "web2", n: "1", fixed: 7 },
      needs: ["discover"],
      fanOut: "deploy",
      fanOutLimit: 8,
      item: "web2",
      forEach: null,
    });
    expect(tasks.find((t) => t.taskId === "report")!.needs).toEqual([
      "deploy[item=0]",
      "deploy[item=1]",
      "deploy[item=2]",
      "discover",
    ]);
    const events = await fanOutEvents(store, room);
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({
      taskId: "deploy",
      data: { producer: "discover", output: "hosts", items: 3 },
    });
    // The instances are scheduled by the next step; no step expands again.
    const next = await store.scheduleStep(fence);
    expect(next.expanded ?? 0).toBe(0);
    expect(next.queued).toBe(3);
    expect((await store.scheduleStep(fence)).expanded ?? 0).toBe(0);
    expect(await fanOutEvents(store, room)).toHaveLength(1);
  });

  it("a leader whose lease lapsed expands nothing; the next leader expands once", async () => {
    const { store, room, fence, run } = await setup();
    await produce(store, room, ["a", "b"]);
    const before = await store.listTasks(run.runId);
    ctx.clock.advance(LEASE_TTL_MS);
    const refused = await store.scheduleStep(fence).then(
      () => null,
      (e: unknown) => e,
    );
    expect(refused).toBeInstanceOf(ConflictError);
    expect(await store.listTasks(run.runId)).toEqual(before);
    expect(await fanOutEvents(store, room)).toHaveLength(0);
    const next: LeaderFence = await becomeLeader(store, room, "leader-2");
    expect((await store.scheduleStep(next)).expanded).toBe(1);
    expect((await store.scheduleStep(next)).expanded ?? 0).toBe(0);
    expect(Object.keys(await statuses(store, run.runId)).sort()).toEqual([
      "deploy[item=0]",
      "deploy[item=1]",
      "discover",
      "report",
    ]);
  });

  it("admits at most max_parallel instances of a fan-out at once, on whole and incremental steps", async () => {
    const { store, room, fence, run } = await setup({ maxParallel: 2 });
    await produce(store, room, ["a", "b", "c", "d", "e"]);
    await store.scheduleStep(fence);
    await store.scheduleStep(fence);
    let s = await statuses(store, run.runId);
    expect(active(s)).toBe(2);
    const me = session("w");
    for (let round = 0; round < 3; round++) {
      const claimed = await store.claimTask(offer(me, [room]));
      expect(claimed?.task.fanOut).toBe("deploy");
      await store.finishTask(claimed!.token, ok);
      await store.scheduleStep(fence, true);
      s = await statuses(store, run.runId);
      expect(active(s)).toBeLessThanOrEqual(2);
    }
    for (let claimed = await store.claimTask(offer(me, [room])); claimed !== null;) {
      await store.finishTask(claimed.token, ok);
      await store.scheduleStep(fence, true);
      s = await statuses(store, run.runId);
      expect(active(s)).toBeLessThanOrEqual(2);
      claimed = await store.claimTask(offer(me, [room]));
    }
    // Fan-in: report needed every instance, and is queued once all five succeeded.
    expect(s).toMatchObject({ report: "queued" });
    expect(Object.values(s).filter((v) => v === "succeeded")).toHaveLength(6);
  });

  it("fail_fast: an instance's failure skips the instances not started; the running one goes on", async () => {
    const { store, room, fence, run } = await setup({ maxParallel: 3, failFast: true });
    await produce(store, room, ["a", "b", "c", "d"]);
    await store.scheduleStep(fence);
    await store.scheduleStep(fence);
    const me = session("w");
    const first = await store.claimTask(offer(me, [room]));
    const second = await store.claimTask(offer(me, [room]));
    expect([first?.task.taskId, second?.task.taskId]).toEqual(["deploy[item=0]", "deploy[item=1]"]);
    await store.finishTask(first!.token, failed);
    await store.scheduleStep(fence, true);
    expect(await statuses(store, run.runId)).toEqual({
      discover: "succeeded",
      report: "skipped",
      "deploy[item=0]": "failed",
      "deploy[item=1]": "running",
      "deploy[item=2]": "skipped",
      "deploy[item=3]": "skipped",
    });
    const skipped = (await store.listTasks(run.runId)).find((t) => t.taskId === "deploy[item=2]")!;
    expect(skipped.error).toMatch(/fail_fast/);
    await store.finishTask(second!.token, ok);
    expect(await store.claimTask(offer(me, [room]))).toBeNull();
  });

  it("without fail_fast an instance's failure leaves the others to run; retries are per instance", async () => {
    const { store, room, fence, run } = await setup({ maxParallel: 3 }, 1);
    await produce(store, room, ["a", "b", "c"]);
    await store.scheduleStep(fence);
    await store.scheduleStep(fence);
    const me = session("w");
    const first = await store.claimTask(offer(me, [room]));
    await store.finishTask(first!.token, failed);
    await store.scheduleStep(fence, true);
    const s = await statuses(store, run.runId);
    expect(s["deploy[item=0]"]).toBe("queued");
    expect(s["deploy[item=1]"]).toBe("queued");
    expect(s["deploy[item=2]"]).toBe("queued");
    const again = (await store.listTasks(run.runId)).find((t) => t.taskId === "deploy[item=0]")!;
    expect(again.attempt).toBe(2);
  });

  it("zero items: no instance, and what needed the template goes on without it", async () => {
    const { store, room, fence, run } = await setup();
    await produce(store, room, []);
    expect((await store.scheduleStep(fence)).expanded).toBe(1);
    const tasks = await store.listTasks(run.runId);
    expect(tasks.map((t) => t.taskId)).toEqual(["discover", "report"]);
    expect(tasks[1]!.needs).toEqual(["discover"]);
    await store.scheduleStep(fence);
    expect(await statuses(store, run.runId)).toEqual({ discover: "succeeded", report: "queued" });
  });
}
