/**
 * A schedule can be stopped, as an operator does it: a per-second schedule on two `dagbot node`
 * processes on a SQLite file is paused with `dagbot schedule pause` and fires no more slots, resumed
 * and fires again from the resume on (never a slot of the pause), deleted and fires no more, also
 * after the whole fleet restarts. Counted from the store and from the action's own record of each
 * run it ran. The same semantics on every store, slot by slot under the test clock, are the store
 * contract's (test/contracts/sections/schedules.ts and schedule-loop.ts); this is their one
 * real-process run.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import type { RunRecord, Store } from "../../src/ports/store.js";
import type { NodeProcess, Target } from "../support/engine-cluster.js";
import {
  ROOM,
  cli,
  createTarget,
  killAll,
  requireBuild,
  startNode,
  writeDag,
  writeNodeConfig,
} from "../support/engine-cluster.js";
import { waitFor } from "../support/store-wait.js";

beforeAll(() => requireBuild());

const slotRuns = async (store: Store): Promise<RunRecord[]> =>
  (await store.listDefinitionRuns(ROOM, "tick", { limit: 10_000 }))
    .filter((r) => r.dag.slot !== undefined)
    .sort((a, b) => a.dag.slot!.at - b.dag.slot!.at);

describe("schedule verbs on sqlite: two node processes", () => {
  const kind = "sqlite";
  let target: Target | null = null;
  let store: Store | null = null;
  const nodes: NodeProcess[] = [];

  afterEach(async (context) => {
    await killAll(nodes);
    nodes.length = 0;
    await store?.close();
    await target?.cleanup(context.task.result?.state === "fail");
  });

  it("pause: no more slots; resume: slots again from the resume on; delete: none, also after a restart", async () => {
    target = await createTarget(kind, `schedule-verbs-${kind}`);
    const records = join(target.dir, "records.txt");
    const script = "require('fs').appendFileSync(process.argv[1], process.env.DAGBOT_RUN_ID + '\\n')";
    const extra = [
      "[actions.stamp]",
      `argv = [${JSON.stringify(process.execPath)}, "-e", ${JSON.stringify(script)}, ${JSON.stringify(records)}]`,
      'timeout = "10s"',
      'kill_grace = "300ms"',
      "",
    ].join("\n");
    const configs = ["node-a", "node-b"].map((nodeId) => {
      const config = writeNodeConfig(target!, { nodeId, extra });
      nodes.push(startNode(target!, config, nodeId));
      return config;
    });
    store = await target.open();
    const s = store;
    const dag = writeDag(target, {
      id: "tick",
      schedule: "* * * * * *",
      missed: "run_once",
      tasks: [{ id: "stamp", action: "stamp" }],
    });
    await waitFor(
      "two heartbeats",
      () => s.listNodes(),
      (n) => n.length >= 2,
      {
        timeoutMs: 15_000,
        intervalMs: 50,
      },
    );
    const run = async (...args: string[]) => {
      const r = await cli([...args, "--config", configs[0]!], { cwd: target!.dir });
      expect(r.code, `${args.join(" ")}: ${r.stdout}${r.stderr}`).toBe(0);
      return r.stdout;
    };
    await run("submit", dag, "--confirm");
    await waitFor(
      "3 slots fired",
      () => slotRuns(s),
      (r) => r.length >= 3,
      { timeoutMs: 30_000, intervalMs: 100 },
    );

    const paused = JSON.parse(await run("schedule", "pause", "tick", "for", "the", "test", "--json"));
    expect(paused).toMatchObject({ ok: true, answer: "schedule-changed", result: "done", state: "paused" });
    const listed = JSON.parse(await run("schedules", "--json"));
    expect(listed.schedules).toEqual([
      expect.objectContaining({ dagId: "tick", state: "paused", reason: "for the test", next: null }),
    ]);
    const pausedAt = (await s.getDefinition(ROOM, "tick"))!.scheduleState.at!;
    // Three slots pass on the store's clock: none of them fires.
    await waitFor(
      "3 slots to pass",
      () => s.now(),
      (now) => now > pausedAt + 3_000,
      {
        timeoutMs: 15_000,
        intervalMs: 200,
      },
    );
    const duringPause = await slotRuns(s);
    expect(duringPause.filter((r) => r.dag.slot!.at > pausedAt)).toEqual([]);

    expect(JSON.parse(await run("schedule", "resume", "tick", "--json"))).toMatchObject({ state: "active" });
    const resumedAt = (await s.getDefinition(ROOM, "tick"))!.scheduleState.at!;
    await waitFor(
      "3 slots after the resume",
      () => slotRuns(s),
      (r) => r.filter((x) => x.dag.slot!.at > resumedAt).length >= 3,
      { timeoutMs: 30_000, intervalMs: 100 },
    );
    const afterResume = await slotRuns(s);
    // Nothing stands for the pause: no run of a slot inside it, and no catch-up covering it.
    expect(afterResume.filter((r) => r.dag.slot!.at > pausedAt && r.dag.slot!.at <= resumedAt)).toEqual([]);
    expect(afterResume.filter((r) => r.dag.slot!.covers > 1)).toEqual([]);

    expect(JSON.parse(await run("schedule", "delete", "tick", "--json"))).toMatchObject({ state: "deleted" });
    const deletedAt = (await s.getDefinition(ROOM, "tick"))!.scheduleState.at!;
    const refused = await cli(["schedule", "resume", "tick", "--config", configs[0]!], { cwd: target.dir });
    expect(refused.code).toBe(1);
    expect(refused.stdout).toContain("cannot be paused or resumed");
    await waitFor(
      "2 slots to pass",
      () => s.now(),
      (now) => now > deletedAt + 2_000,
      {
        timeoutMs: 15_000,
        intervalMs: 200,
      },
    );
    // The whole fleet restarts: a deleted schedule stays deleted.
    await killAll(nodes);
    nodes.length = 0;
    ["node-a", "node-b"].forEach((nodeId, i) => nodes.push(startNode(target!, configs[i]!, nodeId)));
    const restartedAt = await s.now();
    const term = (await s.getLease(ROOM))?.term ?? 0;
    await waitFor(
      "a new leader",
      () => s.getLease(ROOM),
      (l) => l !== null && l.holder !== null && l.expiresAt > l.now && l.term > term,
      { timeoutMs: 30_000, intervalMs: 100 },
    );
    await waitFor(
      "2 slots to pass",
      () => s.now(),
      (now) => now > restartedAt + 2_000,
      {
        timeoutMs: 15_000,
        intervalMs: 200,
      },
    );
    const all = await slotRuns(s);
    expect(all.filter((r) => r.dag.slot!.at > deletedAt)).toEqual([]);

    // The action's own record: every run it ran is one of the DAG's, none of a slot in the pause or after the delete.
    const ran = existsSync(records)
      ? readFileSync(records, "utf8")
          .trim()
          .split("\n")
          .filter((x) => x !== "")
      : [];
    const known = new Map(
      (await s.listDefinitionRuns(ROOM, "tick", { limit: 10_000 })).map((r) => [r.runId, r]),
    );
    expect(ran.length).toBeGreaterThan(3);
    expect(ran.filter((id) => !known.has(id))).toEqual([]);
    const ranWhenStopped = ran.filter((id) => {
      const at = known.get(id)?.dag.slot?.at;
      return at !== undefined && ((at > pausedAt && at <= resumedAt) || at > deletedAt);
    });
    expect(ranWhenStopped).toEqual([]);
    const events = (await s.readEvents(ROOM, 0)).filter((e) => e.kind.startsWith("schedule."));
    expect(
      events.filter((e) => e.kind !== "schedule.fired" && e.kind !== "schedule.skipped").map((e) => e.kind),
    ).toEqual(["schedule.paused", "schedule.resumed", "schedule.deleted"]);
    console.log(
      `[${kind}] ${all.length} slot runs; ${ran.length} ran; paused ${resumedAt - pausedAt} ms, none fired then`,
    );
  }, 200_000);
});
