/**
 * Store contract: definitions. Publishing writes the definition in the same transaction
 * as its first run (none when that transaction fails); later runs reference it and move its newest
 * slot and run number; reads by definition find its runs however many newer runs the room has;
 * retention keeps a definition while it has runs or an approved schedule; the migration back-fills
 * the table from the runs an older dagbot wrote.
 */
import { expect, it } from "vitest";
import type { ParsedDag } from "../../../src/domain/model.js";
import { NotFoundError, StoreError } from "../../../src/ports/errors.js";
import type { LeaderFence, PruneLimits, Store } from "../../../src/ports/store.js";
import { becomeLeader, cmd, dag, offer, ok, runInput, session, task } from "../../support/store-fixtures.js";
import type { ContractContext, LegacyRun } from "../context.js";

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const LIMITS: PruneLimits = {
  olderThanMs: DAY,
  nodesOlderThanMs: DAY,
  keysOlderThanMs: DAY,
  runs: 50,
  rows: 500,
};
const NIGHTLY = { cron: "0 2 * * *", timezone: "UTC", missed: "run_once" as const };

export function definitionsSection(ctx: ContractContext): void {
  const setup = async () => {
    const store = await ctx.store();
    const room = ctx.uid("!defs");
    const fence = await becomeLeader(store, room);
    return { store, room, fence };
  };

  const create = async (store: Store, fence: LeaderFence, d: ParsedDag, needsConfirmation = false) => {
    const r = await store.createRun(cmd(fence), runInput(fence.roomId, d, { needsConfirmation }));
    if (r.kind !== "created") throw new Error(`expected created, got ${r.kind}`);
    return r.run;
  };

  /** Runs every queued task of the room to success and lets the leader end the runs. */
  const finishAll = async (store: Store, fence: LeaderFence): Promise<void> => {
    const worker = session(ctx.uid("w"));
    await store.scheduleStep(fence);
    for (;;) {
      const claimed = await store.claimTask(offer(worker, [fence.roomId]));
      if (claimed === null) break;
      await store.finishTask(claimed.token, ok);
    }
    await store.deriveRunOutcomes(fence);
  };

  const pruneAll = async (store: Store, fence: LeaderFence) => {
    let runs = 0;
    let definitions = 0;
    for (;;) {
      const r = await store.pruneBatch(fence, LIMITS);
      runs += r.runs;
      definitions += r.definitions;
      if (r.runs === 0 && r.definitions === 0) return { runs, definitions };
    }
  };

  it("publishing writes the definition with its first run: hash, document without values, schedule, origin", async () => {
    const { store, room, fence } = await setup();
    const id = ctx.uid("nightly");
    const doc = dag(id, [task("a", { args: { who: "{params.who}" } })], {
      params: { who: { pattern: "[a-z]+", default: "ann" } },
      schedule: NIGHTLY,
    });
    const input = runInput(room, { ...doc, values: { who: "ann" } }, { needsConfirmation: true });
    const created = await store.createRun(cmd(fence), input);
    expect(created.kind).toBe("created");
    const def = await store.getDefinition(room, id);
    expect(def).toMatchObject({
      roomId: room,
      dagId: id,
      hash: input.hash,
      dag: doc,
      schedule: NIGHTLY,
      publisher: input.publisher,
      lastSlotAt: null,
      lastRunNumber: 1,
      createdAt: ctx.clock.now(),
    });
    expect(def?.dag.values).toBeUndefined();
    expect(def?.origin).toEqual({
      runId: created.kind === "created" ? created.run.runId : "",
      status: "pending",
      confirmedBy: null,
      confirmDeadline: ctx.clock.now() + input.confirmTimeoutMs,
    });
    await store.confirmRun(cmd(fence), room, id, "@bob:example.org");
    expect((await store.getDefinition(room, id))?.origin).toMatchObject({
      status: "running",
      confirmedBy: "@bob:example.org",
    });
    expect(await store.getDefinition(room, ctx.uid("never"))).toBeNull();
    expect(await store.getDefinition(ctx.uid("!other"), id)).toBeNull();
  });

  it("a failed publish leaves no definition; same content is 'exists', other content 'conflict', the definition unchanged", async () => {
    const { store, room, fence } = await setup();
    const id = ctx.uid("atomic");
    const trapped = task(ctx.uid("trap"));
    const remove = await ctx.capabilities.injectTaskInsertFailure(trapped.id);
    try {
      const e = await store
        .createRun(cmd(fence), runInput(room, dag(id, [task("a"), trapped])))
        .catch((x) => x);
      expect(e).toBeInstanceOf(StoreError);
    } finally {
      await remove();
    }
    expect(await store.getDefinition(room, id)).toBeNull();

    const first = await create(store, fence, dag(id, [task("a")]));
    const before = await store.getDefinition(room, id);
    ctx.clock.advance(1000);
    const same = await store.createRun(cmd(fence), runInput(room, dag(id, [task("a")])));
    expect(same).toMatchObject({ kind: "exists", run: { runId: first.runId } });
    const other = await store.createRun(cmd(fence), runInput(room, dag(id, [task("a"), task("b")])));
    expect(other).toMatchObject({ kind: "conflict", existing: { runId: first.runId } });
    expect(await store.getDefinition(room, id)).toEqual(before);
  });

  it("runs of a definition reference it: newest first, slot and run number recorded; an unknown definition stores nothing", async () => {
    const { store, room, fence } = await setup();
    const id = ctx.uid("def");
    const first = await create(store, fence, { ...dag(id, [task("a")]), schedule: NIGHTLY });
    ctx.clock.advance(10);
    const second = await create(store, fence, { ...dag(`${id}.2`, [task("a")]), definition: id });
    ctx.clock.advance(10);
    const slotAt = Date.UTC(2030, 0, 2, 2);
    const slot = await create(store, fence, {
      ...dag(`${id}.s20300102T020000`, [task("a")]),
      definition: id,
      slot: { at: slotAt, covers: 1, firstCovered: slotAt },
    });
    ctx.clock.advance(10);
    const seventh = await create(store, fence, { ...dag(`${id}.7`, [task("a")]), definition: id });
    ctx.clock.advance(10);
    // Another DAG's runs are not among them, nor is the definition's id reused as a prefix.
    await create(store, fence, dag(`${id}x`, [task("a")]));

    const runs = await store.listDefinitionRuns(room, id);
    expect(runs.map((r) => r.runId)).toEqual([seventh.runId, slot.runId, second.runId, first.runId]);
    expect((await store.listDefinitionRuns(room, id, { limit: 2 })).map((r) => r.runId)).toEqual([
      seventh.runId,
      slot.runId,
    ]);
    const def = await store.getDefinition(room, id);
    expect(def).toMatchObject({ lastSlotAt: slotAt, lastRunNumber: 7, origin: { runId: first.runId } });
    // A lower number or an older slot later lowers neither.
    await create(store, fence, { ...dag(`${id}.3`, [task("a")]), definition: id });
    await create(store, fence, {
      ...dag(`${id}.s20300101T020000`, [task("a")]),
      definition: id,
      slot: { at: slotAt - 86_400_000, covers: 1, firstCovered: slotAt - 86_400_000 },
    });
    expect(await store.getDefinition(room, id)).toMatchObject({ lastRunNumber: 7, lastSlotAt: slotAt });

    const missing = ctx.uid("missing");
    const e = await store
      .createRun(cmd(fence), runInput(room, { ...dag(`${missing}.2`, [task("a")]), definition: missing }))
      .catch((x: unknown) => x);
    expect(e).toBeInstanceOf(NotFoundError);
    expect(await store.getRun(room, `${missing}.2`)).toBeNull();
    expect(await store.getDefinition(room, missing)).toBeNull();
  });

  it("lists the room's scheduled definitions only, by id", async () => {
    const { store, room, fence } = await setup();
    const b = ctx.uid("b-sched");
    const a = ctx.uid("a-sched");
    await create(store, fence, { ...dag(b, [task("x")]), schedule: NIGHTLY });
    await create(store, fence, dag(ctx.uid("plain"), [task("x")]));
    await create(store, fence, { ...dag(a, [task("x")]), schedule: { ...NIGHTLY, missed: "skip" } });
    const other = await becomeLeader(store, ctx.uid("!defs-other"));
    await create(store, other, { ...dag(ctx.uid("elsewhere"), [task("x")]), schedule: NIGHTLY });
    const listed = await store.listScheduledDefinitions(room);
    expect(listed.map((d) => d.dagId)).toEqual([a, b].sort());
    expect(listed.find((d) => d.dagId === a)?.schedule).toEqual({ ...NIGHTLY, missed: "skip" });
    expect(await store.listScheduledDefinitions(room, { limit: 1 })).toHaveLength(1);
  });

  it("finds a definition and its runs behind 1,500 newer runs of another DAG (past the old 1,000-run scan)", async () => {
    const { store, room, fence } = await setup();
    const id = ctx.uid("old");
    const first = await create(store, fence, { ...dag(id, [task("a")]), schedule: NIGHTLY });
    ctx.clock.advance(10);
    const again = await create(store, fence, { ...dag(`${id}.2`, [task("a")]), definition: id });
    ctx.clock.advance(1000);
    await ctx.capabilities.insertFinishedRuns(room, ctx.uid("busy"), 1500, ctx.clock.now());
    // What the old code looked through: the newest 1,000 runs hold none of this definition's.
    const newest = await store.listRuns(room, { limit: 1000 });
    expect(newest).toHaveLength(1000);
    expect(newest.some((r) => r.dagId === id || r.dag.definition === id)).toBe(false);

    expect((await store.listDefinitionRuns(room, id)).map((r) => r.runId)).toEqual([
      again.runId,
      first.runId,
    ]);
    expect((await store.getDefinition(room, id))?.origin?.runId).toBe(first.runId);
    expect((await store.listScheduledDefinitions(room)).map((d) => d.dagId)).toEqual([id]);
  });

  it("retention keeps a definition's first run while other runs of it remain, then both go; the definition with its last run", async () => {
    const setUp = await setup();
    const { store, room } = setUp;
    let fence = setUp.fence;
    const id = ctx.uid("kept");
    const first = await create(store, fence, dag(id, [task("a")]));
    await finishAll(store, fence);
    ctx.clock.advance(DAY - HOUR);
    fence = await becomeLeader(store, room);
    const second = await create(store, fence, { ...dag(`${id}.2`, [task("a")]), definition: id });
    await finishAll(store, fence);
    ctx.clock.advance(2 * HOUR);
    fence = await becomeLeader(store, room);
    // The first run is past the retention, the second is not: the first stays for the definition.
    expect(await pruneAll(store, fence)).toEqual({ runs: 0, definitions: 0 });
    expect((await store.getRunById(first.runId))?.status).toBe("succeeded");

    ctx.clock.advance(DAY);
    fence = await becomeLeader(store, room);
    expect(await pruneAll(store, fence)).toEqual({ runs: 2, definitions: 1 });
    expect(await store.getRunById(first.runId)).toBeNull();
    expect(await store.getRunById(second.runId)).toBeNull();
    expect(await store.getDefinition(room, id)).toBeNull();
    // The id is free again: publishing it creates a new definition.
    const reborn = await create(store, fence, dag(id, [task("other")]));
    expect((await store.getDefinition(room, id))?.origin?.runId).toBe(reborn.runId);
  });

  it("retention keeps an approved scheduled definition with no other runs; a rejected one goes", async () => {
    const setUp = await setup();
    const { store, room } = setUp;
    let fence = setUp.fence;
    const approved = ctx.uid("approved");
    const rejected = ctx.uid("rejected");
    await create(store, fence, { ...dag(approved, [task("a")]), schedule: NIGHTLY });
    await finishAll(store, fence);
    await create(store, fence, { ...dag(rejected, [task("a")]), schedule: NIGHTLY }, true);
    await store.rejectRun(cmd(fence), room, rejected, "@bob:example.org");
    ctx.clock.advance(2 * DAY);
    fence = await becomeLeader(store, room);
    expect(await pruneAll(store, fence)).toEqual({ runs: 1, definitions: 1 });
    expect((await store.getDefinition(room, approved))?.origin?.status).toBe("succeeded");
    expect(await store.getDefinition(room, rejected)).toBeNull();
  });

  it("the migration back-fills definitions from the runs an older dagbot wrote", async () => {
    const room = ctx.uid("!legacy");
    const at = ctx.clock.now();
    const slotAt = Date.UTC(2030, 0, 2, 2);
    const legacy = (dagId: string, d: ParsedDag, extra: Partial<LegacyRun> = {}): LegacyRun => ({
      runId: ctx.uid("run"),
      roomId: room,
      dagId,
      hash: `hash-${dagId}`,
      status: "succeeded",
      publisher: "@alice:example.org",
      confirmedBy: "@bob:example.org",
      createdAt: at,
      dag: d,
      ...extra,
    });
    const nightly = legacy(
      "nightly",
      { ...dag("nightly", [task("a")]), schedule: NIGHTLY, values: { who: "ann" } },
      { createdAt: at - 10 },
    );
    const runs: LegacyRun[] = [
      nightly,
      legacy("nightly.2", { ...dag("nightly.2", [task("a")]), definition: "nightly" }),
      legacy("nightly.12", { ...dag("nightly.12", [task("a")]), definition: "nightly" }),
      legacy("nightly.s20300102T020000", {
        ...dag("nightly.s20300102T020000", [task("a")]),
        definition: "nightly",
        slot: { at: slotAt, covers: 1, firstCovered: slotAt },
      }),
      legacy("nightly.2.retry1", { ...dag("nightly.2.retry1", [task("a")]), definition: "nightly" }),
      // Runs of a definition whose first run was already pruned.
      legacy("gone.3", { ...dag("gone.3", [task("a")]), definition: "gone", values: { x: "1" } }),
      legacy("gone.4", { ...dag("gone.4", [task("a")]), definition: "gone" }, { createdAt: at + 5 }),
      legacy("plain", dag("plain", [task("a")])),
    ];
    const { open } = await ctx.capabilities.legacyStore(4, runs);
    const store = await open({ clock: ctx.clock.now, migrate: true });
    try {
      const def = await store.getDefinition(room, "nightly");
      expect(def).toMatchObject({
        hash: "hash-nightly",
        schedule: NIGHTLY,
        lastSlotAt: slotAt,
        lastRunNumber: 12,
        createdAt: at - 10,
        origin: { runId: nightly.runId, status: "succeeded", confirmedBy: "@bob:example.org" },
      });
      expect(def?.dag.values).toBeUndefined();
      expect((await store.listDefinitionRuns(room, "nightly")).map((r) => r.dagId).sort()).toEqual(
        ["nightly", "nightly.12", "nightly.2", "nightly.2.retry1", "nightly.s20300102T020000"].sort(),
      );
      expect((await store.listScheduledDefinitions(room)).map((d) => d.dagId)).toEqual(["nightly"]);

      const gone = await store.getDefinition(room, "gone");
      expect(gone).toMatchObject({ hash: "", origin: null, schedule: null, lastRunNumber: 4 });
      expect(gone?.dag).toEqual(dag("gone", [task("a")]));
      expect((await store.listDefinitionRuns(room, "gone")).map((r) => r.dagId)).toEqual([
        "gone.4",
        "gone.3",
      ]);
      expect(await store.getDefinition(room, "plain")).toMatchObject({
        hash: "hash-plain",
        lastRunNumber: 1,
      });

      // Publishing the id of a definition whose content is unknown adopts it; its runs stay its own.
      const fence = await becomeLeader(store, room);
      const adopted = await store.createRun(cmd(fence), runInput(room, dag("gone", [task("b")])));
      expect(adopted.kind).toBe("created");
      const after = await store.getDefinition(room, "gone");
      expect(after?.hash).toBe(runInput(room, dag("gone", [task("b")])).hash);
      expect(after?.origin?.runId).toBe(adopted.kind === "created" ? adopted.run.runId : "");
      expect(after?.lastRunNumber).toBe(4);
      expect(await store.listDefinitionRuns(room, "gone")).toHaveLength(3);
    } finally {
      await store.close();
    }
  });
}
