/**
 * Store contract: nodes. Heartbeats upsert by node_id (a new boot id replaces the old session), one
 * or many in a call (a node named twice in a batch is written as its last beat); ages and running
 * counts are read on the store's clock, and removal is fenced by boot id.
 */
import { expect, it } from "vitest";
import { ConflictError, NotFoundError } from "../../../src/ports/errors.js";
import type { NodeHeartbeat, NodeRecord, Session, Store } from "../../../src/ports/store.js";
import { becomeLeader, dag, offer, ok, publishRunning, session, task } from "../../support/store-fixtures.js";
import type { ContractContext } from "../context.js";

export function nodesSection(ctx: ContractContext): void {
  const beat = (s: Session, extra: Partial<NodeHeartbeat> = {}): NodeHeartbeat => ({
    session: s,
    labels: ["linux", "storage"],
    capacity: 4,
    actions: ["echo", "upload"],
    roomIds: ["!a:example.org"],
    ...extra,
  });

  const find = async (store: Store, nodeId: string): Promise<NodeRecord[]> =>
    (await store.listNodes()).filter((n) => n.session.nodeId === nodeId);

  it("a heartbeat registers what each action accepts, for the leader's argument checks at publish", async () => {
    const store = await ctx.store();
    const s = session(ctx.uid("node"));
    const spec = {
      name: "find",
      argv: ["find", "--", "{dir}"],
      args: { dir: { pattern: "[a-z/]+", allowLeadingDash: true } },
    };
    await store.heartbeat(beat(s, { actions: ["find"], actionSpecs: { find: spec } }));
    expect((await find(store, s.nodeId))[0]?.actionSpecs).toEqual({ find: spec });
    // An older node that registers no specs reads back as none, not as an error.
    await store.heartbeat(beat(s, { actions: ["find"] }));
    expect((await find(store, s.nodeId))[0]?.actionSpecs).toEqual({});
  });

  it("a heartbeat inserts the node, the next one updates it; age is measured on the store's clock", async () => {
    const store = await ctx.store();
    const s = session(ctx.uid("node"));
    const started = ctx.clock.now();
    await store.heartbeat(beat(s));
    expect(await find(store, s.nodeId)).toEqual([
      {
        session: s,
        labels: ["linux", "storage"],
        capacity: 4,
        actions: ["echo", "upload"],
        roomIds: ["!a:example.org"],
        heartbeatAt: started,
        heartbeatAgeMs: 0,
        runningTasks: 0,
        startedAt: started,
        actionSpecs: {},
        undecryptable: 0,
        undecryptableReason: null,
        deviceSigned: null,
        release: null,
        protocol: null,
      },
    ]);
    // A node says which release and fleet protocol it runs (docs/architecture.md §11).
    await store.heartbeat(beat(s, { release: "0.2.0", protocol: 2 }));
    expect((await find(store, s.nodeId))[0]).toMatchObject({ release: "0.2.0", protocol: 2 });
    ctx.clock.advance(1500);
    expect((await find(store, s.nodeId))[0]?.heartbeatAgeMs).toBe(1500);
    // The count of undecryptable events a node reports comes back as sent.
    await store.heartbeat(beat(s, { undecryptable: 3 }));
    expect((await find(store, s.nodeId))[0]?.undecryptable).toBe(3);
    // And the last one's reason and whether its device is cross-signed (docs/architecture.md §12),
    // each as sent, and back to unknown when a heartbeat does not say.
    const reason = "withheld: the sender encrypts only to verified devices (withheld_code=m.unverified)";
    for (const deviceSigned of [false, true]) {
      await store.heartbeat(beat(s, { undecryptable: 3, undecryptableReason: reason, deviceSigned }));
      expect((await find(store, s.nodeId))[0]).toMatchObject({
        undecryptable: 3,
        undecryptableReason: reason,
        deviceSigned,
      });
    }
    await store.heartbeat(beat(s));
    expect((await find(store, s.nodeId))[0]).toMatchObject({ undecryptableReason: null, deviceSigned: null });
    await store.heartbeat(beat(s, { labels: ["linux"], capacity: 2 }));
    const [n] = await find(store, s.nodeId);
    expect(n).toMatchObject({
      labels: ["linux"],
      capacity: 2,
      heartbeatAt: started + 1500,
      heartbeatAgeMs: 0,
    });
    expect(n?.startedAt).toBe(started);
  });

  it("heartbeats writes many nodes in one call, each as its own heartbeat would; a node named twice is its last beat", async () => {
    const store = await ctx.store();
    const kept = session(ctx.uid("kept"), "boot1");
    const rebooted = ctx.uid("rebooted");
    const fresh = session(ctx.uid("fresh"));
    const twice = ctx.uid("twice");
    await store.heartbeat(beat(kept));
    await store.heartbeat(beat(session(rebooted, "boot1")));
    const started = ctx.clock.now();
    ctx.clock.advance(1000);
    const spec = { name: "find", argv: ["find", "--", "{dir}"], args: { dir: { pattern: "[a-z/]+" } } };
    await store.heartbeats([
      beat(session(twice, "boot1"), { labels: ["first"] }),
      beat(kept, { labels: ["linux"], capacity: 2 }),
      beat(session(rebooted, "boot2")),
      beat(fresh, {
        actions: ["find"],
        actionSpecs: { find: spec },
        undecryptable: 2,
        undecryptableReason: "withheld",
        deviceSigned: true,
        release: "0.7.0",
        protocol: 3,
      }),
      beat(session(twice, "boot2"), { labels: ["second"], capacity: 7 }),
    ]);
    const now = ctx.clock.now();
    expect((await find(store, kept.nodeId))[0]).toMatchObject({
      session: kept,
      labels: ["linux"],
      capacity: 2,
      heartbeatAt: now,
      startedAt: started,
    });
    const again = await find(store, rebooted);
    expect(again).toHaveLength(1);
    expect(again[0]).toMatchObject({ session: { nodeId: rebooted, bootId: "boot2" }, startedAt: now });
    expect(await find(store, fresh.nodeId)).toEqual([
      {
        session: fresh,
        labels: ["linux", "storage"],
        capacity: 4,
        actions: ["find"],
        roomIds: ["!a:example.org"],
        heartbeatAt: now,
        heartbeatAgeMs: 0,
        runningTasks: 0,
        startedAt: now,
        actionSpecs: { find: spec },
        undecryptable: 2,
        undecryptableReason: "withheld",
        deviceSigned: true,
        release: "0.7.0",
        protocol: 3,
      },
    ]);
    const last = await find(store, twice);
    expect(last).toHaveLength(1);
    expect(last[0]).toMatchObject({
      session: { nodeId: twice, bootId: "boot2" },
      labels: ["second"],
      capacity: 7,
      startedAt: now,
    });
    // No beats: nothing written, nothing refused.
    await store.heartbeats([]);
    expect(await find(store, kept.nodeId)).toHaveLength(1);
  });

  it("heartbeats with one bad capacity refuses the whole batch and writes nothing", async () => {
    const store = await ctx.store();
    const good = session(ctx.uid("good"));
    const bad = session(ctx.uid("bad"));
    await expect(store.heartbeats([beat(good), beat(bad, { capacity: -1 })])).rejects.toThrow(RangeError);
    expect(await find(store, good.nodeId)).toEqual([]);
    expect(await find(store, bad.nodeId)).toEqual([]);
  });

  it("lists nodes ordered by node id", async () => {
    const store = await ctx.store();
    const prefix = ctx.uid("order");
    for (const name of ["c", "a", "b"]) await store.heartbeat(beat(session(`${prefix}-${name}`)));
    const ids = (await store.listNodes()).map((n) => n.session.nodeId).filter((id) => id.startsWith(prefix));
    expect(ids).toEqual([`${prefix}-a`, `${prefix}-b`, `${prefix}-c`]);
  });

  it("a new boot id replaces the old session's row (one row per node_id, started again)", async () => {
    const store = await ctx.store();
    const nodeId = ctx.uid("node");
    await store.heartbeat(beat(session(nodeId, "boot1")));
    ctx.clock.advance(1000);
    await store.heartbeat(beat(session(nodeId, "boot2")));
    const rows = await find(store, nodeId);
    expect(rows).toHaveLength(1);
    expect(rows[0]?.session).toEqual({ nodeId, bootId: "boot2" });
    expect(rows[0]?.startedAt).toBe(ctx.clock.now());
  });

  it("counts the running and canceling tasks held by the node's current session only", async () => {
    const store = await ctx.store();
    const room = ctx.uid("!nodes");
    const fence = await becomeLeader(store, room);
    const run = await publishRunning(
      store,
      fence,
      dag(ctx.uid("d"), [task("a"), task("b"), task("c"), task("d")]),
    );
    const nodeId = ctx.uid("node");
    const old = session(nodeId, "old");
    const now = session(nodeId, "new");
    const other = session(ctx.uid("other"));
    const byOld = await store.claimTask(offer(old, [room]));
    const first = await store.claimTask(offer(now, [room]));
    const second = await store.claimTask(offer(now, [room]));
    await store.claimTask(offer(other, [room]));
    await store.heartbeat(beat(now));
    await store.heartbeat(beat(other));
    expect(byOld).not.toBeNull();
    expect((await find(store, nodeId))[0]?.runningTasks).toBe(2);
    expect((await find(store, other.nodeId))[0]?.runningTasks).toBe(1);
    await store.cancelRun({ fence }, room, run.dagId, "@bob:example.org");
    // canceling still occupies the executor
    expect((await find(store, nodeId))[0]?.runningTasks).toBe(2);
    await store.finishTask(first!.token, { ...ok, outcome: "canceled" });
    await store.finishTask(second!.token, ok);
    expect((await find(store, nodeId))[0]?.runningTasks).toBe(0);
  });

  it("removeNode is fenced by boot id: an old session cannot remove the new one; removing twice is not found", async () => {
    const store = await ctx.store();
    const nodeId = ctx.uid("node");
    await store.heartbeat(beat(session(nodeId, "boot1")));
    await store.heartbeat(beat(session(nodeId, "boot2")));
    const stale = await store.removeNode(session(nodeId, "boot1")).catch((e: unknown) => e);
    expect(stale).toBeInstanceOf(ConflictError);
    expect((stale as ConflictError).found).toEqual({ bootId: "boot2" });
    expect(await find(store, nodeId)).toHaveLength(1);
    await store.removeNode(session(nodeId, "boot2"));
    expect(await find(store, nodeId)).toEqual([]);
    await expect(store.removeNode(session(nodeId, "boot2"))).rejects.toBeInstanceOf(NotFoundError);
  });

  it("a heartbeat with a bad capacity is refused and writes nothing", async () => {
    const store = await ctx.store();
    const s = session(ctx.uid("node"));
    await expect(store.heartbeat(beat(s, { capacity: -1 }))).rejects.toThrow(RangeError);
    await expect(store.heartbeat(beat(s, { capacity: 1.5 }))).rejects.toThrow(RangeError);
    expect(await find(store, s.nodeId)).toEqual([]);
  });
}
