/**
 * Store contract: retention. pruneBatch deletes, for the fence's room, finished runs older than the
 * retention with their tasks and events, replied inbox rows whose receipt and origin time are both
 * older, no-longer-pending replies and the card messages of runs already pruned, the room's own old
 * events, and nodes silent past their limit; it keeps everything still in play, deletes at most one
 * batch per call, and is fenced like every leader write. A refused command's content can be cut
 * when it is marked handled.
 */
import { expect, it } from "vitest";
import { ConflictError } from "../../../src/ports/errors.js";
import type { ParsedDag } from "../../../src/domain/model.js";
import type {
  InboxEventInput,
  LeaderFence,
  OutboxMessageInput,
  PruneLimits,
  PruneResult,
  Session,
  Store,
} from "../../../src/ports/store.js";
import { noneDeleted } from "../../../src/ports/store.js";
import { becomeLeader, dag, offer, ok, publishRunning, session, task } from "../../support/store-fixtures.js";
import type { ContractContext } from "../context.js";

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const LIMITS: PruneLimits = {
  olderThanMs: DAY,
  nodesOlderThanMs: DAY,
  keysOlderThanMs: DAY,
  runs: 50,
  rows: 500,
};

export function retentionSection(ctx: ContractContext): void {
  const msg = (room: string, txnId: string): OutboxMessageInput => ({
    txnId,
    roomId: room,
    eventType: "m.room.message",
    content: { msgtype: "m.notice", body: `message ${txnId}` },
  });

  const inboxEvent = (room: string, extra: Partial<InboxEventInput> = {}): InboxEventInput => ({
    eventId: ctx.uid("$ev"),
    roomId: room,
    sender: "@alice:example.org",
    originServerTs: ctx.clock.now(),
    content: { msgtype: "m.text", body: "!dag status" },
    seenBy: "n1",
    ...extra,
  });

  /** A run of one task, claimed by `worker` and finished, so the run ends succeeded. */
  const finishedRun = async (store: Store, fence: LeaderFence, worker: Session): Promise<string> => {
    const run = await publishRunning(store, fence, dag(ctx.uid("done"), [task("only")]));
    const claimed = await store.claimTask(offer(worker, [fence.roomId]));
    if (claimed === null) throw new Error("nothing to claim");
    await store.finishTask(claimed.token, ok);
    await store.deriveRunOutcomes(fence);
    expect((await store.getRunById(run.runId))?.status).toBe("succeeded");
    return run.runId;
  };

  /** A reply row in the room, enqueued and marked sent. */
  const sentReply = async (store: Store, fence: LeaderFence, txnId: string): Promise<void> => {
    await store.enqueueOutbox(fence, [msg(fence.roomId, txnId)]);
    await store.markOutboxSent(fence, txnId, `$sent-${txnId}`);
  };

  /** An inbox row carried to `replied`. */
  const repliedCommand = async (store: Store, fence: LeaderFence, e: InboxEventInput): Promise<void> => {
    await store.insertInboxEvent(e);
    await store.markInboxHandled(fence, e.eventId, { ok: true });
    await store.markInboxReplied(fence, e.eventId, []);
  };

  /** Prunes until a call deletes nothing; the sum of every batch. */
  const pruneAll = async (store: Store, fence: LeaderFence, limits = LIMITS): Promise<PruneResult> => {
    const total: PruneResult = noneDeleted();
    for (let i = 0; i < 100; i++) {
      const r = await store.pruneBatch(fence, limits);
      for (const k of Object.keys(total) as Array<keyof PruneResult>) total[k] += r[k];
      if (r.runs + r.tasks + r.events + r.inbox + r.outbox + r.nodes === 0) return total;
    }
    throw new Error("pruning never finished");
  };

  it("deletes finished runs past the retention with their tasks and events; keeps live and recent runs", async () => {
    const store = await ctx.store();
    const room = ctx.uid("!retention");
    const worker = session(ctx.uid("w"));
    let fence = await becomeLeader(store, room);
    const oldDone = await finishedRun(store, fence, worker);
    const oldLive = (
      await publishRunning(
        store,
        fence,
        dag(ctx.uid("live"), [task("a", { action: "upload" }), task("b", { action: "upload" })]),
      )
    ).runId;
    ctx.clock.advance(DAY + HOUR);
    fence = await becomeLeader(store, room);
    const recentDone = await finishedRun(store, fence, worker);

    const pruned = await pruneAll(store, fence);
    expect(pruned).toMatchObject({ runs: 1, tasks: 1 });
    expect(await store.getRunById(oldDone)).toBeNull();
    expect(await store.listTasks(oldDone)).toEqual([]);
    expect((await store.getRunById(oldLive))?.status).toBe("running");
    expect(await store.listTasks(oldLive)).toHaveLength(2);
    expect((await store.getRunById(recentDone))?.status).toBe("succeeded");

    const events = await store.readEvents(room, 0, 100_000);
    expect(events.filter((e) => e.runId === oldDone)).toEqual([]);
    // A run still kept keeps its whole history, however old.
    expect(events.some((e) => e.runId === oldLive && e.kind === "run.created")).toBe(true);
    expect(events.some((e) => e.runId === recentDone)).toBe(true);
    // The room's own events older than the retention (the old lease and inbox lines) are gone.
    const cutoff = ctx.clock.now() - DAY;
    expect(events.filter((e) => e.runId === null && e.at < cutoff)).toEqual([]);
  });

  it("keeps the room's policy changes however old: who changed what, and who agreed", async () => {
    const store = await ctx.store();
    const room = ctx.uid("!retention");
    await store.initRoomPolicy(
      room,
      { powerLevel: 50, allow: [], twoPersonRule: true, autoConfirm: [], logs: "operators" },
      "node-a",
    );
    let fence = await becomeLeader(store, room);
    await store.proposePolicyChange({ fence }, room, {
      changeId: "0a1b2c3d",
      change: { setting: "logs", value: "anyone" },
      by: "@a:x",
      ttlMs: HOUR,
    });
    await store.setRoomPolicy(
      { fence },
      room,
      { powerLevel: 50, allow: [], twoPersonRule: true, autoConfirm: [], logs: "anyone" },
      "@b:x",
      { confirms: "0a1b2c3d" },
    );
    ctx.clock.advance(DAY + HOUR);
    fence = await becomeLeader(store, room);
    await pruneAll(store, fence);
    const events = await store.readEvents(room, 0, 100_000);
    expect(events.filter((e) => e.kind.startsWith("policy.")).map((e) => e.kind)).toEqual([
      "policy.set",
      "policy.proposed",
      "policy.set",
    ]);
    // The room's other old lines (the first lease) went.
    expect(events.filter((e) => e.kind.startsWith("lease.") && e.at < ctx.clock.now() - DAY)).toEqual([]);
  });

  it("keeps a scheduled definition past the retention (its schedule still fires); its old runs go", async () => {
    const store = await ctx.store();
    const room = ctx.uid("!retention");
    const worker = session(ctx.uid("w"));
    let fence = await becomeLeader(store, room);
    const finish = async (d: ParsedDag): Promise<string> => {
      const run = await publishRunning(store, fence, d);
      const claimed = await store.claimTask(offer(worker, [room]));
      if (claimed === null) throw new Error("nothing to claim");
      await store.finishTask(claimed.token, ok);
      await store.deriveRunOutcomes(fence);
      return run.runId;
    };
    const id = ctx.uid("sched");
    const schedule = { cron: "0 2 * * *", timezone: "UTC", missed: "skip" as const };
    const definition = await finish({ ...dag(id, [task("only")]), schedule });
    const slotRun = await finish({
      ...dag(`${id}.s1`, [task("only")]),
      definition: id,
      slot: { at: 1, covers: 1, firstCovered: 1 },
    });
    ctx.clock.advance(DAY + HOUR);
    fence = await becomeLeader(store, room);
    const pruned = await pruneAll(store, fence);
    expect(pruned.runs).toBe(1);
    expect((await store.getRunById(definition))?.status).toBe("succeeded");
    expect(await store.getRunById(slotRun)).toBeNull();
  });

  it("deletes replied inbox rows only when both received and sent before the retention", async () => {
    const store = await ctx.store();
    const room = ctx.uid("!retention-inbox");
    let fence = await becomeLeader(store, room);
    const replied = inboxEvent(room);
    await repliedCommand(store, fence, replied);
    const handledOnly = inboxEvent(room);
    await store.insertInboxEvent(handledOnly);
    await store.markInboxHandled(fence, handledOnly.eventId, { ok: true });
    const unhandled = inboxEvent(room);
    await store.insertInboxEvent(unhandled);
    // Dated by its sender two days ahead: intake's window, measured from origin_server_ts, would
    // still take it again, so it must stay however long ago it arrived.
    const futureDated = inboxEvent(room, { originServerTs: ctx.clock.now() + 2 * DAY });
    await repliedCommand(store, fence, futureDated);
    ctx.clock.advance(DAY + HOUR);
    fence = await becomeLeader(store, room);
    const recent = inboxEvent(room);
    await repliedCommand(store, fence, recent);

    expect((await pruneAll(store, fence)).inbox).toBe(1);
    expect(await store.getInboxEvent(replied.eventId)).toBeNull();
    expect((await store.getInboxEvent(handledOnly.eventId))?.status).toBe("handled");
    expect((await store.getInboxEvent(unhandled.eventId))?.status).toBe("new");
    expect((await store.getInboxEvent(futureDated.eventId))?.status).toBe("replied");
    expect((await store.getInboxEvent(recent.eventId))?.status).toBe("replied");
    // Once pruned, the event's id is free again: which is why the caller keeps the retention
    // above the intake's command window.
    expect(await store.insertInboxEvent(replied)).toBe("inserted");
  });

  it("deletes sent replies and a pruned run's card messages; keeps pending rows, live cards and notices", async () => {
    const store = await ctx.store();
    const room = ctx.uid("!retention-outbox");
    const worker = session(ctx.uid("w"));
    let fence = await becomeLeader(store, room);
    const reply = `reply.${ctx.uid("$cmd")}`;
    await sentReply(store, fence, reply);
    const unsent = `reply.${ctx.uid("$cmd")}`;
    await store.enqueueOutbox(fence, [msg(room, unsent)]);
    const notice = `e2ee-notice.${room}`;
    await sentReply(store, fence, notice);
    const doneRun = await finishedRun(store, fence, worker);
    const liveRun = (
      await publishRunning(store, fence, dag(ctx.uid("live"), [task("a", { action: "upload" })]))
    ).runId;
    const cardsOf = (runId: string) => [`card.${runId}`, `card.${runId}.v1`, `final.${runId}`];
    for (const id of [...cardsOf(doneRun), ...cardsOf(liveRun)]) await sentReply(store, fence, id);
    ctx.clock.advance(DAY + HOUR);
    fence = await becomeLeader(store, room);
    const recent = `reply.${ctx.uid("$cmd")}`;
    await sentReply(store, fence, recent);

    const pruned = await pruneAll(store, fence);
    expect(pruned).toMatchObject({ runs: 1, outbox: 4 });
    for (const gone of [reply, ...cardsOf(doneRun)]) expect(await store.getOutbox(gone)).toBeNull();
    for (const kept of [unsent, notice, recent, ...cardsOf(liveRun)])
      expect((await store.getOutbox(kept))?.txnId).toBe(kept);
  });

  it("deletes at most one batch of each kind per call", async () => {
    const store = await ctx.store();
    const room = ctx.uid("!retention-batch");
    const worker = session(ctx.uid("w"));
    let fence = await becomeLeader(store, room);
    for (let i = 0; i < 5; i++) {
      await finishedRun(store, fence, worker);
      await sentReply(store, fence, `reply.${ctx.uid("$b")}`);
      await repliedCommand(store, fence, inboxEvent(room));
    }
    ctx.clock.advance(DAY + HOUR);
    fence = await becomeLeader(store, room);
    const small: PruneLimits = { ...LIMITS, runs: 2, rows: 2 };
    const first = await store.pruneBatch(fence, small);
    expect(first).toMatchObject({ runs: 2, tasks: 2, inbox: 2, outbox: 2 });
    expect(first.events).toBeLessThanOrEqual(2);
    const rest = await pruneAll(store, fence, small);
    expect(rest).toMatchObject({ runs: 3, tasks: 3, inbox: 3, outbox: 3 });
    expect(await store.listRuns(room)).toEqual([]);
  });

  it("deletes nodes silent for longer than their limit, and no others", async () => {
    const store = await ctx.store();
    const room = ctx.uid("!retention-nodes");
    const beat = (s: Session) =>
      store.heartbeat({ session: s, labels: [], capacity: 1, actions: [], roomIds: [room] });
    const silent = session(ctx.uid("silent"));
    const alive = session(ctx.uid("alive"));
    await beat(silent);
    await beat(alive);
    ctx.clock.advance(3 * HOUR);
    await beat(alive);
    const fence = await becomeLeader(store, room);
    const r = await store.pruneBatch(fence, { ...LIMITS, nodesOlderThanMs: 2 * HOUR });
    expect(r.nodes).toBeGreaterThanOrEqual(1);
    const ids = (await store.listNodes()).map((n) => n.session.nodeId);
    expect(ids).toContain(alive.nodeId);
    expect(ids).not.toContain(silent.nodeId);
  });

  it("forgets idempotency keys stored longer ago than their limit, whatever their scope, and no others", async () => {
    const store = await ctx.store();
    const room = ctx.uid("!retention-keys");
    const oldKey = ctx.uid("old");
    const youngKey = ctx.uid("young");
    const other = ctx.uid("other");
    expect((await store.rememberIdempotencyKey(`http:${other}`, oldKey, { n: 1 })).kind).toBe("new");
    ctx.clock.advance(3 * HOUR);
    expect((await store.rememberIdempotencyKey(`http:${other}`, youngKey, { n: 2 })).kind).toBe("new");
    const fence = await becomeLeader(store, room);
    const r = await store.pruneBatch(fence, { ...LIMITS, keysOlderThanMs: 2 * HOUR });
    expect(r.keys).toBeGreaterThanOrEqual(1);
    // The forgotten key is new again; the young one still answers with what it first stored.
    expect((await store.rememberIdempotencyKey(`http:${other}`, oldKey, { n: 3 })).kind).toBe("new");
    expect(await store.rememberIdempotencyKey(`http:${other}`, youngKey, { n: 4 })).toEqual({
      kind: "existing",
      result: { n: 2 },
    });
  });

  it("deletes at most one batch of idempotency keys per call", async () => {
    const store = await ctx.store();
    const room = ctx.uid("!retention-keys-batch");
    const scope = `http:${ctx.uid("batch")}`;
    for (let i = 0; i < 5; i++) await store.rememberIdempotencyKey(scope, `k${i}`, { i });
    ctx.clock.advance(2 * DAY);
    const fence = await becomeLeader(store, room);
    const first = await store.pruneBatch(fence, { ...LIMITS, rows: 2 });
    expect(first.keys).toBe(2);
  });

  it("is fenced: a deposed leader deletes nothing", async () => {
    const store = await ctx.store();
    const room = ctx.uid("!retention-fence");
    const worker = session(ctx.uid("w"));
    const old = await becomeLeader(store, room);
    const runId = await finishedRun(store, old, worker);
    ctx.clock.advance(DAY + HOUR);
    await becomeLeader(store, room, "newer");
    await expect(store.pruneBatch(old, LIMITS)).rejects.toBeInstanceOf(ConflictError);
    expect(await store.getRunById(runId)).not.toBeNull();
  });

  it("refuses limits that are not whole numbers in range, and changes nothing", async () => {
    const store = await ctx.store();
    const room = ctx.uid("!retention-bad");
    const worker = session(ctx.uid("w"));
    let fence = await becomeLeader(store, room);
    const runId = await finishedRun(store, fence, worker);
    ctx.clock.advance(DAY + HOUR);
    fence = await becomeLeader(store, room);
    await expect(store.pruneBatch(fence, { ...LIMITS, rows: 0 })).rejects.toThrow(/rows must be/);
    await expect(store.pruneBatch(fence, { ...LIMITS, olderThanMs: -1 })).rejects.toThrow(/olderThanMs/);
    await expect(store.pruneBatch(fence, { ...LIMITS, runs: 1.5 })).rejects.toThrow(/runs must be/);
    expect(await store.getRunById(runId)).not.toBeNull();
  });

  it("markInboxHandled can replace the stored content in the same write", async () => {
    const store = await ctx.store();
    const room = ctx.uid("!retention-trim");
    const fence = await becomeLeader(store, room);
    const long = inboxEvent(room, {
      content: { msgtype: "m.text", body: `!dag ${"x".repeat(10_000)}`, "m.relates_to": { x: 1 } },
    });
    await store.insertInboxEvent(long);
    const short = { msgtype: "m.text", body: "!dag xxx…", "m.relates_to": { x: 1 } };
    await store.markInboxHandled(fence, long.eventId, { refused: true }, { content: short });
    expect(await store.getInboxEvent(long.eventId)).toMatchObject({
      status: "handled",
      content: short,
      result: { refused: true },
    });
    // Without it the content stays as received.
    const kept = inboxEvent(room);
    await store.insertInboxEvent(kept);
    await store.markInboxHandled(fence, kept.eventId, { ok: true });
    expect((await store.getInboxEvent(kept.eventId))?.content).toEqual(kept.content);
  });
}
