/**
 * Store contract: the leader's schedule loop (src/app/schedules.ts) over the store, under the
 * test's clock: the loop's sleeps run on a fake clock and the store's clock moves by hand, so what
 * a per-second schedule does across a pause, a delete, a leader change and a missed policy is
 * counted slot by slot, on every store, in no real time (docs/architecture.md §3, "Schedule").
 * test/e2e/schedule-verbs.test.ts and schedules-fleet.test.ts keep one real-process run each.
 */
import { afterEach, expect, it } from "vitest";
import { silentLogger } from "../../../src/adapters/log/pino-logger.js";
import { runScheduleLoop, SCHEDULE_TICK_MS } from "../../../src/app/schedules.js";
import type { LeaderFence, RunRecord, Store } from "../../../src/ports/store.js";
import { FakeClock, settle } from "../../support/fake-clock.js";
import { cmd, dag, runInput, session, task } from "../../support/store-fixtures.js";
import type { ContractContext } from "../context.js";

const SECOND = 1000;
/** Longer than any test here moves the clock: a leader keeps its lease until the test takes it. */
const LONG_LEASE_MS = 24 * 3600 * SECOND;

interface Loop {
  /** Lets the store's clock move by `ms` and the loop run one round; returns once it sleeps again. */
  round(ms: number): Promise<void>;
  stop(): Promise<void>;
  deposed(): boolean;
}

export function scheduleLoopSection(ctx: ContractContext): void {
  const loops: Loop[] = [];
  afterEach(async () => {
    for (const loop of loops.splice(0)) await loop.stop();
  });

  /** A room led by `nodeId`, the store's clock half a second past a whole second. */
  const setup = async () => {
    const store = await ctx.store();
    const room = `!${ctx.uid("sched-loop")}:example.org`;
    ctx.clock.set(Math.ceil(ctx.clock.now() / SECOND) * SECOND + 2 * SECOND + SECOND / 2);
    return { store, room, fence: await lead(store, room, "leader-a") };
  };

  const lead = async (store: Store, room: string, nodeId: string): Promise<LeaderFence> => {
    const { expiresAt: _e, ...fence } = await store.acquireLease(room, session(nodeId), LONG_LEASE_MS);
    return fence;
  };

  const start = (store: Store, fence: LeaderFence): Loop => {
    const clock = new FakeClock();
    const abort = new AbortController();
    let deposed = false;
    const done = runScheduleLoop(
      { store, clock, authority: null },
      silentLogger(),
      fence,
      abort.signal,
      () => {
        deposed = true;
      },
    );
    // A round waits on the store's real I/O (a network round trip on PostgreSQL): wait for the
    // loop's next sleep by the wall clock, not by a count of turns.
    const sleeping = async (): Promise<void> => {
      const until = Date.now() + 10_000;
      while (clock.sleeping === 0 && !deposed) {
        if (Date.now() > until) throw new Error("the schedule loop never slept again");
        await new Promise<void>((r) => setTimeout(r, 1));
      }
    };
    const loop: Loop = {
      round: async (ms) => {
        await sleeping();
        ctx.clock.advance(ms);
        await clock.advance(SCHEDULE_TICK_MS);
        await settle();
        await sleeping();
      },
      stop: async () => {
        abort.abort();
        await done;
      },
      deposed: () => deposed,
    };
    loops.push(loop);
    return loop;
  };

  const publishEverySecond = async (
    store: Store,
    fence: LeaderFence,
    missed: "skip" | "run_once",
  ): Promise<string> => {
    const id = ctx.uid("tick");
    const doc = { ...dag(id, [task("stamp")]), schedule: { cron: "* * * * * *", timezone: "UTC", missed } };
    const created = await store.createRun(cmd(fence), runInput(fence.roomId, doc));
    expect(created.kind).toBe("created");
    return id;
  };

  const slotRuns = async (store: Store, room: string, id: string): Promise<RunRecord[]> =>
    (await store.listDefinitionRuns(room, id, { limit: 10_000 }))
      .filter((r) => r.dag.slot !== undefined)
      .sort((a, b) => a.dag.slot!.at - b.dag.slot!.at);

  /** Each run's slot follows the previous one's: "" when none is lost, else what is missing. */
  const gapsOf = (runs: readonly RunRecord[]): string[] => {
    const gaps: string[] = [];
    for (let i = 1; i < runs.length; i++) {
      const prev = runs[i - 1]!.dag.slot!.at;
      const slot = runs[i]!.dag.slot!;
      if (slot.firstCovered !== prev + SECOND || slot.at - slot.firstCovered !== (slot.covers - 1) * SECOND)
        gaps.push(`${runs[i]!.dagId}: covers ${slot.covers} from ${slot.firstCovered}, previous ${prev}`);
    }
    return gaps;
  };

  it("paused, a schedule fires no slot; resumed, from the resume on with no catch-up; deleted, none, also under a new leader", async () => {
    const { store, room, fence } = await setup();
    const id = await publishEverySecond(store, fence, "run_once");
    const loop = start(store, fence);
    for (let i = 0; i < 3; i++) await loop.round(SECOND);
    expect(await slotRuns(store, room, id)).toHaveLength(3);

    const by = "@ops:example.org";
    expect(
      (await store.changeSchedule(cmd(fence), room, id, { action: "pause", by, reason: "test" })).kind,
    ).toBe("done");
    const pausedAt = ctx.clock.now();
    for (let i = 0; i < 5; i++) await loop.round(SECOND);
    expect((await slotRuns(store, room, id)).filter((r) => r.dag.slot!.at > pausedAt)).toEqual([]);

    expect(
      (await store.changeSchedule(cmd(fence), room, id, { action: "resume", by, reason: null })).kind,
    ).toBe("done");
    const resumedAt = ctx.clock.now();
    for (let i = 0; i < 3; i++) await loop.round(SECOND);
    const afterResume = await slotRuns(store, room, id);
    // Nothing stands for the pause: no run of a slot inside it, and no catch-up covering it.
    expect(afterResume.filter((r) => r.dag.slot!.at > pausedAt && r.dag.slot!.at <= resumedAt)).toEqual([]);
    expect(afterResume.filter((r) => r.dag.slot!.at > resumedAt)).toHaveLength(3);
    expect(afterResume.filter((r) => r.dag.slot!.covers > 1)).toEqual([]);

    expect(
      (await store.changeSchedule(cmd(fence), room, id, { action: "delete", by, reason: null })).kind,
    ).toBe("done");
    const deletedAt = ctx.clock.now();
    for (let i = 0; i < 3; i++) await loop.round(SECOND);
    await loop.stop();
    // A new leader (the whole fleet restarted) reads the schedule's state from the store.
    await store.releaseLease(fence);
    const next = start(store, await lead(store, room, "leader-b"));
    for (let i = 0; i < 3; i++) await next.round(SECOND);
    expect((await slotRuns(store, room, id)).filter((r) => r.dag.slot!.at > deletedAt)).toEqual([]);
    const kinds = (await store.readEvents(room, 0))
      .map((e) => e.kind)
      .filter((k) => k.startsWith("schedule.") && k !== "schedule.fired" && k !== "schedule.skipped");
    expect(kinds).toEqual(["schedule.paused", "schedule.resumed", "schedule.deleted"]);
  });

  for (const missed of ["run_once", "skip"] as const) {
    it(`missed = ${missed}: across a leader change no slot fires twice, and the slots with no leader are ${missed === "run_once" ? "covered by one catch-up run" : "skipped, with no run standing for them"}`, async () => {
      const { store, room, fence } = await setup();
      const id = await publishEverySecond(store, fence, missed);
      const first = start(store, fence);
      for (let i = 0; i < 4; i++) await first.round(SECOND);
      // The leader stops leading (killed: its loop is left where it was); five seconds pass with no
      // leader, then another node takes the room under a new term.
      ctx.clock.advance(5 * SECOND);
      await store.releaseLease(fence);
      const fence2 = await lead(store, room, "leader-b");
      expect(fence2.term).toBeGreaterThan(fence.term);
      const second = start(store, fence2);
      for (let i = 0; i < 4; i++) await second.round(SECOND);
      // The old leader wakes up late: it is fenced out and fires nothing.
      await first.round(0);
      expect(first.deposed()).toBe(true);
      for (let i = 0; i < 2; i++) await second.round(SECOND);

      const runs = await slotRuns(store, room, id);
      const fired = (await store.readEvents(room, 0)).filter((e) => e.kind === "schedule.fired");
      const termOf = (at: number) => fired.find((e) => e.data["slot"] === at)?.term;
      const ats = runs.map((r) => r.dag.slot!.at);
      expect(new Set(ats).size).toBe(ats.length);
      const catchUps = runs.filter((r) => r.dag.slot!.covers > 1);
      if (missed === "run_once") {
        expect(gapsOf(runs)).toEqual([]);
        expect(catchUps).toHaveLength(1);
        expect(termOf(catchUps[0]!.dag.slot!.at)).toBe(fence2.term);
      } else {
        expect(gapsOf(runs)).toHaveLength(1);
        expect(catchUps).toEqual([]);
        const skipped = (await store.readEvents(room, 0)).filter((e) => e.kind === "schedule.skipped");
        expect(skipped).toHaveLength(1);
        expect(skipped[0]!.data["count"]).toBeGreaterThanOrEqual(4);
      }
      expect(ats.filter((at) => termOf(at) === fence.term)).toHaveLength(4);
      expect(ats.map(termOf).every((t) => t === fence.term || t === fence2.term)).toBe(true);
    });
  }
}
