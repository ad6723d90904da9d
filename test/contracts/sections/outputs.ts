/**
 * Store contract: task outputs. A run keeps each task's declared outputs; a finish that
 * makes the task succeed keeps the values it carries, in the same fenced write (finishTask and
 * finishAndClaim alike); a failure, a retry's requeue or a stale attempt keeps none; racing finishes
 * of one claim land one set of values exactly once; values the worker could not have accepted are
 * refused before anything changes.
 */
import { expect, it } from "vitest";
import { ConflictError } from "../../../src/ports/errors.js";
import type { LeaderFence, Store, TaskResult } from "../../../src/ports/store.js";
import {
  becomeLeader,
  dag,
  failed,
  offer,
  publishRunning,
  race,
  session,
  task,
} from "../../support/store-fixtures.js";
import type { ContractContext } from "../context.js";

const VERSION = { version: "[0-9]+\\.[0-9]+\\.[0-9]+" };

function succeeded(outputs: Record<string, string>): TaskResult {
  return { outcome: "succeeded", exitCode: 0, output: "built\n", error: null, outputs };
}

export function outputsSection(ctx: ContractContext): void {
  const setup = async (): Promise<{ store: Store; room: string; fence: LeaderFence }> => {
    const store = await ctx.store();
    const room = ctx.uid("!out");
    return { store, room, fence: await becomeLeader(store, room) };
  };

  it("keeps each task's declared outputs with the run, none for a task that declares none", async () => {
    const { store, fence } = await setup();
    const run = await publishRunning(
      store,
      fence,
      dag(ctx.uid("d"), [task("build", { outputs: VERSION }), task("deploy", { needs: ["build"] })]),
    );
    const [build, deploy] = await store.listTasks(run.runId);
    expect(build).toMatchObject({ taskId: "build", outputPatterns: VERSION, outputValues: null });
    expect(deploy).toMatchObject({ taskId: "deploy", outputPatterns: null, outputValues: null });
    expect((await store.getRunById(run.runId))?.dag.tasks[0]?.outputs).toEqual(VERSION);
  });

  it("a success keeps the values it carries, with finishTask and finishAndClaim alike", async () => {
    const { store, room, fence } = await setup();
    const run = await publishRunning(
      store,
      fence,
      dag(ctx.uid("d"), [task("a", { outputs: VERSION }), task("b", { outputs: { tag: ".*" } })]),
    );
    const w = session("w");
    const [a, b] = (await store.claimTasks(offer(w, [room]), 2)).claimed;
    expect((await store.finishTask(a!.token, succeeded({ version: "1.2.3" }))).status).toBe("succeeded");
    const both = await store.finishAndClaim(b!.token, succeeded({ tag: "v 1 = ok" }), offer(w, [room]), 1);
    expect(both.status).toBe("succeeded");
    expect(await store.getTask(run.runId, "a")).toMatchObject({
      status: "succeeded",
      outputValues: { version: "1.2.3" },
    });
    expect((await store.getTask(run.runId, "b"))?.outputValues).toEqual({ tag: "v 1 = ok" });
  });

  it("a failure keeps no values, also when it goes back to the queue; the retry's success keeps its own", async () => {
    const { store, room, fence } = await setup();
    const run = await publishRunning(
      store,
      fence,
      dag(ctx.uid("d"), [task("a", { outputs: VERSION, retries: 1, retryBackoffMs: 1 }), task("z")]),
    );
    const w = session("w");
    const first = (await store.claimTask(offer(w, [room], { actions: ["echo"] })))!;
    expect(first.task.taskId).toBe("a");
    const status = await store.finishTask(first.token, { ...failed, outputs: { version: "9.9.9" } });
    expect(status.status).toBe("queued");
    expect((await store.getTask(run.runId, "a"))?.outputValues).toBeNull();
    ctx.clock.advance(100);
    const again = (await store.claimTasks(offer(w, [room]), 2)).claimed.find((c) => c.task.taskId === "a")!;
    expect(again.task.attempt).toBe(2);
    expect(again.task.outputValues).toBeNull();
    await store.finishTask(again.token, succeeded({ version: "2.0.0" }));
    expect((await store.getTask(run.runId, "a"))?.outputValues).toEqual({ version: "2.0.0" });

    const last = await publishRunning(store, fence, dag(ctx.uid("d"), [task("only", { outputs: VERSION })]));
    const c = (await store.claimTask(offer(w, [room])))!;
    expect(c.task.runId).toBe(last.runId);
    expect((await store.finishTask(c.token, { ...failed, outputs: { version: "1.0.0" } })).status).toBe(
      "failed",
    );
    expect((await store.getTask(last.runId, "only"))?.outputValues).toBeNull();
  });

  it("a stale attempt's values never land; racing finishes of one claim land one set, once", async () => {
    const { store, room, fence } = await setup();
    const run = await publishRunning(store, fence, dag(ctx.uid("d"), [task("a", { outputs: VERSION })]));
    const w = session("w");
    const c = (await store.claimTask(offer(w, [room])))!;
    const stale = { ...c.token, version: c.token.version + 1 };
    await expect(store.finishTask(stale, succeeded({ version: "6.6.6" }))).rejects.toBeInstanceOf(
      ConflictError,
    );
    const other = { ...c.token, session: session("w") };
    await expect(store.finishTask(other, succeeded({ version: "6.6.6" }))).rejects.toBeInstanceOf(
      ConflictError,
    );
    expect(await store.getTask(run.runId, "a")).toMatchObject({ status: "running", outputValues: null });

    const racers = ["1.0.0", "2.0.0", "3.0.0", "4.0.0"].map(
      (version) => () => store.finishTask(c.token, succeeded({ version })),
    );
    const { values, errors } = await race(racers);
    expect(values).toHaveLength(1);
    expect(errors.every((e) => e instanceof ConflictError)).toBe(true);
    const kept = (await store.getTask(run.runId, "a"))?.outputValues;
    expect(["1.0.0", "2.0.0", "3.0.0", "4.0.0"]).toContain(kept?.["version"]);
    // And nothing changes it afterwards, whoever asks.
    await expect(store.finishTask(c.token, succeeded({ version: "5.0.0" }))).rejects.toBeInstanceOf(
      ConflictError,
    );
    expect((await store.getTask(run.runId, "a"))?.outputValues).toEqual(kept);
  });

  it("refuses values the worker could not have accepted before anything changes", async () => {
    const { store, room, fence } = await setup();
    const run = await publishRunning(store, fence, dag(ctx.uid("d"), [task("a", { outputs: VERSION })]));
    const c = (await store.claimTask(offer(session("w"), [room])))!;
    const before = await store.readEvents(room, 0);
    const bad: Array<Record<string, unknown>> = [
      { version: 1 },
      { "bad name": "1.0.0" },
      { version: "x".repeat(4097) },
      { version: "a\0b" },
      Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`o${i}`, "1"])),
    ];
    for (const outputs of bad) {
      const result = { ...succeeded({}), outputs } as TaskResult;
      await expect(store.finishTask(c.token, result)).rejects.toBeInstanceOf(RangeError);
      await expect(
        store.finishAndClaim(c.token, result, offer(session("w"), [room]), 1),
      ).rejects.toBeInstanceOf(RangeError);
    }
    expect(await store.getTask(run.runId, "a")).toMatchObject({ status: "running", outputValues: null });
    expect(await store.readEvents(room, 0)).toEqual(before);
  });
}
