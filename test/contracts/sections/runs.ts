/**
 * Store contract: DAG runs. Creation deduplicated into created / exists / conflict and
 * all-or-nothing (a failure injected through the database mid-way leaves no run, no task, no log
 * entry and the inbox row unhandled); confirm, reject and cancel with their already / wrong-status /
 * not-found paths; the command's inbox row marked handled in the same transaction.
 */
import { expect, it } from "vitest";
import type { ParsedDag } from "../../../src/domain/model.js";
import { ConflictError, NotFoundError, StoreError } from "../../../src/ports/errors.js";
import type { RunPageQuery, RunPosition, RunRecord } from "../../../src/ports/store.js";
import { MAX_RUN_PAGE } from "../../../src/ports/store.js";
import {
  becomeLeader,
  chainDag,
  cmd,
  dag,
  ok,
  offer,
  publishRunning,
  runInput,
  session,
  task,
} from "../../support/store-fixtures.js";
import type { ContractContext } from "../context.js";

export function runsSection(ctx: ContractContext): void {
  const setup = async () => {
    const store = await ctx.store();
    const room = ctx.uid("!runs");
    const fence = await becomeLeader(store, room);
    return { store, room, fence };
  };
  const inboxRow = async (store: Awaited<ReturnType<typeof setup>>["store"], roomId: string) => {
    const eventId = ctx.uid("$cmd");
    await store.insertInboxEvent({
      eventId,
      roomId,
      sender: "@a:x",
      originServerTs: 1,
      content: {},
      seenBy: "n",
    });
    return eventId;
  };

  it("creates a run and its tasks, blocked, in document order, with every field stored", async () => {
    const { store, room, fence } = await setup();
    const d = dag(
      ctx.uid("backup"),
      [
        task("dump", { args: { db: "app", n: 3, dry: false }, timeoutMs: 5000, queueTimeoutMs: 7000 }),
        task("upload", {
          needs: ["dump"],
          on: { labels: ["storage"], node: "n9" },
          retries: 2,
          retryBackoffMs: 250,
          concurrencyKey: "s3",
          priority: 10,
        }),
      ],
      { description: "nightly", maxParallel: 3 },
    );
    const created = await store.createRun(
      cmd(fence),
      runInput(room, d, { hash: "h1", publishEventId: "$pub" }),
    );
    expect(created.kind).toBe("created");
    if (created.kind !== "created") return;
    const run = created.run;
    expect(run).toMatchObject({
      roomId: room,
      dagId: d.id,
      hash: "h1",
      status: "running",
      description: "nightly",
      maxParallel: 3,
      publisher: "@alice:example.org",
      publishEventId: "$pub",
      confirmedBy: null,
      confirmDeadline: null,
      createdAt: ctx.clock.now(),
      dag: d,
    });
    expect(await store.getRun(room, d.id)).toEqual(run);
    expect(await store.getRunById(run.runId)).toEqual(run);
    const tasks = await store.listTasks(run.runId);
    expect(tasks.map((t) => [t.taskId, t.status, t.version, t.attempt, t.maxAttempts])).toEqual([
      ["dump", "blocked", 1, 1, 1],
      ["upload", "blocked", 1, 1, 3],
    ]);
    expect(tasks[0]!.seq).toBeLessThan(tasks[1]!.seq);
    expect(tasks[0]).toMatchObject({
      args: { db: "app", n: 3, dry: false },
      timeoutMs: 5000,
      queueTimeoutMs: 7000,
    });
    expect(tasks[1]).toMatchObject({
      needs: ["dump"],
      on: { labels: ["storage"], node: "n9" },
      retryBackoffMs: 250,
      concurrencyKey: "s3",
      priority: 10,
      executor: null,
      output: null,
    });
    expect(await store.getTask(run.runId, "upload")).toEqual(tasks[1]);
    expect(await store.getTask(run.runId, "nope")).toBeNull();
    expect(await store.getRun(room, "nope")).toBeNull();
    expect(await store.getRunById("nope")).toBeNull();
  });

  it("a run that needs confirmation starts pending with a confirmation deadline", async () => {
    const { store, room, fence } = await setup();
    const r = await store.createRun(
      cmd(fence),
      runInput(room, chainDag(ctx.uid("d"), 2), { needsConfirmation: true, confirmTimeoutMs: 90_000 }),
    );
    expect(r.kind === "created" && r.run).toMatchObject({
      status: "pending",
      confirmDeadline: ctx.clock.now() + 90_000,
    });
  });

  it("same dag id: same hash is 'exists', other content is 'conflict'; neither writes anything", async () => {
    const { store, room, fence } = await setup();
    const d = chainDag(ctx.uid("d"), 3);
    const first = await store.createRun(cmd(fence), runInput(room, d, { hash: "same" }));
    if (first.kind !== "created") throw new Error(first.kind);
    const events = await store.readEvents(room, 0);
    const again = await store.createRun(cmd(fence), runInput(room, d, { hash: "same" }));
    expect(again).toEqual({ kind: "exists", run: first.run });
    const other = await store.createRun(cmd(fence), runInput(room, chainDag(d.id, 5), { hash: "other" }));
    expect(other).toEqual({ kind: "conflict", existing: first.run });
    expect(await store.listTasks(first.run.runId)).toHaveLength(3);
    expect(await store.listRuns(room)).toHaveLength(1);
    expect(await store.readEvents(room, 0)).toEqual(events);
    // Another room may use the same dag id.
    const elsewhere = await becomeLeader(store, ctx.uid("!runs"));
    expect((await store.createRun(cmd(elsewhere), runInput(elsewhere.roomId, d))).kind).toBe("created");
  });

  it("is all-or-nothing: a failure inserting the 4th task leaves no run, no task, no log entry, inbox unhandled", async () => {
    const { store, room, fence } = await setup();
    const eventId = await inboxRow(store, room);
    const poison = ctx.uid("poison");
    const d = dag(ctx.uid("d"), [task("a"), task("b"), task("c"), task(poison), task("e")]);
    const events = await store.readEvents(room, 0);
    const undo = await ctx.capabilities.injectTaskInsertFailure(poison);
    try {
      const e = await store.createRun(cmd(fence, eventId), runInput(room, d)).catch((x: unknown) => x);
      expect(e).toBeInstanceOf(StoreError);
      expect(e).not.toBeInstanceOf(ConflictError);
    } finally {
      await undo();
    }
    expect(await store.getRun(room, d.id)).toBeNull();
    expect(await store.listRuns(room)).toEqual([]);
    expect(await store.readEvents(room, 0)).toEqual(events);
    expect((await store.getInboxEvent(eventId))?.status).toBe("new");
    // The same publish succeeds once the fault is gone: nothing half-written stood in its way.
    const r = await store.createRun(cmd(fence, eventId), runInput(room, d));
    expect(r.kind).toBe("created");
    if (r.kind === "created") expect(await store.listTasks(r.run.runId)).toHaveLength(5);
  });

  it("leaves the row new when the answer is null (a publish that met other content stored nothing)", async () => {
    const { store, room, fence } = await setup();
    const d = chainDag(ctx.uid("d"), 2);
    await store.createRun(cmd(fence), runInput(room, d));
    const eventId = await inboxRow(store, room);
    const seen: string[] = [];
    const other = { ...runInput(room, chainDag(d.id, 3)), hash: "other" };
    const r = await store.createRun(
      {
        fence,
        inboxEventId: eventId,
        answer: (result) => {
          seen.push(result.kind);
          return null;
        },
      },
      other,
    );
    expect(r.kind).toBe("conflict");
    expect(seen).toEqual(["conflict"]);
    expect(await store.getInboxEvent(eventId)).toMatchObject({ status: "new", result: null });
  });

  it("marks the command's inbox row handled in the same transaction, and refuses a second handling", async () => {
    const { store, room, fence } = await setup();
    const eventId = await inboxRow(store, room);
    const d = chainDag(ctx.uid("d"), 2);
    const r = await store.createRun(cmd(fence, eventId), runInput(room, d));
    if (r.kind !== "created") throw new Error(r.kind);
    const row = await store.getInboxEvent(eventId);
    expect(row).toMatchObject({ status: "handled", handledTerm: fence.term });
    // The row keeps what the caller's answer made of the result the call returned, in the same write.
    expect(row?.result).toMatchObject({ answered: { kind: "created", run: { runId: r.run.runId } } });
    // Replayed command (e.g. a second leader): refused whole; no second run under another id.
    const d2 = chainDag(ctx.uid("d"), 2);
    await expect(store.createRun(cmd(fence, eventId), runInput(room, d2))).rejects.toBeInstanceOf(
      ConflictError,
    );
    expect(await store.getRun(room, d2.id)).toBeNull();
    await expect(store.createRun(cmd(fence, "$unknown"), runInput(room, d2))).rejects.toBeInstanceOf(
      NotFoundError,
    );
    expect(await store.getRun(room, d2.id)).toBeNull();
  });

  it("refuses to create a run in a room the fence does not cover", async () => {
    const { store, fence } = await setup();
    const elsewhere = ctx.uid("!elsewhere");
    const d = chainDag(ctx.uid("d"), 1);
    await expect(store.createRun(cmd(fence), runInput(elsewhere, d))).rejects.toBeInstanceOf(ConflictError);
    expect(await store.getRun(elsewhere, d.id)).toBeNull();
  });

  it("confirm: pending → running once, then 'already'; rejected runs are 'wrong-status'; unknown is not found", async () => {
    const { store, room, fence } = await setup();
    const d = chainDag(ctx.uid("d"), 2);
    await store.createRun(cmd(fence), runInput(room, d, { needsConfirmation: true }));
    const eventId = await inboxRow(store, room);
    const done = await store.confirmRun(cmd(fence, eventId), room, d.id, "@bob:x");
    expect(done.kind).toBe("done");
    expect(done.run).toMatchObject({ status: "running", confirmedBy: "@bob:x" });
    expect(await store.getInboxEvent(eventId)).toMatchObject({
      status: "handled",
      result: { answered: { kind: "done" } },
    });
    const again = await store.confirmRun(cmd(fence), room, d.id, "@carol:x");
    expect(again.kind).toBe("already");
    expect(again.run.confirmedBy).toBe("@bob:x");
    await expect(store.confirmRun(cmd(fence), room, "nope", "@bob:x")).rejects.toBeInstanceOf(NotFoundError);

    const d2 = chainDag(ctx.uid("d"), 1);
    await store.createRun(cmd(fence), runInput(room, d2, { needsConfirmation: true }));
    expect((await store.rejectRun(cmd(fence), room, d2.id, "@bob:x")).kind).toBe("done");
    expect((await store.confirmRun(cmd(fence), room, d2.id, "@bob:x")).kind).toBe("wrong-status");
    expect((await store.getRun(room, d2.id))?.status).toBe("rejected");
  });

  it("confirm past the confirmation deadline, before the reaper came: judged on the store's clock as expired, nothing starts", async () => {
    const { store, room, fence } = await setup();
    const d = chainDag(ctx.uid("d"), 1);
    await store.createRun(
      cmd(fence),
      runInput(room, d, { needsConfirmation: true, confirmTimeoutMs: 5_000 }),
    );
    ctx.clock.advance(5_000);
    const eventId = await inboxRow(store, room);
    const late = await store.confirmRun(cmd(fence, eventId), room, d.id, "@bob:x");
    expect(late.kind).toBe("wrong-status");
    expect(late.run).toMatchObject({ status: "expired", confirmedBy: null });
    expect(await store.getInboxEvent(eventId)).toMatchObject({
      result: { answered: { kind: "wrong-status", run: { status: "expired" } } },
    });
    const stored = (await store.getRun(room, d.id))!;
    expect(stored).toMatchObject({ status: "pending", confirmedBy: null });
    expect((await store.listTasks(stored.runId)).map((t) => t.status)).toEqual(["blocked"]);
    await store.reap(fence);
    expect((await store.getRun(room, d.id))?.status).toBe("expired");
  });

  it("reject: pending → rejected with its tasks canceled, then 'already'; a running run is 'wrong-status'", async () => {
    const { store, room, fence } = await setup();
    const d = chainDag(ctx.uid("d"), 3);
    await store.createRun(cmd(fence), runInput(room, d, { needsConfirmation: true }));
    const done = await store.rejectRun(cmd(fence), room, d.id, "@bob:x");
    expect(done.kind).toBe("done");
    expect(done.run.status).toBe("rejected");
    expect((await store.listTasks(done.run.runId)).map((t) => t.status)).toEqual([
      "canceled",
      "canceled",
      "canceled",
    ]);
    expect((await store.rejectRun(cmd(fence), room, d.id, "@bob:x")).kind).toBe("already");
    // Who rejected it, for the words that say how it ended.
    expect(await store.runEndedBy(room, done.run.runId)).toBe("@bob:x");
    const live = await publishRunning(store, fence, chainDag(ctx.uid("d"), 1));
    expect(await store.runEndedBy(room, live.runId)).toBeNull();
    expect((await store.rejectRun(cmd(fence), room, live.dagId, "@bob:x")).kind).toBe("wrong-status");
    await expect(store.rejectRun(cmd(fence), room, "nope", "@bob:x")).rejects.toBeInstanceOf(NotFoundError);
  });

  it("cancel: unstarted tasks canceled, a running one canceling until its worker stops, then the run is canceled", async () => {
    const { store, room, fence } = await setup();
    const d = dag(ctx.uid("d"), [task("a"), task("b"), task("c", { needs: ["a"] })]);
    const run = await publishRunning(store, fence, d);
    const worker = session("w1");
    const claimed = await store.claimTask(offer(worker, [room]));
    expect(claimed?.task.taskId).toBe("a");
    const eventId = await inboxRow(store, room);

    const res = await store.cancelRun(cmd(fence, eventId), room, d.id, "@bob:x");
    expect(res.kind).toBe("done");
    expect(res.run.status).toBe("canceling");
    expect(await store.getInboxEvent(eventId)).toMatchObject({ status: "handled" });
    const statuses = Object.fromEntries((await store.listTasks(run.runId)).map((t) => [t.taskId, t.status]));
    expect(statuses).toEqual({ a: "canceling", b: "canceled", c: "canceled" });
    expect((await store.cancelRun(cmd(fence), room, d.id, "@bob:x")).kind).toBe("already");
    // Nothing decides the run while its task still runs.
    expect(await store.deriveRunOutcomes(fence)).toEqual([]);

    // The worker hears of it on renewal and reports the cancel with its original token.
    const token = claimed!.token;
    expect((await store.renewTaskLease(token, 30_000)).status).toBe("canceling");
    expect(
      await store.finishTask(token, { outcome: "canceled", exitCode: null, output: "", error: "canceled" }),
    ).toEqual({
      status: "canceled",
    });
    expect(await store.deriveRunOutcomes(fence)).toEqual([
      { runId: run.runId, dagId: d.id, from: "canceling", to: "canceled" },
    ]);
    expect((await store.getRun(room, d.id))?.status).toBe("canceled");
    expect((await store.cancelRun(cmd(fence), room, d.id, "@bob:x")).kind).toBe("already");
    // The run.canceled the worker's stop brought names nobody; the cancel that asked for it does.
    expect(await store.runEndedBy(room, run.runId)).toBe("@bob:x");
    expect(await store.runEndedBy(ctx.uid("!other"), run.runId)).toBeNull();
  });

  it("cancel with nothing running ends canceled at once; finished runs are 'wrong-status'; unknown is not found", async () => {
    const { store, room, fence } = await setup();
    const pending = chainDag(ctx.uid("d"), 2);
    await store.createRun(cmd(fence), runInput(room, pending, { needsConfirmation: true }));
    const res = await store.cancelRun(cmd(fence), room, pending.id, "@bob:x");
    expect(res).toMatchObject({ kind: "done", run: { status: "canceled" } });

    const d = chainDag(ctx.uid("d"), 1);
    const run = await publishRunning(store, fence, d);
    const claimed = await store.claimTask(offer(session("w"), [room]));
    await store.finishTask(claimed!.token, ok);
    expect(await store.deriveRunOutcomes(fence)).toEqual([
      { runId: run.runId, dagId: d.id, from: "running", to: "succeeded" },
    ]);
    expect((await store.cancelRun(cmd(fence), room, d.id, "@bob:x")).kind).toBe("wrong-status");
    await expect(store.cancelRun(cmd(fence), room, "nope", "@bob:x")).rejects.toBeInstanceOf(NotFoundError);
  });

  it("lists a room's runs newest first, filtered by status and limited", async () => {
    const { store, room, fence } = await setup();
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) {
      const d = chainDag(ctx.uid("d"), 1);
      ids.push(d.id);
      await store.createRun(cmd(fence), runInput(room, d, { needsConfirmation: i % 2 === 0 }));
      ctx.clock.advance(1);
    }
    expect((await store.listRuns(room)).map((r) => r.dagId)).toEqual([...ids].reverse());
    expect((await store.listRuns(room, { statuses: ["pending"] })).map((r) => r.dagId)).toEqual([
      ids[2],
      ids[0],
    ]);
    expect((await store.listRuns(room, { limit: 2 })).map((r) => r.dagId)).toEqual([ids[3], ids[2]]);
    expect(await store.listRuns(ctx.uid("!empty"))).toEqual([]);
  });

  it("counts the tasks of several runs by status in one call, as listTasks would", async () => {
    const { store, room, fence } = await setup();
    const a = await publishRunning(store, fence, chainDag(ctx.uid("a"), 4));
    const b = await store.createRun(
      cmd(fence),
      runInput(room, chainDag(ctx.uid("b"), 3), { needsConfirmation: true }),
    );
    if (b.kind !== "created") throw new Error(b.kind);
    const counts = await store.countTaskStatuses([a.runId, b.run.runId, "no-such-run"]);
    for (const runId of [a.runId, b.run.runId]) {
      const expected: Record<string, number> = {};
      for (const t of await store.listTasks(runId)) expected[t.status] = (expected[t.status] ?? 0) + 1;
      expect(counts.get(runId)).toEqual(expected);
    }
    expect(counts.get(a.runId)).toEqual({ queued: 1, blocked: 3 });
    expect(counts.has("no-such-run")).toBe(false);
    expect(await store.countTaskStatuses([])).toEqual(new Map());
  });

  it("pages a room's runs newest first from a position: filtered by status and definition, unmoved by runs created between pages, capped", async () => {
    const { store, room, fence } = await setup();
    const create = async (d: ParsedDag, needsConfirmation: boolean): Promise<RunRecord> => {
      const r = await store.createRun(cmd(fence), runInput(room, d, { needsConfirmation }));
      if (r.kind !== "created") throw new Error(r.kind);
      return r.run;
    };
    const a = ctx.uid("a");
    const made = [await create(dag(a, [task("t")]), false), await create(chainDag(ctx.uid("b"), 1), true)];
    ctx.clock.advance(1);
    // Two runs in the same millisecond: the order they were created in breaks the tie.
    made.push(await create({ ...dag(`${a}.2`, [task("t")]), definition: a }, true));
    made.push(await create(chainDag(ctx.uid("c"), 1), false));
    ctx.clock.advance(1);
    made.push(await create({ ...dag(`${a}.3`, [task("t")]), definition: a }, false));
    const newest = made.map((r) => r.dagId).reverse();

    const walk = async (query: RunPageQuery): Promise<string[][]> => {
      const pages: string[][] = [];
      let after: RunPosition | undefined;
      for (;;) {
        const page = await store.pageRuns(room, after === undefined ? query : { ...query, after });
        pages.push(page.runs.map((r) => r.dagId));
        if (page.next === null) return pages;
        after = page.next;
      }
    };
    expect(await walk({ limit: 2 })).toEqual([newest.slice(0, 2), newest.slice(2, 4), newest.slice(4)]);
    // A page that holds the last run says so: no next page to ask for.
    expect(await walk({ limit: 5 })).toEqual([newest]);
    expect(await walk({ limit: 1, definition: a })).toEqual([[`${a}.3`], [`${a}.2`], [a]]);
    expect((await walk({ limit: 10, statuses: ["pending"] })).flat()).toEqual([
      made[2]!.dagId,
      made[1]!.dagId,
    ]);
    expect((await walk({ limit: 2, statuses: ["pending", "running"], definition: a })).flat()).toEqual([
      `${a}.3`,
      `${a}.2`,
      a,
    ]);
    expect((await walk({ limit: 10, statuses: ["failed"] })).flat()).toEqual([]);
    expect(await walk({ limit: 3, definition: ctx.uid("none") })).toEqual([[]]);

    // Runs created after the first page was read do not shift the next one.
    const first = await store.pageRuns(room, { limit: 2 });
    ctx.clock.advance(1);
    await create(chainDag(ctx.uid("late"), 1), false);
    await create(chainDag(ctx.uid("late"), 1), true);
    const second = await store.pageRuns(room, { limit: 2, after: first.next! });
    expect(second.runs.map((r) => r.dagId)).toEqual(newest.slice(2, 4));
    expect(second.runs[0]).toEqual(made[2]);

    // However many are asked for, one read returns at most MAX_RUN_PAGE runs.
    ctx.clock.advance(1);
    await ctx.capabilities.insertFinishedRuns(room, ctx.uid("many"), MAX_RUN_PAGE + 5, ctx.clock.now());
    const big = await store.pageRuns(room, { limit: 1_000_000 });
    expect(big.runs).toHaveLength(MAX_RUN_PAGE);
    expect(big.next).not.toBeNull();
    const rest = await store.pageRuns(room, { limit: 1_000_000, after: big.next! });
    expect(rest.runs.map((r) => r.dagId).slice(-5)).toEqual(newest);
    expect(new Set([...big.runs, ...rest.runs].map((r) => r.runId)).size).toBe(MAX_RUN_PAGE + 5 + 7);
    expect(await store.pageRuns(ctx.uid("!empty"), { limit: 10 })).toEqual({ runs: [], next: null });
  });
}
