/**
 * Store contract: finishAndClaim, a finish and the next claim in one transaction. The
 * finish is fenced and decided exactly as finishTask; a refused finish claims nothing and changes
 * nothing; the claim picks from the tasks as they were before the finish; the finish's log line
 * comes before the claim's; racing workers that hand their slot on this way still run each task
 * exactly once. The slots of one node that finish at once (which a store may carry in one
 * statement, as PostgreSQL's does: docs/architecture.md §8) each get their own answer: a refused
 * finish alone is refused, and no task is claimed twice.
 */
import { expect, it } from "vitest";
import { ConflictError, NotFoundError } from "../../../src/ports/errors.js";
import type { ClaimedTask, LeaderFence, NodeOffer, Store, TaskResult } from "../../../src/ports/store.js";
import {
  becomeLeader,
  dag,
  failed,
  ok,
  offer,
  publishRunning,
  race,
  session,
  task,
} from "../../support/store-fixtures.js";
import type { ContractContext } from "../context.js";

const RACERS = 8;

export function finishClaimSection(ctx: ContractContext): void {
  const setup = async (): Promise<{ store: Store; room: string; fence: LeaderFence }> => {
    const store = await ctx.store();
    const room = ctx.uid("!fc");
    return { store, room, fence: await becomeLeader(store, room) };
  };

  /**
   * `count` tasks queued at once (no scheduling step runs while the slots race), then every slot
   * (a Store and its node's offer) claims one and hands itself on with finishAndClaim until nothing
   * is left: each task must run and succeed exactly once, by the slots' own lists and the log.
   */
  const raceToTheEnd = async (
    count: number,
    slots: (room: string) => Promise<Array<{ s: Store; o: NodeOffer }>>,
  ): Promise<void> => {
    const { store, room, fence } = await setup();
    const ids = Array.from({ length: count }, (_, i) => `t${i}`);
    await store.setRoomCap(room, ids.length, { fence });
    const run = await publishRunning(
      store,
      fence,
      dag(
        ctx.uid("d"),
        ids.map((id) => task(id)),
      ),
    );
    const { values, errors } = await race(
      (await slots(room)).map(({ s, o }) => async () => {
        const mine: string[] = [];
        let held = (await s.claimTasks(o, 1)).claimed[0];
        while (held !== undefined) {
          mine.push(held.task.taskId);
          const r = await s.finishAndClaim(held.token, ok, o, 1);
          expect(r.status).toBe("succeeded");
          held = r.batch.claimed[0];
        }
        return mine;
      }),
    );
    expect(errors).toEqual([]);
    expect(values.flat().sort()).toEqual([...ids].sort());
    const log = await store.readEvents(room, 0);
    for (const id of ids) {
      expect(log.filter((e) => e.taskId === id && e.kind === "task.running")).toHaveLength(1);
      expect(log.filter((e) => e.taskId === id && e.kind === "task.succeeded")).toHaveLength(1);
    }
    const tasks = await Promise.all(ids.map((id) => store.getTask(run.runId, id)));
    expect(tasks.every((t) => t?.status === "succeeded")).toBe(true);
  };

  it("finishes the task and claims the next ones in claim order, in one transaction, finish logged first", async () => {
    const { store, room, fence } = await setup();
    const run = await publishRunning(
      store,
      fence,
      dag(ctx.uid("d"), [task("a", { priority: 9 }), task("b"), task("c", { priority: 5 }), task("d")]),
    );
    const w = session("w");
    const first = (await store.claimTask(offer(w, [room])))!;
    expect(first.task.taskId).toBe("a");
    const after = (await store.readEvents(room, 0)).at(-1)!.seq;
    const r = await store.finishAndClaim(first.token, ok, offer(w, [room]), 2);
    expect(r.status).toBe("succeeded");
    expect(r.batch.claimed.map((c) => c.task.taskId)).toEqual(["c", "b"]);
    expect(r.batch.claimed.every((c) => c.task.status === "running" && c.token.session === w)).toBe(true);
    expect(r.batch.more).toBe(true);
    expect(r.batch.nextReadyInMs).toBeNull();
    expect(await store.getTask(run.runId, "a")).toMatchObject({
      status: "succeeded",
      exitCode: 0,
      output: "done\n",
    });
    const lines = (await store.readEvents(room, after)).map((e) => `${e.kind} ${e.taskId}`);
    expect(lines[0]).toBe("task.succeeded a");
    expect(lines.slice(1).sort()).toEqual(["task.running b", "task.running c"]);
    // The claimed tokens work as claimTask's do; the last finish finds nothing left.
    const [c, b] = r.batch.claimed as [ClaimedTask, ClaimedTask];
    expect((await store.finishTask(c.token, ok)).status).toBe("succeeded");
    const last = await store.finishAndClaim(b.token, ok, offer(w, [room]), 4);
    expect(last.batch.claimed.map((x) => x.task.taskId)).toEqual(["d"]);
    expect(last.batch.more).toBe(false);
    const d = last.batch.claimed[0]!;
    const end = await store.finishAndClaim(d.token, ok, offer(w, [room]), 4);
    expect(end).toEqual({ status: "succeeded", batch: { claimed: [], more: false, nextReadyInMs: null } });
  });

  it("a finish whose claim takes nothing still names its node, without 'more', in its room: a node that stops serving itself says so", async () => {
    const { store, room, fence } = await setup();
    await publishRunning(store, fence, dag(ctx.uid("d"), [task("a"), task("b")]));
    const w = session("w");
    const mine = await store.claimTasks(offer(w, [room]), 1);
    expect(mine.more).toBe(true);
    // Another node takes what was left: w's next claim finds nothing.
    expect((await store.claimTasks(offer(session("x"), [room]), 1)).claimed).toHaveLength(1);
    const heard: string[][] = [];
    const off = store.onChange(
      (topic, roomId, nodes) => {
        if (topic === "tasks" && roomId === room && nodes !== undefined) heard.push([...nodes]);
      },
      ["tasks"],
    );
    try {
      const r = await store.finishAndClaim(mine.claimed[0]!.token, ok, offer(w, [room]), 1);
      expect(r.batch).toEqual({ claimed: [], more: false, nextReadyInMs: null });
      // Heard by this connection's own listeners (the leader of this process) at once, naming w
      // without "more" ("+w" would say it has more). PostgreSQL's LISTEN may also deliver the two
      // claims before it, and this finish again, late ("+w", "x", "w") when this process already
      // listened: seen once under a loaded CI run.
      expect(heard).toContainEqual([w.nodeId]);
    } finally {
      off();
    }
  });

  it("a refused finish (stale token, unknown task, unasked cancel) throws finishTask's error and claims nothing", async () => {
    const { store, room, fence } = await setup();
    const run = await publishRunning(store, fence, dag(ctx.uid("d"), [task("a"), task("b")]));
    const w = session("w");
    const c = (await store.claimTask(offer(w, [room])))!;
    const before = await store.readEvents(room, 0);
    const b0 = await store.getTask(run.runId, "b");
    const stale = { ...c.token, version: c.token.version + 7 };
    await expect(store.finishAndClaim(stale, ok, offer(w, [room]), 1)).rejects.toBeInstanceOf(ConflictError);
    await expect(
      store.finishAndClaim({ ...c.token, runId: "nope" }, ok, offer(w, [room]), 1),
    ).rejects.toBeInstanceOf(NotFoundError);
    const cancel: TaskResult = { outcome: "canceled", exitCode: null, output: "", error: null };
    await expect(store.finishAndClaim(c.token, cancel, offer(w, [room]), 1)).rejects.toBeInstanceOf(
      ConflictError,
    );
    const other = session("other");
    await expect(
      store.finishAndClaim({ ...c.token, session: other }, ok, offer(other, [room]), 1),
    ).rejects.toBeInstanceOf(ConflictError);
    expect(await store.readEvents(room, 0)).toEqual(before);
    expect(await store.getTask(run.runId, "b")).toEqual(b0);
    // Bad input is refused before anything is written: an outcome a worker cannot report, max < 1.
    const bad = { ...ok, outcome: "running" } as unknown as TaskResult;
    await expect(store.finishAndClaim(c.token, bad, offer(w, [room]), 1)).rejects.toThrow(RangeError);
    await expect(store.finishAndClaim(c.token, ok, offer(w, [room]), 0)).rejects.toThrow(RangeError);
    expect(await store.readEvents(room, 0)).toEqual(before);
    expect((await store.getTask(run.runId, "a"))?.status).toBe("running");
    // The token still holds: the real finish goes through and hands the slot to b.
    const r = await store.finishAndClaim(c.token, ok, offer(w, [room]), 1);
    expect(r.batch.claimed.map((x) => x.task.taskId)).toEqual(["b"]);
  });

  it("a failure with attempts left goes back to the queue and is not claimed again by the same call", async () => {
    const { store, room, fence } = await setup();
    const run = await publishRunning(
      store,
      fence,
      dag(ctx.uid("d"), [task("flaky", { retries: 2, retryBackoffMs: 0 })]),
    );
    const w = session("w");
    const c = (await store.claimTask(offer(w, [room])))!;
    const r = await store.finishAndClaim(c.token, failed, offer(w, [room]), 4);
    expect(r.status).toBe("queued");
    expect(r.batch.claimed).toEqual([]);
    expect(await store.getTask(run.runId, "flaky")).toMatchObject({ status: "queued", attempt: 2 });
    // The next claim takes the retry.
    const again = await store.claimTasks(offer(w, [room]), 4);
    expect(again.claimed.map((x) => `${x.task.taskId}#${x.task.attempt}`)).toEqual(["flaky#2"]);
  });

  it(`${RACERS} connections finishing and claiming 60 tasks: each task runs and succeeds exactly once`, async () => {
    const stores = await Promise.all(Array.from({ length: RACERS }, () => ctx.open()));
    await raceToTheEnd(60, async (room) => stores.map((s, i) => ({ s, o: offer(session(`w${i}`), [room]) })));
  });

  it("a node's slots finishing at once each get their own answer: the refused ones alone, no task claimed twice, one log line each", async () => {
    const { store, room, fence } = await setup();
    const ids = ["a", "b", "c", "d", "e", "f", "g", "h", "i"];
    await store.setRoomCap(room, ids.length, { fence });
    const run = await publishRunning(
      store,
      fence,
      dag(
        ctx.uid("d"),
        ids.map((id, k) => task(id, { priority: 20 - k })),
      ),
    );
    const w = session("w");
    const o = offer(w, [room]);
    const held = (await store.claimTasks(o, 6)).claimed;
    expect(held.map((c) => c.task.taskId)).toEqual(["a", "b", "c", "d", "e", "f"]);
    const [a, b, c, d, e, f] = held as [
      ClaimedTask,
      ClaimedTask,
      ClaimedTask,
      ClaimedTask,
      ClaimedTask,
      ClaimedTask,
    ];
    const after = (await store.readEvents(room, 0)).at(-1)!.seq;
    const cancel: TaskResult = { outcome: "canceled", exitCode: null, output: "", error: null };
    // All asked for in one turn, as slots ending together ask: four hand their slot on, one only
    // finishes, one is stale, one is an unasked cancel, and one finishes a task a second time.
    const answers = await Promise.allSettled([
      store.finishAndClaim(a.token, ok, o, 1),
      store.finishAndClaim({ ...b.token, version: b.token.version + 3 }, ok, o, 1),
      store.finishAndClaim(c.token, failed, o, 1),
      store.finishTask(d.token, ok),
      store.finishAndClaim(e.token, cancel, o, 1),
      store.finishAndClaim(f.token, ok, o, 1),
      store.finishAndClaim(a.token, ok, o, 1),
    ]);
    // The same token finishing twice at once: one of the two holds it, whichever the store took
    // first (behind a transaction-mode pooler the two may reach the server in either order).
    const [first, rb, rc, rd, re, rf, second] = answers;
    const [ra, ra2] = first.status === "fulfilled" ? [first, second] : [second, first];
    expect(ra).toMatchObject({ status: "fulfilled", value: { status: "succeeded" } });
    expect(rb).toMatchObject({ status: "rejected", reason: expect.any(ConflictError) });
    expect(rc).toMatchObject({ status: "fulfilled", value: { status: "failed" } });
    expect(rd).toMatchObject({ status: "fulfilled", value: { status: "succeeded" } });
    expect(re).toMatchObject({ status: "rejected", reason: expect.any(ConflictError) });
    expect(rf).toMatchObject({ status: "fulfilled", value: { status: "succeeded" } });
    expect(ra2).toMatchObject({ status: "rejected", reason: expect.any(ConflictError) });
    // Three of the finishes that held asked for one each, and three tasks were ready: each got one.
    const got = [ra, rc, rf].flatMap((r) =>
      r.status === "fulfilled" && "batch" in r.value ? r.value.batch.claimed : [],
    );
    expect(got.map((x) => x.task.taskId).sort()).toEqual(["g", "h", "i"]);
    for (const r of [ra, rc, rf])
      if (r.status === "fulfilled" && "batch" in r.value) expect(r.value.batch.claimed.length).toBe(1);
    const lines = (await store.readEvents(room, after)).map((x) => `${x.kind} ${x.taskId}`);
    expect(lines.sort()).toEqual(
      [
        "task.succeeded a",
        "task.failed c",
        "task.succeeded d",
        "task.succeeded f",
        "task.running g",
        "task.running h",
        "task.running i",
      ].sort(),
    );
    // The refused ones changed nothing.
    expect(await store.getTask(run.runId, "b")).toMatchObject({
      status: "running",
      version: b.token.version,
    });
    expect(await store.getTask(run.runId, "e")).toMatchObject({
      status: "running",
      version: e.token.version,
    });
  });

  it(`${RACERS / 2} nodes of 4 slots each, every slot handing itself on at once: each of 80 tasks runs exactly once`, async () => {
    const stores = await Promise.all(Array.from({ length: RACERS / 2 }, () => ctx.open()));
    await raceToTheEnd(80, async (room) =>
      stores.flatMap((s, i) => {
        const o = offer(session(`n${i}`), [room]);
        return Array.from({ length: 4 }, () => ({ s, o }));
      }),
    );
  });
}
