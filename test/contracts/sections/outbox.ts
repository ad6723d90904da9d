/**
 * Store contract: the outbox. Insert-or-ignore by transaction id, pending rows of the fence's room
 * in enqueue order, coalescing of unsent rows that share a key, sent/failed marks judged by status,
 * and every operation fenced by the leader's term.
 */
import { expect, it } from "vitest";
import { ConflictError, NotFoundError } from "../../../src/ports/errors.js";
import type { LeaderFence, OutboxMessageInput, Store } from "../../../src/ports/store.js";
import { becomeLeader, LEASE_TTL_MS } from "../../support/store-fixtures.js";
import type { ContractContext } from "../context.js";

export function outboxSection(ctx: ContractContext): void {
  const setup = async (): Promise<{ store: Store; room: string; fence: LeaderFence }> => {
    const store = await ctx.store();
    const room = ctx.uid("!outbox");
    return { store, room, fence: await becomeLeader(store, room) };
  };

  const msg = (room: string, txnId: string, extra: Partial<OutboxMessageInput> = {}): OutboxMessageInput => ({
    txnId,
    roomId: room,
    eventType: "m.room.message",
    content: { msgtype: "m.notice", body: `message ${txnId}` },
    ...extra,
  });

  const pendingIds = async (store: Store, fence: LeaderFence): Promise<string[]> =>
    (await store.pendingOutbox(fence, 100)).map((m) => m.txnId);

  it("enqueue is insert-or-ignore by txnId: a retry keeps the first row and its content", async () => {
    const { store, room, fence } = await setup();
    const id = ctx.uid("reply");
    await store.enqueueOutbox(fence, [msg(room, id, { content: { body: "first" } })]);
    await store.enqueueOutbox(fence, [msg(room, id, { content: { body: "second" } })]);
    const row = await store.getOutbox(id);
    expect(row).toMatchObject({
      txnId: id,
      roomId: room,
      eventType: "m.room.message",
      content: { body: "first" },
      status: "pending",
      sentEventId: null,
      replacesTxnId: null,
      coalesceKey: null,
      attempts: 0,
      createdAt: ctx.clock.now(),
    });
    expect(await pendingIds(store, fence)).toEqual([id]);
    expect(await store.getOutbox(ctx.uid("never"))).toBeNull();
  });

  it("pending rows come in enqueue order, limited, and only the fence's room", async () => {
    const { store, room, fence } = await setup();
    const other = await becomeLeader(store, ctx.uid("!outbox-other"));
    const ids = [ctx.uid("m"), ctx.uid("m"), ctx.uid("m"), ctx.uid("m")];
    await store.enqueueOutbox(fence, [msg(room, ids[0]!)]);
    await store.enqueueOutbox(other, [msg(other.roomId, ctx.uid("elsewhere"))]);
    await store.enqueueOutbox(fence, [msg(room, ids[1]!), msg(room, ids[2]!)]);
    await store.enqueueOutbox(fence, [msg(room, ids[3]!)]);
    const pending = await store.pendingOutbox(fence, 100);
    expect(pending.map((m) => m.txnId)).toEqual(ids);
    const seqs = pending.map((m) => m.seq);
    expect([...seqs].sort((a, b) => a - b)).toEqual(seqs);
    expect(new Set(seqs).size).toBe(4);
    expect((await store.pendingOutbox(fence, 2)).map((m) => m.txnId)).toEqual(ids.slice(0, 2));
    expect(await pendingIds(store, other)).toHaveLength(1);
  });

  it("a newer unsent row with the same coalesce key supersedes the older ones, in one call or across calls", async () => {
    const { store, room, fence } = await setup();
    const card = ctx.uid("card");
    const edit = (n: number, key = card): OutboxMessageInput =>
      msg(room, `${card}.edit${n}`, {
        replacesTxnId: card,
        coalesceKey: key,
        content: { body: `edit ${n}` },
      });
    await store.enqueueOutbox(fence, [msg(room, card)]);
    await store.enqueueOutbox(fence, [edit(1)]);
    await store.markOutboxSent(fence, card, "$card");
    await store.enqueueOutbox(fence, [edit(2), edit(3)]);
    await store.enqueueOutbox(fence, [edit(4), msg(room, ctx.uid("plain")), edit(5, "other-key")]);
    const pending = await store.pendingOutbox(fence, 100);
    expect(pending.map((m) => m.txnId)).toEqual([`${card}.edit4`, expect.any(String), `${card}.edit5`]);
    expect(pending[0]).toMatchObject({ replacesTxnId: card, coalesceKey: card, content: { body: "edit 4" } });
    for (const n of [1, 2, 3]) expect((await store.getOutbox(`${card}.edit${n}`))?.status).toBe("superseded");
    // A sent row is history: coalescing never touches it.
    expect(await store.getOutbox(card)).toMatchObject({ status: "sent", sentEventId: "$card" });
    // Re-enqueueing a superseded id is ignored, not revived.
    await store.enqueueOutbox(fence, [edit(1)]);
    expect((await store.getOutbox(`${card}.edit1`))?.status).toBe("superseded");
    expect(await pendingIds(store, fence)).toHaveLength(3);
  });

  it("markSent: pending → sent once, with the event id and one attempt; again is a conflict; unknown is not found", async () => {
    const { store, room, fence } = await setup();
    const id = ctx.uid("m");
    await store.enqueueOutbox(fence, [msg(room, id)]);
    await store.markOutboxSent(fence, id, "$sent1");
    expect(await store.getOutbox(id)).toMatchObject({ status: "sent", sentEventId: "$sent1", attempts: 1 });
    expect(await pendingIds(store, fence)).toEqual([]);
    const again = await store.markOutboxSent(fence, id, "$sent2").catch((e: unknown) => e);
    expect(again).toBeInstanceOf(ConflictError);
    expect((again as ConflictError).found).toMatchObject({ status: "sent" });
    expect((await store.getOutbox(id))?.sentEventId).toBe("$sent1");
    await expect(store.markOutboxSent(fence, ctx.uid("nope"), "$x")).rejects.toBeInstanceOf(NotFoundError);
  });

  it("a row superseded while its send was in flight can still be marked sent (its event id is kept for edits)", async () => {
    const { store, room, fence } = await setup();
    const key = ctx.uid("card");
    await store.enqueueOutbox(fence, [msg(room, `${key}.1`, { coalesceKey: key })]);
    await store.enqueueOutbox(fence, [msg(room, `${key}.2`, { coalesceKey: key })]);
    expect((await store.getOutbox(`${key}.1`))?.status).toBe("superseded");
    await store.markOutboxSent(fence, `${key}.1`, "$inflight");
    expect(await store.getOutbox(`${key}.1`)).toMatchObject({ status: "sent", sentEventId: "$inflight" });
  });

  it("markFailed: pending → failed, out of the pending list; a failed row cannot be marked sent or failed again", async () => {
    const { store, room, fence } = await setup();
    const id = ctx.uid("m");
    await store.enqueueOutbox(fence, [msg(room, id)]);
    await store.markOutboxFailed(fence, id, "M_FORBIDDEN: not in room");
    expect(await store.getOutbox(id)).toMatchObject({ status: "failed", attempts: 1, sentEventId: null });
    expect(await pendingIds(store, fence)).toEqual([]);
    await expect(store.markOutboxSent(fence, id, "$late")).rejects.toBeInstanceOf(ConflictError);
    await expect(store.markOutboxFailed(fence, id, "again")).rejects.toBeInstanceOf(ConflictError);
    await expect(store.markOutboxFailed(fence, ctx.uid("nope"), "x")).rejects.toBeInstanceOf(NotFoundError);
  });

  it("is fenced: a deposed leader can neither enqueue, read pending, nor mark; the new leader sees the rows unchanged", async () => {
    const { store, room, fence } = await setup();
    const id = ctx.uid("m");
    await store.enqueueOutbox(fence, [msg(room, id)]);
    ctx.clock.advance(LEASE_TTL_MS);
    const next = await becomeLeader(store, room, "next");
    const late = ctx.uid("late");
    await expect(store.enqueueOutbox(fence, [msg(room, late)])).rejects.toBeInstanceOf(ConflictError);
    await expect(store.pendingOutbox(fence, 10)).rejects.toBeInstanceOf(ConflictError);
    await expect(store.markOutboxSent(fence, id, "$x")).rejects.toBeInstanceOf(ConflictError);
    await expect(store.markOutboxFailed(fence, id, "x")).rejects.toBeInstanceOf(ConflictError);
    expect(await store.getOutbox(late)).toBeNull();
    expect(await store.getOutbox(id)).toMatchObject({ status: "pending", attempts: 0 });
    expect(await pendingIds(store, next)).toEqual([id]);
  });

  it("a leader cannot enqueue or mark for a room its fence does not cover", async () => {
    const { store, room, fence } = await setup();
    const other = await becomeLeader(store, ctx.uid("!outbox-other"));
    const theirs = ctx.uid("theirs");
    await store.enqueueOutbox(other, [msg(other.roomId, theirs)]);
    const mine = ctx.uid("mine");
    await expect(
      store.enqueueOutbox(fence, [msg(room, mine), msg(other.roomId, ctx.uid("x"))]),
    ).rejects.toBeInstanceOf(ConflictError);
    // All or nothing: the good message of the refused batch is not there either.
    expect(await store.getOutbox(mine)).toBeNull();
    await expect(store.markOutboxSent(fence, theirs, "$x")).rejects.toBeInstanceOf(ConflictError);
    expect((await store.getOutbox(theirs))?.status).toBe("pending");
  });
}
