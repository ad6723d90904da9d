/**
 * Store contract: the inbox (processed_events). Insert-or-ignore with exactly one winner among
 * racing connections, the leader's take in (origin_server_ts, event_id) order, and the fenced
 * new → handled → replied marks (the reply enqueued in the same transaction), and the count of
 * leaders that started a row and lost their lease before finishing it (poison commands).
 */
import { expect, it } from "vitest";
import { ConflictError, NotFoundError } from "../../../src/ports/errors.js";
import type { InboxEventInput } from "../../../src/ports/store.js";
import { isQuarantined } from "../../../src/domain/inbox-handling.js";
import { becomeLeader, LEASE_TTL_MS, race, session } from "../../support/store-fixtures.js";
import type { ContractContext } from "../context.js";

const RACERS = 16;

export function inboxSection(ctx: ContractContext): void {
  const event = (roomId: string, extra: Partial<InboxEventInput> = {}): InboxEventInput => ({
    eventId: ctx.uid("$ev"),
    roomId,
    sender: "@alice:example.org",
    originServerTs: 1_700_000_000_000,
    content: { msgtype: "m.text", body: "!dag status", "m.relates_to": { rel_type: "m.thread" } },
    seenBy: "n1",
    ...extra,
  });

  it("inserts once and reports duplicates; the row keeps what was received", async () => {
    const store = await ctx.store();
    const room = ctx.uid("!inbox");
    const e = event(room);
    expect(await store.insertInboxEvent(e)).toBe("inserted");
    expect(await store.insertInboxEvent({ ...e, seenBy: "n2", content: { body: "other" } })).toBe(
      "duplicate",
    );
    expect(await store.getInboxEvent(e.eventId)).toEqual({
      ...e,
      status: "new",
      receivedAt: ctx.clock.now(),
      handledTerm: null,
      result: null,
    });
    expect(await store.getInboxEvent("$missing")).toBeNull();
  });

  it(`${RACERS} connections inserting one event: exactly one "inserted"`, async () => {
    const room = ctx.uid("!inbox-race");
    const e = event(room);
    const stores = await Promise.all(Array.from({ length: RACERS }, () => ctx.open()));
    const { values, errors } = await race(
      stores.map((s, i) => () => s.insertInboxEvent({ ...e, seenBy: `n${i}` })),
    );
    expect(errors).toEqual([]);
    expect(values.filter((v) => v === "inserted")).toHaveLength(1);
    expect(values.filter((v) => v === "duplicate")).toHaveLength(RACERS - 1);
  });

  it("the leader takes rows of its room in (origin_server_ts, event_id) order; null when none", async () => {
    const store = await ctx.store();
    const room = ctx.uid("!inbox");
    const other = ctx.uid("!other");
    const fence = await becomeLeader(store, room);
    expect(await store.nextInboxEvent(fence)).toBeNull();
    await store.insertInboxEvent(event(other, { eventId: "$0-other", originServerTs: 1 }));
    for (const [id, ts] of [
      ["$c", 20],
      ["$b", 10],
      ["$a", 20],
      ["$d", 5],
    ] as const)
      await store.insertInboxEvent(event(room, { eventId: `${id}-${room}`, originServerTs: ts }));
    const order: string[] = [];
    for (let e = await store.nextInboxEvent(fence); e !== null; e = await store.nextInboxEvent(fence)) {
      order.push(e.eventId.split("-")[0]!);
      await store.markInboxHandled(fence, e.eventId, { ok: true });
      await store.markInboxReplied(fence, e.eventId, []);
    }
    expect(order).toEqual(["$d", "$b", "$a", "$c"]);
  });

  it("new → handled records the outcome and term; a second mark is a conflict; unknown is not found", async () => {
    const store = await ctx.store();
    const room = ctx.uid("!inbox");
    const fence = await becomeLeader(store, room);
    const e = event(room);
    await store.insertInboxEvent(e);
    await store.markInboxHandled(fence, e.eventId, { reply: "help" });
    const row = await store.getInboxEvent(e.eventId);
    expect(row).toMatchObject({ status: "handled", handledTerm: fence.term, result: { reply: "help" } });
    const again = await store.markInboxHandled(fence, e.eventId, { reply: "twice" }).catch((x: unknown) => x);
    expect(again).toBeInstanceOf(ConflictError);
    expect((again as ConflictError).found).toMatchObject({ status: "handled" });
    expect((await store.getInboxEvent(e.eventId))?.result).toEqual({ reply: "help" });
    await expect(store.markInboxHandled(fence, "$nope", {})).rejects.toBeInstanceOf(NotFoundError);
    // Handled but not yet replied: the next leader still takes it, to (re)do the reply step.
    expect((await store.nextInboxEvent(fence))?.eventId).toBe(e.eventId);
  });

  it("handled → replied enqueues the replies in the same transaction; the row then leaves the queue", async () => {
    const store = await ctx.store();
    const room = ctx.uid("!inbox");
    const fence = await becomeLeader(store, room);
    const e = event(room);
    await store.insertInboxEvent(e);
    const reply = {
      txnId: `reply.${e.eventId}`,
      roomId: room,
      eventType: "m.room.message",
      content: { body: "ok" },
    };
    // Still new: replying before handling is refused and enqueues nothing.
    await expect(store.markInboxReplied(fence, e.eventId, [reply])).rejects.toBeInstanceOf(ConflictError);
    expect(await store.getOutbox(reply.txnId)).toBeNull();
    await store.markInboxHandled(fence, e.eventId, {});
    await store.markInboxReplied(fence, e.eventId, [reply]);
    expect((await store.getInboxEvent(e.eventId))?.status).toBe("replied");
    expect(await store.getOutbox(reply.txnId)).toMatchObject({
      status: "pending",
      roomId: room,
      content: { body: "ok" },
    });
    expect(await store.nextInboxEvent(fence)).toBeNull();
    await expect(store.markInboxReplied(fence, e.eventId, [])).rejects.toBeInstanceOf(ConflictError);
    await expect(store.markInboxReplied(fence, "$nope", [])).rejects.toBeInstanceOf(NotFoundError);
  });

  it("marks are fenced: a non-leader, or a leader of another room, changes nothing", async () => {
    const store = await ctx.store();
    const room = ctx.uid("!inbox");
    const otherRoom = ctx.uid("!other");
    const fence = await becomeLeader(store, room);
    const otherFence = await becomeLeader(store, otherRoom);
    const e = event(room);
    await store.insertInboxEvent(e);
    const stranger = { roomId: room, session: session("stranger"), term: fence.term };
    await expect(store.markInboxHandled(stranger, e.eventId, {})).rejects.toBeInstanceOf(ConflictError);
    await expect(store.markInboxHandled(otherFence, e.eventId, {})).rejects.toBeInstanceOf(ConflictError);
    await expect(store.nextInboxEvent(stranger)).rejects.toBeInstanceOf(ConflictError);
    expect((await store.getInboxEvent(e.eventId))?.status).toBe("new");
  });

  it("a row's start counts each leader that started it and lost its lease unfinished; the same term again does not", async () => {
    const store = await ctx.store();
    const room = ctx.uid("!inbox-poison");
    const e = event(room);
    await store.insertInboxEvent(e);
    const first = await becomeLeader(store, room, "n1");
    expect(await store.startInboxHandling(first, e.eventId)).toEqual({ losses: 0 });
    // A retry by the same leader (after a store error) is no loss.
    expect(await store.startInboxHandling(first, e.eventId)).toEqual({ losses: 0 });
    ctx.clock.advance(LEASE_TTL_MS + 1);
    const second = await becomeLeader(store, room, "n2");
    // The deposed leader can neither start it again nor finish it.
    await expect(store.startInboxHandling(first, e.eventId)).rejects.toBeInstanceOf(ConflictError);
    await expect(store.markInboxHandled(first, e.eventId, {})).rejects.toBeInstanceOf(ConflictError);
    const once = await store.startInboxHandling(second, e.eventId);
    expect(once).toEqual({ losses: 1 });
    expect(isQuarantined(once.losses)).toBe(false);
    ctx.clock.advance(LEASE_TTL_MS + 1);
    // The same node leading again is a new term: its earlier attempt counts too. Another connection
    // sees what the first one recorded: the count is in the row, not in a process.
    const other = await ctx.open();
    const third = await becomeLeader(other, room, "n2");
    const twice = await other.startInboxHandling(third, e.eventId);
    expect(twice).toEqual({ losses: 2 });
    expect(isQuarantined(twice.losses)).toBe(true);
    expect(await other.startInboxHandling(third, e.eventId)).toEqual({ losses: 2 });
    await other.markInboxHandled(third, e.eventId, { quarantined: true });
    // Handled: nothing starts it again, and a later leader takes it only for its reply.
    await expect(other.startInboxHandling(third, e.eventId)).rejects.toBeInstanceOf(ConflictError);
    await expect(other.startInboxHandling(third, "$nope")).rejects.toBeInstanceOf(NotFoundError);
    const stranger = { roomId: room, session: session("stranger"), term: third.term };
    const fresh = event(room);
    await other.insertInboxEvent(fresh);
    await expect(other.startInboxHandling(stranger, fresh.eventId)).rejects.toBeInstanceOf(ConflictError);
    expect(await other.startInboxHandling(third, fresh.eventId)).toEqual({ losses: 0 });
  });

  it("a row finished by the leader that started it is never counted", async () => {
    const store = await ctx.store();
    const room = ctx.uid("!inbox-poison");
    const e = event(room);
    const next = event(room, { originServerTs: 1_700_000_000_001 });
    await store.insertInboxEvent(e);
    await store.insertInboxEvent(next);
    const first = await becomeLeader(store, room, "n1");
    await store.startInboxHandling(first, e.eventId);
    await store.markInboxHandled(first, e.eventId, {});
    ctx.clock.advance(LEASE_TTL_MS + 1);
    const second = await becomeLeader(store, room, "n2");
    expect((await store.nextInboxEvent(second))?.status).toBe("handled");
    // A row never started before counts nothing whatever the term.
    expect(await store.startInboxHandling(second, next.eventId)).toEqual({ losses: 0 });
  });

  it("latest event of a room is the newest by origin_server_ts; null for an empty room", async () => {
    const store = await ctx.store();
    const room = ctx.uid("!inbox");
    expect(await store.latestInboxEvent(room)).toBeNull();
    await store.insertInboxEvent(event(room, { eventId: `$x-${room}`, originServerTs: 30 }));
    await store.insertInboxEvent(event(room, { eventId: `$y-${room}`, originServerTs: 50 }));
    await store.insertInboxEvent(event(room, { eventId: `$z-${room}`, originServerTs: 40 }));
    await store.insertInboxEvent(event(ctx.uid("!other"), { originServerTs: 99 }));
    expect((await store.latestInboxEvent(room))?.eventId).toBe(`$y-${room}`);
  });

  it("an insert wakes onChange listeners of this and of other connections", async () => {
    const room = ctx.uid("!inbox-feed");
    const a = await ctx.open();
    const b = await ctx.open();
    const heardA: string[] = [];
    const heardB: string[] = [];
    const offA = a.onChange((topic) => heardA.push(topic));
    let wakeB!: () => void;
    const woke = new Promise<void>((resolve) => (wakeB = resolve));
    const offB = b.onChange((topic) => {
      heardB.push(topic);
      if (topic === "inbox") wakeB();
    });
    await a.insertInboxEvent(event(room));
    await woke;
    offA();
    offB();
    expect(heardA).toContain("inbox");
    expect(heardB).toContain("inbox");
  });
}
