/**
 * Store contract: schedules as objects. A definition's schedule has a state (active,
 * paused, deleted) with who changed it, when and why; every change and every fired or skipped slot
 * is an event; slotsThrough records the newest slot fired or skipped, so no later leader considers
 * it again; changes are fenced and commit with their inbox mark and their notices.
 */
import { expect, it } from "vitest";
import type { ParsedDag } from "../../../src/domain/model.js";
import { ConflictError, NotFoundError } from "../../../src/ports/errors.js";
import type { LeaderFence, PruneLimits, Store } from "../../../src/ports/store.js";
import {
  answered,
  becomeLeader,
  cmd,
  dag,
  offer,
  ok,
  runInput,
  session,
  task,
} from "../../support/store-fixtures.js";
import type { ContractContext } from "../context.js";

const DAY = 24 * 3_600_000;
const EVERY_SECOND = { cron: "* * * * * *", timezone: "UTC", missed: "skip" as const };
const LIMITS: PruneLimits = {
  olderThanMs: DAY,
  nodesOlderThanMs: DAY,
  keysOlderThanMs: DAY,
  runs: 50,
  rows: 500,
};

export function schedulesSection(ctx: ContractContext): void {
  const setup = async () => {
    const store = await ctx.store();
    const room = `!${ctx.uid("sched")}:example.org`;
    const fence = await becomeLeader(store, room);
    const id = ctx.uid("tick");
    await create(store, fence, { ...dag(id, [task("a")]), schedule: EVERY_SECOND });
    return { store, room, fence, id };
  };

  const create = async (store: Store, fence: LeaderFence, d: ParsedDag) => {
    const r = await store.createRun(cmd(fence), runInput(fence.roomId, d));
    if (r.kind !== "created") throw new Error(`expected created, got ${r.kind}`);
    return r.run;
  };

  const scheduleEvents = async (store: Store, room: string) =>
    (await store.readEvents(room, 0)).filter((e) => e.kind.startsWith("schedule."));

  it("a schedule starts active; pause, resume and delete record who, when and why, each as an event", async () => {
    const { store, room, fence, id } = await setup();
    expect((await store.getDefinition(room, id))?.scheduleState).toEqual({
      state: "active",
      by: null,
      at: null,
      reason: null,
    });
    ctx.clock.advance(1000);
    const pausedAt = ctx.clock.now();
    const paused = await store.changeSchedule(cmd(fence), room, id, {
      action: "pause",
      by: "@ops:example.org",
      reason: "maintenance",
    });
    expect(paused.kind).toBe("done");
    expect(paused.definition.scheduleState).toEqual({
      state: "paused",
      by: "@ops:example.org",
      at: pausedAt,
      reason: "maintenance",
    });
    expect((await store.listScheduledDefinitions(room))[0]?.scheduleState.state).toBe("paused");
    const again = await store.changeSchedule(cmd(fence), room, id, {
      action: "pause",
      by: "@x:y",
      reason: null,
    });
    expect(again.kind).toBe("already");
    expect(again.definition.scheduleState.by).toBe("@ops:example.org");

    ctx.clock.advance(5000);
    const resumedAt = ctx.clock.now();
    const resumed = await store.changeSchedule(cmd(fence), room, id, {
      action: "resume",
      by: "@ops:example.org",
      reason: null,
    });
    expect(resumed.kind).toBe("done");
    // The slots of the pause never fire: a resume counts from its own time.
    expect(resumed.definition.slotsThrough).toBe(resumedAt);
    expect(resumed.definition.scheduleState).toMatchObject({ state: "active", at: resumedAt });

    const deleted = await store.changeSchedule(cmd(fence), room, id, {
      action: "delete",
      by: "@ops:example.org",
      reason: "done with it",
    });
    expect(deleted.definition.scheduleState).toMatchObject({ state: "deleted", reason: "done with it" });
    for (const action of ["pause", "resume"] as const) {
      const r = await store.changeSchedule(cmd(fence), room, id, {
        action,
        by: "@ops:example.org",
        reason: null,
      });
      expect(r.kind).toBe("wrong-state");
      expect(r.definition.scheduleState.state).toBe("deleted");
    }
    expect(
      (await store.changeSchedule(cmd(fence), room, id, { action: "delete", by: "@x:y", reason: null })).kind,
    ).toBe("already");

    const events = await scheduleEvents(store, room);
    expect(events.map((e) => [e.kind, e.data["by"], e.data["reason"]])).toEqual([
      ["schedule.paused", "@ops:example.org", "maintenance"],
      ["schedule.resumed", "@ops:example.org", null],
      ["schedule.deleted", "@ops:example.org", "done with it"],
    ]);
    expect(events.every((e) => e.data["dagId"] === id && e.term === fence.term)).toBe(true);
  });

  it("a change is fenced, commits with its inbox mark, and enqueues its notices only when the state changed", async () => {
    const { store, room, fence, id } = await setup();
    await store.insertInboxEvent({
      eventId: `$pause-${id}`,
      roomId: room,
      sender: "@ops:example.org",
      originServerTs: 1,
      content: { body: `!dag schedule pause ${id}` },
      seenBy: "test",
    });
    const notice = (n: number) => ({
      txnId: `schedule.paused.${id}.${n}`,
      roomId: room,
      eventType: "m.room.message",
      content: { msgtype: "m.notice", body: `paused ${n}` },
    });
    await store.changeSchedule(
      { fence, inboxEventId: `$pause-${id}`, answer: answered },
      room,
      id,
      { action: "pause", by: "@ops:example.org", reason: null },
      [notice(1)],
    );
    const row = await store.getInboxEvent(`$pause-${id}`);
    expect(row?.status).toBe("handled");
    expect(row?.result).toMatchObject({
      answered: {
        kind: "done",
        definition: { dagId: id, scheduleState: { state: "paused", by: "@ops:example.org" } },
      },
    });
    expect((await store.getOutbox(notice(1).txnId))?.content).toMatchObject({ body: "paused 1" });
    // Already paused: nothing changes, so nothing is said.
    await store.changeSchedule(cmd(fence), room, id, { action: "pause", by: "dagbot", reason: "x" }, [
      notice(2),
    ]);
    expect(await store.getOutbox(notice(2).txnId)).toBeNull();

    // A deposed leader changes nothing; an unknown or unscheduled id is NotFoundError.
    await store.releaseLease(fence);
    const next = await becomeLeader(store, room, "next");
    await expect(
      store.changeSchedule(cmd(fence), room, id, { action: "resume", by: "@x:y", reason: null }),
    ).rejects.toBeInstanceOf(ConflictError);
    expect((await store.getDefinition(room, id))?.scheduleState.state).toBe("paused");
    const plain = ctx.uid("plain");
    await create(store, next, dag(plain, [task("a")]));
    for (const dagId of [plain, ctx.uid("never")])
      await expect(
        store.changeSchedule(cmd(next), room, dagId, { action: "pause", by: "@x:y", reason: null }),
      ).rejects.toBeInstanceOf(NotFoundError);
    await expect(
      store.skipScheduleSlots(fence, room, id, { first: 1, last: 2, count: 2, reason: "x" }),
    ).rejects.toBeInstanceOf(ConflictError);
  });

  it("skipped slots move slotsThrough (never back) with an event that says why; a fired slot moves it with schedule.fired", async () => {
    const { store, room, fence, id } = await setup();
    const base = Date.UTC(2030, 0, 1, 0, 0, 0);
    expect((await store.getDefinition(room, id))?.slotsThrough).toBeNull();
    await store.skipScheduleSlots(fence, room, id, {
      first: base + 1000,
      last: base + 3000,
      count: 3,
      reason: "missed: the schedule's missed policy is skip",
    });
    expect((await store.getDefinition(room, id))?.slotsThrough).toBe(base + 3000);
    await store.skipScheduleSlots(fence, room, id, { first: base, last: base, count: 1, reason: "older" });
    expect((await store.getDefinition(room, id))?.slotsThrough).toBe(base + 3000);

    const slotAt = base + 4000;
    const slotRun = await create(store, fence, {
      ...dag(`${id}.s20300101T000004`, [task("a")]),
      definition: id,
      slot: { at: slotAt, covers: 1, firstCovered: slotAt },
    });
    const def = await store.getDefinition(room, id);
    expect(def).toMatchObject({ slotsThrough: slotAt, lastSlotAt: slotAt });

    const events = await scheduleEvents(store, room);
    expect(events.map((e) => e.kind)).toEqual(["schedule.skipped", "schedule.skipped", "schedule.fired"]);
    expect(events[0]?.data).toEqual({
      dagId: id,
      first: base + 1000,
      last: base + 3000,
      count: 3,
      reason: "missed: the schedule's missed policy is skip",
    });
    expect(events[2]).toMatchObject({ runId: slotRun.runId, data: { dagId: id, slot: slotAt, covers: 1 } });
    await expect(
      store.skipScheduleSlots(fence, room, ctx.uid("never"), { first: 1, last: 1, count: 1, reason: "x" }),
    ).rejects.toBeInstanceOf(NotFoundError);
  });

  it("a deleted schedule no longer keeps its first run; once its runs are gone a new publish of the id schedules afresh", async () => {
    const setUp = await setup();
    const { store, room, id } = setUp;
    let fence = setUp.fence;
    const worker = session(ctx.uid("w"));
    await store.scheduleStep(fence);
    for (
      let c = await store.claimTask(offer(worker, [room]));
      c !== null;
      c = await store.claimTask(offer(worker, [room]))
    )
      await store.finishTask(c.token, ok);
    await store.deriveRunOutcomes(fence);
    await store.changeSchedule(cmd(fence), room, id, {
      action: "delete",
      by: "@ops:example.org",
      reason: null,
    });
    ctx.clock.advance(2 * DAY);
    fence = await becomeLeader(store, room);
    for (
      let r = await store.pruneBatch(fence, LIMITS);
      r.runs > 0;
      r = await store.pruneBatch(fence, LIMITS)
    );
    expect(await store.getDefinition(room, id)).toBeNull();
    await create(store, fence, { ...dag(id, [task("a")]), schedule: EVERY_SECOND });
    expect((await store.getDefinition(room, id))?.scheduleState).toEqual({
      state: "active",
      by: null,
      at: null,
      reason: null,
    });
  });
}
