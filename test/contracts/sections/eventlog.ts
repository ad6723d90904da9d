/**
 * Store contract: the event log. Every state change appends in its own transaction (a refused write
 * appends nothing), leader writes carry their term and every line its actor, reads go "since seq"
 * within one room, and seq only grows within a room, so a reader polling while writers race misses
 * nothing.
 */
import { expect, it } from "vitest";
import { ConflictError } from "../../../src/ports/errors.js";
import type { InboxEventInput, LogEvent } from "../../../src/ports/store.js";
import {
  becomeLeader,
  cmd,
  dag,
  offer,
  ok,
  race,
  runInput,
  session,
  task,
} from "../../support/store-fixtures.js";
import type { ContractContext } from "../context.js";

const WRITERS = 16;

export function eventlogSection(ctx: ContractContext): void {
  const inboxEvent = (roomId: string, eventId: string): InboxEventInput => ({
    eventId,
    roomId,
    sender: "@alice:example.org",
    originServerTs: 1000,
    content: { body: "!dag status" },
    seenBy: "n1",
  });

  const kinds = (events: LogEvent[]): string[] => events.map((e) => e.kind);

  it("every state change of a command's life appends one line, in order, with term and actor", async () => {
    const store = await ctx.store();
    const room = ctx.uid("!log");
    const leader = session("leader");
    const { expiresAt: _e, ...fence } = await store.acquireLease(room, leader, 60_000);
    const eventId = `$publish-${room}`;
    await store.insertInboxEvent(inboxEvent(room, eventId));
    const created = await store.createRun(
      cmd(fence, eventId),
      runInput(room, dag(ctx.uid("d"), [task("a")])),
    );
    await store.scheduleStep(fence);
    const worker = session("worker");
    const claimed = await store.claimTask(offer(worker, [room]));
    await store.finishTask(claimed!.token, ok);
    await store.deriveRunOutcomes(fence);
    await store.enqueueOutbox(fence, [
      { txnId: ctx.uid("reply"), roomId: room, eventType: "m.room.message", content: { body: "done" } },
    ]);
    await store.markInboxReplied(fence, eventId, []);
    await store.setRoomCap(room, 3, { fence: fence });
    await store.releaseLease(fence);

    const events = await store.readEvents(room, 0);
    expect(kinds(events)).toEqual([
      "lease.acquired",
      "inbox.inserted",
      "run.created",
      "inbox.handled",
      "task.queued",
      "task.running",
      "task.succeeded",
      "run.succeeded",
      "outbox.enqueued",
      "inbox.replied",
      "cap.set",
      "lease.released",
    ]);
    for (let i = 1; i < events.length; i++) expect(events[i]!.seq).toBeGreaterThan(events[i - 1]!.seq);
    const leaderKey = `${leader.nodeId}/${leader.bootId}`;
    const byKind = new Map(events.map((e) => [e.kind, e]));
    for (const k of [
      "lease.acquired",
      "run.created",
      "inbox.handled",
      "task.queued",
      "run.succeeded",
      "cap.set",
    ]) {
      expect(byKind.get(k)).toMatchObject({
        term: fence.term,
        actor: leaderKey,
        roomId: room,
        at: ctx.clock.now(),
      });
    }
    const runId = created.kind === "created" ? created.run.runId : "";
    expect(byKind.get("run.created")).toMatchObject({ runId, taskId: null });
    expect(byKind.get("task.running")).toMatchObject({
      term: null,
      actor: `${worker.nodeId}/${worker.bootId}`,
      runId,
      taskId: "a",
    });
    expect(byKind.get("task.succeeded")).toMatchObject({ term: null, runId, taskId: "a" });
    expect(byKind.get("inbox.inserted")).toMatchObject({ term: null, actor: "n1" });
  });

  it("reads since a seq, limited, and only the asked room", async () => {
    const store = await ctx.store();
    const room = ctx.uid("!log");
    const other = ctx.uid("!log-other");
    for (let i = 0; i < 5; i++) {
      await store.insertInboxEvent(inboxEvent(room, `$e${i}-${room}`));
      await store.insertInboxEvent(inboxEvent(other, `$e${i}-${other}`));
    }
    const all = await store.readEvents(room, 0);
    expect(all).toHaveLength(5);
    expect(all.every((e) => e.roomId === room)).toBe(true);
    expect(all.map((e) => e.data.eventId)).toEqual([0, 1, 2, 3, 4].map((i) => `$e${i}-${room}`));
    const since = await store.readEvents(room, all[1]!.seq);
    expect(since).toEqual(all.slice(2));
    expect(await store.readEvents(room, all[1]!.seq, 2)).toEqual(all.slice(2, 4));
    expect(await store.readEvents(room, all[4]!.seq)).toEqual([]);
    expect(await store.readEvents(ctx.uid("!empty"), 0)).toEqual([]);
  });

  it("a refused or duplicate write appends nothing", async () => {
    const store = await ctx.store();
    const room = ctx.uid("!log");
    const fence = await becomeLeader(store, room);
    const eventId = `$dup-${room}`;
    await store.insertInboxEvent(inboxEvent(room, eventId));
    await store.markInboxHandled(fence, eventId, { ok: true });
    const before = await store.readEvents(room, 0);
    expect(await store.insertInboxEvent(inboxEvent(room, eventId))).toBe("duplicate");
    await expect(store.markInboxHandled(fence, eventId, { ok: false })).rejects.toBeInstanceOf(ConflictError);
    await expect(store.acquireLease(room, session("rival"), 10_000)).rejects.toBeInstanceOf(ConflictError);
    const d = dag(ctx.uid("d"), [task("a")]);
    await store.createRun(cmd(fence), runInput(room, d));
    const afterCreate = await store.readEvents(room, 0);
    expect(afterCreate).toHaveLength(before.length + 1);
    const again = await store.createRun(cmd(fence), runInput(room, d));
    expect(again.kind).toBe("exists");
    expect(await store.readEvents(room, 0)).toEqual(afterCreate);
  });

  it(`seq grows within a room under ${WRITERS} racing writers: a reader polling "since" misses nothing`, async () => {
    const room = ctx.uid("!log-race");
    const stores = await Promise.all(Array.from({ length: WRITERS }, () => ctx.open()));
    const reader = await ctx.open();
    const seen: LogEvent[] = [];
    let last = 0;
    let writing = true;
    const poll = async (): Promise<void> => {
      for (;;) {
        const done = !writing;
        const batch = await reader.readEvents(room, last);
        for (const e of batch) {
          expect(e.seq).toBeGreaterThan(last);
          last = e.seq;
          seen.push(e);
        }
        if (done && batch.length === 0) return;
        // A poller waits between looks (a store may commit its writers' work at the next turn).
        await new Promise((r) => setImmediate(r));
      }
    };
    const polling = poll();
    const { errors } = await race(
      stores.map((s, i) => async () => {
        for (let k = 0; k < 5; k++) await s.insertInboxEvent(inboxEvent(room, `$w${i}.${k}-${room}`));
      }),
    );
    writing = false;
    await polling;
    expect(errors).toEqual([]);
    const all = await reader.readEvents(room, 0);
    expect(all).toHaveLength(WRITERS * 5);
    expect(new Set(all.map((e) => e.seq)).size).toBe(WRITERS * 5);
    expect(seen.map((e) => e.seq)).toEqual(all.map((e) => e.seq));
  });
}
