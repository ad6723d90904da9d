/**
 * Store contract: the operations that let many nodes share one store. A failed acquire
 * answers holder and expiry; syncLeases acquires and renews a node's rooms in one call with the
 * same guarantees as acquireLease/renewLease (one winner among racers, fenced renewals, the event
 * log); claimTasks takes a batch up to the free slots that fit, each task exactly once among racing
 * connections, within the caps the scheduler admitted, and says what is left; claimDemand reports
 * the room's ready work and the live nodes that could take it, queuedShapes the queue's groups as an
 * edge's claim looks at them; wakeNodes reaches the named node.
 */
import { expect, it } from "vitest";
import { ConflictError } from "../../../src/ports/errors.js";
import type { LeaderFence, Store } from "../../../src/ports/store.js";
import {
  becomeLeader,
  cmd,
  dag,
  failed,
  LEASE_TTL_MS,
  offer,
  publishRunning,
  race,
  session,
  task,
} from "../../support/store-fixtures.js";
import type { ContractContext } from "../context.js";

const RACERS = 16;

export function scaleSection(ctx: ContractContext): void {
  const setup = async (): Promise<{ store: Store; room: string; fence: LeaderFence }> => {
    const store = await ctx.store();
    const room = ctx.uid("!scale");
    return { store, room, fence: await becomeLeader(store, room) };
  };

  it("a failed acquire answers the holder, term, expiry and the store's clock", async () => {
    const store = await ctx.store();
    const room = ctx.uid("!lease");
    const holder = session("n1", "b1");
    const got = await store.acquireLease(room, holder, LEASE_TTL_MS);
    ctx.clock.advance(1234);
    const e = await store.acquireLease(room, session("n2"), LEASE_TTL_MS).then(
      () => null,
      (err: unknown) => err,
    );
    expect(e).toBeInstanceOf(ConflictError);
    expect((e as ConflictError).found).toEqual({
      holder: "n1/b1",
      term: 1,
      expiresAt: got.expiresAt,
      now: ctx.clock.now(),
    });
  });

  it("syncLeases acquires free rooms, renews held ones, names the holder of the others, in the order asked", async () => {
    const store = await ctx.store();
    const [free, mine, theirs, gone] = ["free", "mine", "theirs", "gone"].map((r) => ctx.uid(`!sync-${r}`));
    const me = session("me");
    const other = session("other", "ob");
    const held = await store.acquireLease(mine!, me, LEASE_TTL_MS);
    const theirLease = await store.acquireLease(theirs!, other, LEASE_TTL_MS);
    const lostLease = await store.acquireLease(gone!, me, LEASE_TTL_MS);
    const before = await store.readEvents(free!, 0);
    ctx.clock.advance(500);
    const now = ctx.clock.now();
    const answers = await store.syncLeases(me, LEASE_TTL_MS, [
      { roomId: theirs!, term: null },
      { roomId: free!, term: null },
      { roomId: mine!, term: held.term },
      // A renewal under a term this session does not hold is lost and changes nothing.
      { roomId: gone!, term: lostLease.term + 1 },
    ]);
    expect(answers).toEqual([
      { roomId: theirs, outcome: "held", holder: other, term: 1, expiresAt: theirLease.expiresAt, now },
      { roomId: free, outcome: "acquired", holder: me, term: 1, expiresAt: now + LEASE_TTL_MS, now },
      { roomId: mine, outcome: "renewed", holder: me, term: held.term, expiresAt: now + LEASE_TTL_MS, now },
      {
        roomId: gone,
        outcome: "lost",
        holder: me,
        term: lostLease.term,
        expiresAt: lostLease.expiresAt,
        now,
      },
    ]);
    expect((await store.getLease(mine!))?.expiresAt).toBe(now + LEASE_TTL_MS);
    expect((await store.getLease(gone!))?.expiresAt).toBe(lostLease.expiresAt);
    expect((await store.getLease(theirs!))?.holder).toEqual(other);
    // The acquire is logged like acquireLease's; the renewal is not logged.
    const logged = (await store.readEvents(free!, 0)).slice(before.length);
    expect(logged.map((e) => [e.kind, e.term, e.actor])).toEqual([["lease.acquired", 1, `me/${me.bootId}`]]);
    expect((await store.readEvents(mine!, 0)).map((e) => e.kind)).toEqual(["lease.acquired"]);
  });

  it("syncLeases takes an expired lease with term + 1, and a renewal past expiry is lost", async () => {
    const store = await ctx.store();
    const room = ctx.uid("!sync-exp");
    const old = session("old");
    const first = await store.acquireLease(room, old, LEASE_TTL_MS);
    ctx.clock.advance(LEASE_TTL_MS);
    const [late] = await store.syncLeases(old, LEASE_TTL_MS, [{ roomId: room, term: first.term }]);
    expect(late?.outcome).toBe("lost");
    const [taken] = await store.syncLeases(session("new", "nb"), LEASE_TTL_MS, [
      { roomId: room, term: null },
    ]);
    expect(taken).toMatchObject({ outcome: "acquired", term: 2, holder: { nodeId: "new", bootId: "nb" } });
  });

  it(`${RACERS} connections syncing the same three rooms: one winner per room, the rest told who won`, async () => {
    const rooms = [1, 2, 3].map((i) => ctx.uid(`!sync-race${i}`));
    const stores = await Promise.all(Array.from({ length: RACERS }, () => ctx.open()));
    const { values, errors } = await race(
      stores.map(
        (s, i) => () =>
          s.syncLeases(
            session(`racer${i}`, `b${i}`),
            LEASE_TTL_MS,
            // Each asks in its own order; the store's answer keeps it.
            (i % 2 === 0 ? rooms : [...rooms].reverse()).map((roomId) => ({ roomId, term: null })),
          ),
      ),
    );
    expect(errors).toEqual([]);
    for (const room of rooms) {
      const answers = values.map((v) => v.find((a) => a.roomId === room)!);
      const winners = answers.filter((a) => a.outcome === "acquired");
      expect(winners).toHaveLength(1);
      const lease = await stores[0]!.getLease(room);
      expect(lease?.holder).toEqual(winners[0]!.holder);
      expect(lease?.term).toBe(1);
      for (const a of answers.filter((x) => x.outcome !== "acquired")) {
        expect(a.outcome).toBe("held");
        // Read from the statement's snapshot: the winner, or nobody yet when it ran first.
        if (a.holder !== null) expect(a.holder).toEqual(winners[0]!.holder);
      }
      const acquired = (await stores[0]!.readEvents(room, 0)).filter((e) => e.kind === "lease.acquired");
      expect(acquired).toHaveLength(1);
    }
  });

  it("claimTasks takes up to max in claim order and says whether fitting tasks were left", async () => {
    const { store, room, fence } = await setup();
    await publishRunning(
      store,
      fence,
      dag(ctx.uid("d"), [
        task("a"),
        task("b", { priority: 5 }),
        task("c"),
        task("gpu", { on: { labels: ["gpu"], node: null } }),
      ]),
    );
    const w = session("w");
    const first = await store.claimTasks(offer(w, [room]), 2);
    expect(first.claimed.map((c) => c.task.taskId)).toEqual(["b", "a"]);
    expect(first.claimed.every((c) => c.task.status === "running" && c.token.session === w)).toBe(true);
    expect(first.more).toBe(true);
    expect(first.nextReadyInMs).toBeNull();
    // Only "c" fits this node: the gpu task left behind is not "more" for it.
    const second = await store.claimTasks(offer(w, [room]), 5);
    expect(second.claimed.map((c) => c.task.taskId)).toEqual(["c"]);
    expect(second.more).toBe(false);
    const empty = await store.claimTasks(offer(w, [room]), 5);
    expect(empty).toEqual({ claimed: [], more: false, nextReadyInMs: null });
    // Each claim is one task.running line with its fencing version.
    const running = (await store.readEvents(room, 0)).filter((e) => e.kind === "task.running");
    expect(running.map((e) => e.taskId).sort()).toEqual(["a", "b", "c"]);
    await expect(store.claimTasks(offer(w, [room]), 0)).rejects.toBeInstanceOf(RangeError);
  });

  it("claimTasks reports when a retry waiting on its backoff becomes ready, and claims it then", async () => {
    const { store, room, fence } = await setup();
    const run = await publishRunning(
      store,
      fence,
      dag(ctx.uid("d"), [task("flaky", { retries: 1, retryBackoffMs: 4000 })]),
    );
    const w = session("w");
    const [c] = (await store.claimTasks(offer(w, [room]), 1)).claimed;
    expect((await store.finishTask(c!.token, failed)).status).toBe("queued");
    ctx.clock.advance(1000);
    const waiting = await store.claimTasks(offer(w, [room]), 4);
    expect(waiting).toEqual({ claimed: [], more: false, nextReadyInMs: 3000 });
    const demand = await store.claimDemand(room, 60_000);
    expect(demand).toEqual({ ready: 0, nextReadyInMs: 3000, nodes: [] });
    ctx.clock.advance(3000);
    const later = await store.claimTasks(offer(w, [room]), 4);
    expect(later.claimed.map((x) => [x.task.taskId, x.task.attempt])).toEqual([["flaky", 2]]);
    expect((await store.getTask(run.runId, "flaky"))?.status).toBe("running");
  });

  it(`${RACERS} connections batch-claiming 40 tasks under a room cap of 12: each task once, never over the cap`, async () => {
    const { store, room, fence } = await setup();
    await store.setRoomCap(room, 12, cmd(fence));
    const run = await publishRunning(
      store,
      fence,
      dag(
        ctx.uid("d"),
        Array.from({ length: 40 }, (_, i) => task(`t${String(i).padStart(2, "0")}`)),
      ),
    );
    const stores = await Promise.all(Array.from({ length: RACERS }, () => ctx.open()));
    const seen = new Map<string, string>();
    let maxActive = 0;
    for (let round = 0; round < 20 && seen.size < 40; round += 1) {
      const { values, errors } = await race(
        stores.map((s, i) => () => s.claimTasks(offer(session(`w${i}`, `b${i}`), [room]), 3)),
      );
      expect(errors).toEqual([]);
      for (const v of values) {
        expect(v.claimed.length).toBeLessThanOrEqual(3);
        for (const c of v.claimed) {
          expect(seen.has(c.task.taskId)).toBe(false);
          seen.set(c.task.taskId, c.token.session.nodeId);
        }
      }
      const tasks = await store.listTasks(run.runId);
      const active = tasks.filter((t) => ["queued", "running", "canceling"].includes(t.status)).length;
      maxActive = Math.max(maxActive, active);
      // Finish what runs, then let the leader admit the next ones.
      await Promise.all(
        values
          .flatMap((v) => v.claimed)
          .map((c) =>
            store.finishTask(c.token, { ...failed, outcome: "succeeded", exitCode: 0, error: null }),
          ),
      );
      await store.scheduleStep(fence);
    }
    expect(seen.size).toBe(40);
    expect(maxActive).toBeLessThanOrEqual(12);
    const running = (await store.readEvents(room, 0)).filter((e) => e.kind === "task.running");
    expect(running).toHaveLength(40);
  });

  it("batch claims keep one active task per concurrency_key and a run's max_parallel", async () => {
    const { store, room, fence } = await setup();
    const keyed = await publishRunning(
      store,
      fence,
      dag(ctx.uid("k"), [task("k1", { concurrencyKey: "s3" }), task("k2", { concurrencyKey: "s3" })]),
    );
    const capped = await publishRunning(
      store,
      fence,
      dag(ctx.uid("p"), [task("p1"), task("p2"), task("p3")], { maxParallel: 2 }),
    );
    const stores = await Promise.all(Array.from({ length: 4 }, () => ctx.open()));
    const { values } = await race(
      stores.map((s, i) => () => s.claimTasks(offer(session(`w${i}`), [room]), 8)),
    );
    const taken = values.flatMap((v) => v.claimed.map((c) => c.task.taskId)).sort();
    expect(taken).toEqual(["k1", "p1", "p2"]);
    expect((await store.listTasks(keyed.runId)).find((t) => t.taskId === "k2")?.status).toBe("blocked");
    expect((await store.listTasks(capped.runId)).find((t) => t.taskId === "p3")?.status).toBe("blocked");
  });

  it("claimDemand: the room's ready tasks and each live node's free slots and fitting tasks", async () => {
    const { store, room, fence } = await setup();
    const otherRoom = ctx.uid("!scale-other");
    const beat = (nodeId: string, labels: string[], capacity: number, roomIds: string[]) =>
      store.heartbeat({
        session: session(nodeId, `${nodeId}-boot`),
        labels,
        capacity,
        actions: ["echo"],
        roomIds,
      });
    const a = ctx.uid("a");
    const gpu = ctx.uid("gpu");
    const elsewhere = ctx.uid("else");
    const stale = ctx.uid("stale");
    await beat(stale, ["gpu"], 4, [room]);
    // The leader outlives the jump that makes the first heartbeat stale.
    await store.renewLease(fence, 10 * 60_000);
    ctx.clock.advance(20_000);
    await beat(a, [], 2, [room]);
    await beat(gpu, ["gpu"], 3, [room, otherRoom]);
    await beat(elsewhere, ["gpu"], 4, [otherRoom]);
    expect(await store.claimDemand(room, 10_000)).toEqual({ ready: 0, nextReadyInMs: null, nodes: [] });
    await publishRunning(
      store,
      fence,
      dag(ctx.uid("d"), [
        task("x"),
        task("y"),
        task("g", { priority: 10, on: { labels: ["gpu"], node: null } }),
      ]),
    );
    // The gpu node already runs one task (of the other room's leader, here claimed directly).
    const [running] = (
      await store.claimTasks(offer(session(gpu, `${gpu}-boot`), [room], { labels: ["gpu"] }), 1)
    ).claimed;
    expect(running?.task.taskId).toBe("g");
    const demand = await store.claimDemand(room, 10_000);
    expect(demand.ready).toBe(2);
    expect(demand.nextReadyInMs).toBeNull();
    const byId = new Map(demand.nodes.map((n) => [n.nodeId, n]));
    expect([...byId.keys()].sort()).toEqual([a, gpu].sort());
    expect(byId.get(a)).toEqual({ nodeId: a, free: 2, fits: 2 });
    expect(byId.get(gpu)).toEqual({ nodeId: gpu, free: 2, fits: 2 });
  });

  it("claimDemand: a retry waiting out its backoff is not ready, and says when it will be", async () => {
    const { store, room, fence } = await setup();
    const w = session(ctx.uid("w"), "wb");
    await store.heartbeat({ session: w, labels: [], capacity: 2, actions: ["echo"], roomIds: [room] });
    await publishRunning(
      store,
      fence,
      dag(ctx.uid("d"), [
        task("a", { retries: 1, retryBackoffMs: 5000 }),
        task("b", { retries: 1, retryBackoffMs: 9000 }),
      ]),
    );
    for (let i = 0; i < 2; i++) {
      const c = (await store.claimTask(offer(w, [room])))!;
      expect(await store.finishTask(c.token, failed)).toEqual({ status: "queued" });
    }
    // Both wait; the sooner one is named, and no node is offered work.
    expect(await store.claimDemand(room, 60_000)).toEqual({ ready: 0, nextReadyInMs: 5000, nodes: [] });
    ctx.clock.advance(5000);
    const demand = await store.claimDemand(room, 60_000);
    expect(demand.ready).toBe(1);
    expect(demand.nextReadyInMs).toBe(4000);
    expect(demand.nodes).toEqual([{ nodeId: w.nodeId, free: 2, fits: 1 }]);
  });

  it("queuedShapes: the rooms' queued tasks grouped by what a node needs, ready or when they will be", async () => {
    const { store, room, fence } = await setup();
    const w = session(ctx.uid("w"), "wb");
    expect(await store.queuedShapes([room])).toEqual([]);
    await publishRunning(
      store,
      fence,
      dag(ctx.uid("d"), [
        task("a", { retries: 1, retryBackoffMs: 5000 }),
        task("b"),
        task("c"),
        task("g", { action: "gpu-run", on: { labels: ["gpu", "big"], node: w.nodeId } }),
      ]),
    );
    // The first claim takes "a" (first in); its failure sends it back to wait out its backoff.
    const c = (await store.claimTask(offer(w, [room])))!;
    expect(c.task.taskId).toBe("a");
    expect(await store.finishTask(c.token, failed)).toEqual({ status: "queued" });
    const shapes = await store.queuedShapes([room, ctx.uid("!empty")]);
    const byAction = new Map(shapes.map((s) => [s.action, s]));
    expect(shapes).toHaveLength(2);
    expect(byAction.get("echo")).toEqual({
      roomId: room,
      action: "echo",
      pin: null,
      labels: [],
      ready: 2,
      nextReadyInMs: 5000,
    });
    const gpu = byAction.get("gpu-run")!;
    expect({ ...gpu, labels: [...gpu.labels].sort() }).toEqual({
      roomId: room,
      action: "gpu-run",
      pin: w.nodeId,
      labels: ["big", "gpu"],
      ready: 1,
      nextReadyInMs: null,
    });
    // Another room's queue is not read.
    expect(await store.queuedShapes([ctx.uid("!other")])).toEqual([]);
  });

  it("wakeNodes reaches a listener on another connection, for the named node", async () => {
    const { store, room } = await setup();
    const listener = await ctx.open();
    const heard: Array<readonly string[] | undefined> = [];
    const off = listener.onChange((topic, roomId, targets) => {
      if (topic === "wake" && (roomId === null || roomId === room)) heard.push(targets);
    });
    try {
      for (let i = 0; i < 100 && heard.length === 0; i += 1) {
        // A write gives a polling feed something to see; a NOTIFY feed hears the wake itself.
        await store.wakeNodes(room, ["n1", "n2"]);
        await store.heartbeat({
          session: session("poke"),
          labels: [],
          capacity: 1,
          actions: [],
          roomIds: [],
        });
        await new Promise((r) => setTimeout(r, 50));
      }
      expect(heard.length).toBeGreaterThan(0);
      // Named where the feed can carry names, else everyone: never someone else only.
      for (const t of heard) if (t !== undefined) expect(t).toEqual(["n1", "n2"]);
    } finally {
      off();
    }
  });
}
