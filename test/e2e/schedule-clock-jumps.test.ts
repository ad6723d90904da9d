/**
 * The leader's schedule loop (src/app/schedules.ts) over a real SQLite store whose clock the test
 * sets, while the loop's sleeps run on a fake clock: the store's clock jumps forward (under `skip`
 * one run at most, under `run_once` exactly one catch-up, never a burst) and back (no slot fired
 * twice, also after the loop restarts and reads where it was from the store); and a per-second
 * schedule's runs in chat: one status card and final message a minute, not one a second.
 */
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import { silentLogger } from "../../src/adapters/log/pino-logger.js";
import { cardTxnId, finalTxnId } from "../../src/app/render/messages.js";
import type { ScheduleAuthority } from "../../src/app/schedules.js";
import { runScheduleLoop, SCHEDULE_TICK_MS } from "../../src/app/schedules.js";
import { CardKeeper } from "../../src/app/status-cards.js";
import type { LeaderFence, RunRecord, Store } from "../../src/ports/store.js";
import { FakeClock, settle } from "../support/fake-clock.js";
import { sqliteTestDb } from "../support/sqlite-harness.js";
import { cmd, dag, offer, ok, runInput, session, task } from "../support/store-fixtures.js";

const SECOND = 1000;
const HOUR = 3600 * SECOND;
/** Half a second past a whole second: each one-second step brings exactly one per-second slot. */
const START = Date.UTC(2030, 0, 1, 0, 0, 0) + 500;
/** The first per-second slot after START. */
const FIRST_SLOT = START + 500;

const db = sqliteTestDb("schedule-clock");
let failed = false;
afterEach((t) => {
  if (t.task.result?.state === "fail") failed = true;
});
afterAll(() => db.cleanup(failed));

describe("schedule loop across clock jumps (SQLite store, store clock set by the test)", () => {
  let now = START;
  let store: Store;
  let fence: LeaderFence;
  let room: string;
  let counter = 0;
  const loops: Array<{ stop: () => Promise<void> }> = [];

  beforeEach(async () => {
    now = START;
    store = await db.open({ clock: () => now });
    room = `!jumps-${++counter}`;
    // A lease far longer than any jump: the loop stays leader while its store's clock moves.
    const { expiresAt: _e, ...held } = await store.acquireLease(room, session("leader"), 400 * 24 * HOUR);
    fence = held;
  });

  afterEach(async () => {
    for (const loop of loops.splice(0)) await loop.stop();
    await store.close();
  });

  /** Starts the loop on a fake clock; `round` lets the store's clock move by `ms` and one round run. */
  const start = (authority: ScheduleAuthority | null = null) => {
    const clock = new FakeClock();
    const abort = new AbortController();
    let deposed = false;
    const done = runScheduleLoop({ store, clock, authority }, silentLogger(), fence, abort.signal, () => {
      deposed = true;
    });
    const sleeping = async (): Promise<void> => {
      for (let i = 0; clock.sleeping === 0; i++) {
        if (i > 10_000) throw new Error("the schedule loop never slept again");
        if (deposed) throw new Error("the schedule loop was deposed");
        await new Promise<void>((r) => setImmediate(r));
      }
    };
    const loop = {
      stop: async () => {
        abort.abort();
        await done;
      },
      round: async (ms: number) => {
        await sleeping();
        now += ms;
        await clock.advance(SCHEDULE_TICK_MS);
        await settle();
        await sleeping();
      },
    };
    loops.push(loop);
    return loop;
  };

  const publishEverySecond = async (missed: "skip" | "run_once"): Promise<string> => {
    const id = `every-second-${missed}`;
    const doc = { ...dag(id, [task("tick")]), schedule: { cron: "* * * * * *", timezone: "UTC", missed } };
    const created = await store.createRun(cmd(fence), runInput(room, doc));
    expect(created.kind).toBe("created");
    return id;
  };

  const slotRuns = async (id: string): Promise<RunRecord[]> =>
    (await store.listDefinitionRuns(room, id, { limit: 10_000 }))
      .filter((r) => r.dag.slot !== undefined)
      .sort((a, b) => a.dag.slot!.at - b.dag.slot!.at);

  /** Every slot a run stands for, from its first covered one to its own: none may appear twice. */
  const coveredSlots = (runs: readonly RunRecord[]): number[] =>
    runs.flatMap((r) => {
      const { at, covers, firstCovered } = r.dag.slot!;
      return covers === 1 ? [at] : [firstCovered, at];
    });

  it("skip: a jump forward by an hour fires one run, for the newest slot, and the schedule goes on", async () => {
    const id = await publishEverySecond("skip");
    const loop = start();
    for (let i = 0; i < 3; i++) await loop.round(SECOND);
    expect((await slotRuns(id)).map((r) => r.dag.slot!.at)).toEqual(
      [0, 1, 2].map((k) => FIRST_SLOT + k * SECOND),
    );

    await loop.round(HOUR);
    const jumped = FIRST_SLOT + 2 * SECOND + HOUR;
    const afterJump = await slotRuns(id);
    expect(afterJump).toHaveLength(4);
    expect(afterJump.at(-1)!.dag.slot).toMatchObject({ at: jumped, covers: 1, firstCovered: jumped });

    for (let i = 0; i < 2; i++) await loop.round(SECOND);
    expect((await slotRuns(id)).map((r) => r.dag.slot!.at)).toEqual([
      FIRST_SLOT,
      FIRST_SLOT + SECOND,
      FIRST_SLOT + 2 * SECOND,
      jumped,
      jumped + SECOND,
      jumped + 2 * SECOND,
    ]);
    expect((await store.getDefinition(room, id))?.lastSlotAt).toBe(jumped + 2 * SECOND);
  });

  const scheduleEvents = async () =>
    (await store.readEvents(room, 0)).filter((e) => e.kind.startsWith("schedule."));

  it("skip: the slots a jump passes over leave one schedule.skipped event with their count and why; a new term records them no more", async () => {
    const id = await publishEverySecond("skip");
    const loop = start();
    for (let i = 0; i < 2; i++) await loop.round(SECOND);
    await loop.round(HOUR);
    const lastBefore = FIRST_SLOT + SECOND;
    const skipped = (await scheduleEvents()).filter((e) => e.kind === "schedule.skipped");
    expect(skipped).toHaveLength(1);
    expect(skipped[0]?.data).toEqual({
      dagId: id,
      first: lastBefore + SECOND,
      last: lastBefore + HOUR - SECOND,
      count: HOUR / SECOND - 1,
      reason: "missed: the schedule's missed policy is skip",
    });
    // Each fired slot has its event too, with its run.
    const fired = (await scheduleEvents()).filter((e) => e.kind === "schedule.fired");
    expect(fired.map((e) => e.data["slot"])).toEqual((await slotRuns(id)).map((r) => r.dag.slot!.at));
    await loop.stop();
    const again = start();
    await again.round(0);
    expect((await scheduleEvents()).filter((e) => e.kind === "schedule.skipped")).toHaveLength(1);
  });

  it("a paused schedule fires nothing; resumed, it fires from the resume on, never the slots of the pause", async () => {
    const id = await publishEverySecond("run_once");
    const loop = start();
    for (let i = 0; i < 2; i++) await loop.round(SECOND);
    await store.changeSchedule(cmd(fence), room, id, {
      action: "pause",
      by: "@ops:example.org",
      reason: null,
    });
    for (let i = 0; i < 5; i++) await loop.round(SECOND);
    expect(await slotRuns(id)).toHaveLength(2);
    await store.changeSchedule(cmd(fence), room, id, {
      action: "resume",
      by: "@ops:example.org",
      reason: null,
    });
    const resumedAt = now;
    for (let i = 0; i < 2; i++) await loop.round(SECOND);
    const runs = await slotRuns(id);
    // run_once does not catch up a pause: one run per slot after the resume, each covering itself.
    expect(runs.slice(2).map((r) => r.dag.slot)).toMatchObject(
      [1, 2].map((k) => {
        const at = resumedAt - SECOND / 2 + k * SECOND;
        return { at, covers: 1, firstCovered: at };
      }),
    );
    await store.changeSchedule(cmd(fence), room, id, {
      action: "delete",
      by: "@ops:example.org",
      reason: null,
    });
    for (let i = 0; i < 3; i++) await loop.round(SECOND);
    await loop.stop();
    const restarted = start();
    for (let i = 0; i < 3; i++) await restarted.round(SECOND);
    expect(await slotRuns(id)).toHaveLength(4);
  });

  it("a schedule whose owner may no longer run it pauses itself instead of firing, says so once, and its slot is skipped with the reason", async () => {
    const id = await publishEverySecond("skip");
    let allowed = true;
    let asked = 0;
    const authority: ScheduleAuthority = {
      refusal: async (def) => {
        asked += 1;
        expect(def.dagId).toBe(id);
        return allowed ? null : "@alice:example.org (its publisher) may no longer run it";
      },
      notice: (def, reason, slot) => ({
        txnId: `schedule.paused.${def.dagId}.${slot}`,
        roomId: def.roomId,
        eventType: "m.room.message",
        content: { msgtype: "m.notice", body: reason },
      }),
    };
    const loop = start(authority);
    for (let i = 0; i < 2; i++) await loop.round(SECOND);
    expect(await slotRuns(id)).toHaveLength(2);
    expect(asked).toBeGreaterThanOrEqual(2);
    allowed = false;
    for (let i = 0; i < 4; i++) await loop.round(SECOND);
    expect(await slotRuns(id)).toHaveLength(2);
    const def = await store.getDefinition(room, id);
    expect(def?.scheduleState).toMatchObject({
      state: "paused",
      by: "dagbot",
      reason: "@alice:example.org (its publisher) may no longer run it",
    });
    const events = await scheduleEvents();
    expect(events.filter((e) => e.kind === "schedule.paused")).toHaveLength(1);
    expect(events.filter((e) => e.kind === "schedule.skipped").map((e) => e.data["reason"])).toEqual([
      "@alice:example.org (its publisher) may no longer run it",
    ]);
    const notices = (await store.pendingOutbox(fence, 100)).filter((m) =>
      m.txnId.startsWith("schedule.paused."),
    );
    expect(notices).toHaveLength(1);
  });

  it("run_once: a jump forward by an hour fires exactly one catch-up run covering the missed slots", async () => {
    const id = await publishEverySecond("run_once");
    const loop = start();
    for (let i = 0; i < 3; i++) await loop.round(SECOND);
    await loop.round(HOUR);
    const runs = await slotRuns(id);
    expect(runs).toHaveLength(4);
    const lastBefore = FIRST_SLOT + 2 * SECOND;
    expect(runs.at(-1)!.dag.slot).toEqual({
      at: lastBefore + HOUR,
      covers: HOUR / SECOND,
      firstCovered: lastBefore + SECOND,
    });
    await loop.round(SECOND);
    const after = await slotRuns(id);
    expect(after).toHaveLength(5);
    expect(after.at(-1)!.dag.slot).toMatchObject({
      at: lastBefore + HOUR + SECOND,
      covers: 1,
      firstCovered: lastBefore + HOUR + SECOND,
    });
    // The clock goes back into the hour the catch-up covered: those slots were handled by it, so
    // nothing fires there, neither in this term nor after a restart that reads the store.
    await loop.round(-HOUR / 2);
    for (let i = 0; i < 3; i++) await loop.round(SECOND);
    await loop.stop();
    const again = start();
    for (let i = 0; i < 3; i++) await again.round(SECOND);
    const all = await slotRuns(id);
    expect(all).toHaveLength(5);
    const covered = coveredSlots(all);
    expect(new Set(covered).size).toBe(covered.length);
  });

  it("a per-second schedule shows one run a minute in chat: only the first slot of each minute gets a card and a final message", async () => {
    // Three slots before a minute ends and three after: 00:00:58 ... 00:01:03.
    now = START + 57 * SECOND;
    const id = await publishEverySecond("skip");
    const loop = start();
    for (let i = 0; i < 6; i++) await loop.round(SECOND);
    const runs = await slotRuns(id);
    expect(runs.map((r) => new Date(r.dag.slot!.at).toISOString().slice(11, 19))).toEqual([
      "00:00:58",
      "00:00:59",
      "00:01:00",
      "00:01:01",
      "00:01:02",
      "00:01:03",
    ]);
    expect(runs.map((r) => r.dag.slot!.quiet === true)).toEqual([true, true, false, true, true, true]);

    // The card keeper of the room: cards for the definition's first run and the 00:01:00 slot only.
    const keeper = new CardKeeper(
      { store, clock: new FakeClock(), logger: silentLogger() },
      fence,
      silentLogger(),
    );
    await keeper.pass(50);
    const shown = async (txn: (runId: string) => string) =>
      (
        await Promise.all(
          runs.map(async (r) => ((await store.getOutbox(txn(r.runId))) === null ? null : r.dagId)),
        )
      ).filter((x) => x !== null);
    expect(await shown(cardTxnId)).toEqual([`${id}.s20300101T000100`]);

    // Every run ends; the final message (which mentions the publisher) is the shown run's only.
    const worker = session("worker");
    await store.scheduleStep(fence);
    for (;;) {
      const claimed = await store.claimTask(offer(worker, [room]));
      if (claimed === null) break;
      await store.finishTask(claimed.token, ok);
    }
    await store.deriveRunOutcomes(fence);
    expect((await slotRuns(id)).every((r) => r.status === "succeeded")).toBe(true);
    for (let i = 0; i < 3; i++) {
      await keeper.pass(50);
      // The final message waits for the card to read "succeeded": mark what the keeper queued as sent.
      for (const m of await store.pendingOutbox(fence, 100))
        await store.markOutboxSent(fence, m.txnId, `$${m.txnId}`);
    }
    expect(await shown(finalTxnId)).toEqual([`${id}.s20300101T000100`]);
    expect(await shown(cardTxnId)).toEqual([`${id}.s20300101T000100`]);
  });

  it.each(["skip", "run_once"] as const)(
    "%s: a jump back by an hour fires nothing until the clock passes the newest fired slot, also after a restart",
    async (missed) => {
      const id = await publishEverySecond(missed);
      const first = start();
      for (let i = 0; i < 5; i++) await first.round(SECOND);
      const fired = (await slotRuns(id)).map((r) => r.dag.slot!.at);
      expect(fired).toEqual([0, 1, 2, 3, 4].map((k) => FIRST_SLOT + k * SECOND));
      const newest = fired.at(-1)!;

      await first.round(-HOUR);
      for (let i = 0; i < 5; i++) await first.round(SECOND);
      expect(await slotRuns(id)).toHaveLength(5);
      // A new leader term (or a restart) reads where the schedule was from the store: still nothing.
      await first.stop();
      const second = start();
      for (let i = 0; i < 5; i++) await second.round(SECOND);
      expect(await slotRuns(id)).toHaveLength(5);
      // Nor with the clock between the definition's start and the newest fired slot.
      now = newest - 2 * SECOND - SECOND / 2;
      for (let i = 0; i < 3; i++) await second.round(i === 0 ? 0 : SECOND);
      expect(await slotRuns(id)).toHaveLength(5);

      // The clock comes back to just after the newest fired slot, then goes on: each later slot once.
      now = newest + SECOND / 2;
      await second.round(0);
      expect(await slotRuns(id)).toHaveLength(5);
      for (let i = 0; i < 3; i++) await second.round(SECOND);
      const all = (await slotRuns(id)).map((r) => r.dag.slot!.at);
      expect(all).toEqual([...fired, newest + SECOND, newest + 2 * SECOND, newest + 3 * SECOND]);
      expect(new Set(all).size).toBe(all.length);
    },
  );
});
