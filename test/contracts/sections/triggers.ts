/**
 * Store contract: triggers. A definition declaring `after` is fired at most once per
 * upstream run that ended: the firing's key (room, definition, upstream run) is the store's, so a
 * repeated or concurrent firing step, from any connection, starts one run; a skipped firing keeps
 * its reason; both runs' logs say what happened; a deposed leader's firing is refused.
 */
import { expect, it } from "vitest";
import { afterFiring, upstreamOutputs } from "../../../src/app/after.js";
import type { ParsedDag } from "../../../src/domain/model.js";
import { ConflictError } from "../../../src/ports/errors.js";
import type { LeaderFence, RunRecord, Store } from "../../../src/ports/store.js";
import {
  becomeLeader,
  cmd,
  dag,
  failed,
  LEASE_TTL_MS,
  offer,
  ok,
  race,
  runInput,
  session,
  task,
} from "../../support/store-fixtures.js";
import type { ContractContext } from "../context.js";

const DAY = 24 * 3_600_000;

export function triggersSection(ctx: ContractContext): void {
  const create = async (store: Store, fence: LeaderFence, d: ParsedDag): Promise<RunRecord> => {
    const r = await store.createRun(cmd(fence), runInput(fence.roomId, d));
    if (r.kind !== "created") throw new Error(`expected created, got ${r.kind}`);
    return r.run;
  };

  /** Runs every ready task of the room to `result`, then derives the runs' outcomes. */
  const finishAll = async (store: Store, fence: LeaderFence, result = ok): Promise<void> => {
    const worker = session(ctx.uid("w"));
    await store.scheduleStep(fence);
    for (
      let c = await store.claimTask(offer(worker, [fence.roomId]));
      c !== null;
      c = await store.claimTask(offer(worker, [fence.roomId]))
    )
      await store.finishTask(c.token, result);
    await store.deriveRunOutcomes(fence);
  };

  /** build, and deploy declaring `after` build (both published and finished), then one ended run of build. */
  const setup = async (status: "succeeded" | "failed" = "succeeded") => {
    const store = await ctx.store();
    const room = `!${ctx.uid("after")}:example.org`;
    const fence = await becomeLeader(store, room);
    const build = ctx.uid("build");
    const deploy = ctx.uid("deploy");
    await create(
      store,
      fence,
      dag(build, [task("a")], { params: { v: { pattern: ".*", default: "1" } }, values: { v: "1" } }),
    );
    await finishAll(store, fence);
    ctx.clock.advance(10);
    await create(
      store,
      fence,
      dag(deploy, [task("d")], {
        params: { version: { pattern: "[0-9.]+", default: "0" } },
        values: { version: "0" },
        after: { dag: build, status: ["succeeded"], params: { version: "params.v" } },
      }),
    );
    await finishAll(store, fence);
    ctx.clock.advance(10);
    const upstream = await create(
      store,
      fence,
      dag(`${build}.2`, [task("a")], {
        definition: build,
        params: { v: { pattern: ".*", default: "1" } },
        values: { v: "2.5" },
      }),
    );
    await finishAll(store, fence, status === "succeeded" ? ok : failed);
    const def = (await store.getDefinition(room, deploy))!;
    return { store, room, fence, build, deploy, def, upstream: (await store.getRunById(upstream.runId))! };
  };

  it("finds the upstream runs that ended since the definition, once; a firing starts <id>.N with the mapped values, logged on both runs", async () => {
    const { store, room, fence, build, deploy, def, upstream } = await setup();
    expect((await store.listAfterDefinitions(room)).map((d) => d.dagId)).toEqual([deploy]);
    // build's first run ended before deploy existed: only build.2 is due.
    const due = await store.unfiredUpstreamRuns(room, deploy, build, def.createdAt);
    expect(due.map((r) => r.dagId)).toEqual([`${build}.2`]);
    expect(due[0]!.status).toBe("succeeded");

    const result = await store.recordAfterFiring(fence, afterFiring(def, upstream, null, null));
    expect(result.kind).toBe("fired");
    if (result.kind !== "fired") return;
    expect(result.run.dagId).toBe(`${deploy}.2`);
    expect(result.run.status).toBe("running");
    expect(result.run.dag.values).toEqual({ version: "2.5" });
    expect(result.run.dag.trigger).toMatchObject({
      run: `${build}.2`,
      runId: upstream.runId,
      status: "succeeded",
      depth: 1,
    });
    expect(result.firing).toMatchObject({
      upstreamDagId: `${build}.2`,
      runDagId: `${deploy}.2`,
      reason: null,
    });
    expect((await store.getDefinition(room, deploy))!.lastRunNumber).toBe(2);

    const events = (await store.readEvents(room, 0)).filter((e) => e.kind === "after.fired");
    expect(events.map((e) => e.runId).sort()).toEqual([upstream.runId, result.run.runId].sort());
    expect(await store.unfiredUpstreamRuns(room, deploy, build, def.createdAt)).toEqual([]);
    expect((await store.listAfterFirings(room)).map((f) => f.runDagId)).toEqual([`${deploy}.2`]);
  });

  it("fires exactly once per upstream run when the firing step runs twice, and when it runs concurrently on several connections", async () => {
    const { store, room, fence, deploy, def, upstream } = await setup();
    const input = afterFiring(def, upstream, null, null);
    const first = await store.recordAfterFiring(fence, input);
    const again = await store.recordAfterFiring(fence, input);
    expect([first.kind, again.kind]).toEqual(["fired", "exists"]);
    expect(again.firing.runDagId).toBe(`${deploy}.2`);

    // A second upstream run, fired by six concurrent steps on separate connections.
    ctx.clock.advance(10);
    const next = await create(
      store,
      fence,
      dag(`${upstream.dagId.replace(/\.2$/, "")}.3`, [task("a")], {
        definition: def.dag.after!.dag,
        values: { v: "3" },
        params: { v: { pattern: ".*", default: "1" } },
      }),
    );
    await finishAll(store, fence);
    const ended = (await store.getRunById(next.runId))!;
    const stores = await Promise.all(Array.from({ length: 6 }, () => ctx.open()));
    const { values, errors } = await race(
      stores.map((s) => () => s.recordAfterFiring(fence, afterFiring(def, ended, null, null))),
    );
    expect(errors).toEqual([]);
    expect(values.map((v) => v.kind).sort()).toEqual([
      "exists",
      "exists",
      "exists",
      "exists",
      "exists",
      "fired",
    ]);
    const runs = await store.listDefinitionRuns(room, deploy);
    expect(runs.map((r) => r.dagId).sort()).toEqual([deploy, `${deploy}.2`, `${deploy}.3`].sort());
    const fired = (await store.readEvents(room, 0)).filter(
      (e) => e.kind === "after.fired" && e.runId === ended.runId,
    );
    expect(fired).toHaveLength(1);
  });

  it("a firing passes over a name another definition's run holds: `<id>.2` published as a DAG of its own", async () => {
    const { store, room, fence, deploy, def, upstream } = await setup();
    // Its own definition (no `definition` field), with the name the firing would pick next.
    await create(store, fence, dag(`${deploy}.2`, [task("x")]));
    const result = await store.recordAfterFiring(fence, afterFiring(def, upstream, null, null));
    expect(result.kind).toBe("fired");
    if (result.kind !== "fired") return;
    expect(result.run.dagId).toBe(`${deploy}.3`);
    expect(result.firing.runDagId).toBe(`${deploy}.3`);
    expect((await store.getDefinition(room, deploy))!.lastRunNumber).toBe(3);
    expect((await store.getRun(room, `${deploy}.2`))!.dag.definition).toBeUndefined();
  });

  it("a skipped firing records its reason on the upstream run and starts nothing, once", async () => {
    const { store, room, fence, build, deploy, def, upstream } = await setup("failed");
    expect(upstream.status).toBe("failed");
    const input = afterFiring(def, upstream, null, null);
    expect(input.fire).toBeNull();
    const result = await store.recordAfterFiring(fence, input);
    expect(result.kind).toBe("skipped");
    expect(result.firing.reason).toBe(`${build}.2 failed; ${deploy} runs after ${build} succeeded`);
    expect((await store.recordAfterFiring(fence, input)).kind).toBe("exists");
    const skipped = (await store.readEvents(room, 0)).filter((e) => e.kind === "after.skipped");
    expect(skipped.map((e) => [e.runId, e.data?.["reason"]])).toEqual([
      [upstream.runId, result.firing.reason],
    ]);
    expect((await store.listDefinitionRuns(room, deploy)).map((r) => r.dagId)).toEqual([deploy]);
    expect(await store.unfiredUpstreamRuns(room, deploy, build, def.createdAt)).toEqual([]);
  });

  it("maps an output the upstream run's task published (kept with its success) to a parameter, checked against its pattern", async () => {
    const store = await ctx.store();
    const room = `!${ctx.uid("after")}:example.org`;
    const fence = await becomeLeader(store, room);
    const build = ctx.uid("build");
    const deploy = ctx.uid("deploy");
    await create(store, fence, dag(build, [task("pack", { outputs: { version: "[0-9a-z.]+" } })]));
    await finishAll(store, fence, { ...ok, outputs: { version: "1.0" } });
    ctx.clock.advance(10);
    await create(
      store,
      fence,
      dag(deploy, [task("d")], {
        params: { version: { pattern: "[0-9.]+", default: "0" } },
        values: { version: "0" },
        after: { dag: build, status: ["finished"], params: { version: "tasks.pack.outputs.version" } },
      }),
    );
    await finishAll(store, fence);
    const def = (await store.getDefinition(room, deploy))!;
    const runOf = async (n: number, version: string): Promise<RunRecord> => {
      ctx.clock.advance(10);
      const r = await create(
        store,
        fence,
        dag(`${build}.${n}`, [task("pack", { outputs: { version: "[0-9a-z.]+" } })], { definition: build }),
      );
      await finishAll(store, fence, { ...ok, outputs: { version } });
      return (await store.getRunById(r.runId))!;
    };
    const good = await runOf(2, "2.5");
    const outputs = await upstreamOutputs(store, good);
    expect(outputs?.get("pack")).toEqual({ version: "2.5" });
    const fired = await store.recordAfterFiring(fence, afterFiring(def, good, outputs, null));
    expect(fired.kind === "fired" ? fired.run.dag.values : null).toEqual({ version: "2.5" });
    // A value this DAG's pattern refuses: the firing is skipped, saying so.
    const bad = await runOf(3, "2.5x");
    const skipped = await store.recordAfterFiring(
      fence,
      afterFiring(def, bad, await upstreamOutputs(store, bad), null),
    );
    expect(skipped.kind).toBe("skipped");
    expect(skipped.firing.reason).toMatch(/parameter "version": "2\.5x" does not match its pattern/);
    expect((await store.listDefinitionRuns(room, deploy)).map((r) => r.dagId).sort()).toEqual(
      [deploy, `${deploy}.2`].sort(),
    );
  });

  it("retention takes a pruned upstream run's firings with it; the fired run stays", async () => {
    const { store, room, fence, deploy, def, upstream } = await setup();
    const fired = await store.recordAfterFiring(fence, afterFiring(def, upstream, null, null));
    expect(fired.kind).toBe("fired");
    ctx.clock.advance(2 * DAY);
    const kept = await becomeLeader(store, room, "keeper");
    const pruned = await store.pruneBatch(kept, {
      olderThanMs: DAY,
      nodesOlderThanMs: DAY,
      keysOlderThanMs: DAY,
      runs: 50,
      rows: 500,
    });
    expect(pruned.runs).toBeGreaterThanOrEqual(1);
    expect(await store.getRunById(upstream.runId)).toBeNull();
    expect(await store.listAfterFirings(room)).toEqual([]);
    expect((await store.getRun(room, `${deploy}.2`))?.status).toBe("running");
  });

  it("refuses a deposed leader's firing and writes nothing; the next leader fires it once", async () => {
    const { store, room, fence, deploy, def, upstream } = await setup();
    ctx.clock.advance(LEASE_TTL_MS + 1);
    const next = await becomeLeader(store, room, "other");
    await expect(
      store.recordAfterFiring(fence, afterFiring(def, upstream, null, null)),
    ).rejects.toBeInstanceOf(ConflictError);
    expect(await store.listAfterFirings(room)).toEqual([]);
    expect((await store.recordAfterFiring(next, afterFiring(def, upstream, null, null))).kind).toBe("fired");
    expect((await store.listDefinitionRuns(room, deploy)).map((r) => r.dagId).sort()).toEqual(
      [deploy, `${deploy}.2`].sort(),
    );
  });
}
