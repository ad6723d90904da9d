// A per-second schedule on a real fleet of three `dagbot node` processes (SQLite file, PostgreSQL):
// the leader fires each slot into a run whose id names the slot; kill -9 of the leader mid-schedule,
// then of the whole fleet and a restart, and no leader fires a slot twice nor (missed = "run_once")
// loses one: every slot is a run or inside the one catch-up run that stands for the missed ones.
// Counted from the store and from the action's own record of each run it ran.
import { readFileSync, existsSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import type { RunRecord, Store } from "../../src/ports/store.js";
import type { NodeProcess, Target } from "../support/engine-cluster.js";
import {
  ROOM,
  allEvents,
  cli,
  createTarget,
  killAll,
  requireBuild,
  startNode,
  termRegressions,
  writeDag,
  writeNodeConfig,
} from "../support/engine-cluster.js";
import { waitFor } from "../support/store-wait.js";

beforeAll(() => requireBuild());

const slotRuns = async (store: Store): Promise<RunRecord[]> =>
  (await store.listRuns(ROOM, { limit: 10_000 }))
    .filter((r) => r.dag.definition === "tick" && r.dag.slot !== undefined)
    .sort((a, b) => a.dag.slot!.at - b.dag.slot!.at);

// missed = skip across a leader change, and run_once's one catch-up, slot by slot on every store:
// the store contract (test/contracts/sections/schedule-loop.ts). Here: real processes, kill -9.
describe.each([
  ["sqlite", "run_once"],
  ["postgres", "run_once"],
] as const)("schedules on %s (missed = %s): a fleet of 3", (kind, missed) => {
  let target: Target | null = null;
  let store: Store | null = null;
  const nodes: NodeProcess[] = [];

  afterEach(async (context) => {
    await killAll(nodes);
    nodes.length = 0;
    await store?.close();
    await target?.cleanup(context.task.result?.state === "fail");
  });

  it("kill -9 of the leader, then of the fleet and a restart: no slot fired twice, none lost", async () => {
    target = await createTarget(kind, `schedules-${kind}`);
    const records = join(target.dir, "records.txt");
    const script = "require('fs').appendFileSync(process.argv[1], process.env.DAGBOT_RUN_ID + '\\n')";
    const extra = [
      "[actions.stamp]",
      `argv = [${JSON.stringify(process.execPath)}, "-e", ${JSON.stringify(script)}, ${JSON.stringify(records)}]`,
      'timeout = "10s"',
      'kill_grace = "300ms"',
      "",
    ].join("\n");
    const configs = ["node-a", "node-b", "node-c"].map((nodeId) => {
      // A long lease: the next leader takes over seconds after the kill, so slots are missed.
      const config = writeNodeConfig(target!, { nodeId, extra, ttl: "5s", renewEvery: "1s" });
      nodes.push(startNode(target!, config, nodeId));
      return config;
    });
    store = await target.open();
    const s = store;
    const dag = writeDag(target, {
      id: "tick",
      schedule: "* * * * * *",
      missed,
      // The action's records count slot runs (each once): a lost node's attempt is not run again.
      tasks: [{ id: "stamp", action: "stamp", rerun_if_lost: false }],
    });
    // submit refuses at once (exit 3) while no node of the room has a heartbeat yet.
    await waitFor(
      "three heartbeats",
      () => s.listNodes(),
      (n) => n.length >= 3,
      { timeoutMs: 15_000, intervalMs: 50 },
    );
    const submitted = await cli(["submit", dag, "--confirm", "--config", configs[0]!], { cwd: target.dir });
    expect(submitted.code, submitted.stderr).toBe(0);

    await waitFor(
      "4 slots fired",
      () => slotRuns(s),
      (r) => r.length >= 4,
      { timeoutMs: 30_000, intervalMs: 100 },
    );
    const lease = await s.getLease(ROOM);
    const leader = lease!.holder!.nodeId;
    const victim = nodes.find((n) => n.nodeId === leader)!;
    victim.kill("SIGKILL");
    expect((await victim.exited).signal).toBe("SIGKILL");
    const killedAt = Date.now();
    await waitFor(
      "a new leader",
      async () =>
        (await allEvents(s)).find((e) => e.kind === "lease.acquired" && (e.term ?? 0) > lease!.term),
      (e) => e !== undefined,
      { timeoutMs: 30_000, intervalMs: 50 },
    );
    await waitFor(
      "4 slots fired by the new leader",
      () => slotRuns(s),
      (r) => r.filter((x) => x.dag.slot!.at > killedAt + 1_000).length >= 4,
      { timeoutMs: 30_000, intervalMs: 100 },
    );
    // Then the whole fleet dies (kill -9) and restarts 3 s later: the slots in between are missed too.
    await killAll(nodes);
    const downAt = Date.now();
    await new Promise((done) => setTimeout(done, 3_000));
    nodes.length = 0;
    ["node-a", "node-b", "node-c"].forEach((nodeId, i) =>
      nodes.push(startNode(target!, configs[i]!, nodeId)),
    );
    await waitFor(
      "3 slots fired after the restart",
      () => slotRuns(s),
      (r) => r.filter((x) => x.dag.slot!.at > downAt + 4_000).length >= 3,
      { timeoutMs: 40_000, intervalMs: 100 },
    );
    const runs = await slotRuns(s);
    // Let the snapshot's runs end (the schedule goes on firing newer ones meanwhile).
    await waitFor(
      "the snapshot's runs ended",
      () => Promise.all(runs.map((r) => s.getRunById(r.runId))),
      (rs) => rs.every((r) => r !== null && r.status !== "running" && r.status !== "pending"),
      { timeoutMs: 30_000, intervalMs: 200 },
    );

    // No slot twice: each slot time once, and each run id is its slot's.
    const ats = runs.map((r) => r.dag.slot!.at);
    expect(new Set(ats).size).toBe(ats.length);
    const gaps: string[] = [];
    for (let i = 1; i < runs.length; i++) {
      const slot = runs[i]!.dag.slot!;
      if (
        slot.firstCovered !== ats[i - 1]! + 1_000 ||
        slot.at - slot.firstCovered !== (slot.covers - 1) * 1_000
      )
        gaps.push(
          `${runs[i]!.dagId}: covers ${slot.covers} from ${slot.firstCovered}, previous ${ats[i - 1]}`,
        );
    }
    const catchUps = runs.filter((r) => r.dag.slot!.covers > 1);
    // None lost: each run starts where the previous one's slot left off (a catch-up covers the gap
    // of the leader change and the one of the restart).
    expect(gaps).toEqual([]);
    expect(catchUps.length).toBeGreaterThanOrEqual(2);
    console.log(
      `[${kind}] ${runs.length} slot runs, ${ats.at(-1)! - ats[0]! + 1_000} ms of slots; catch-up runs: ${catchUps
        .map((r) => `${r.dagId} covers ${r.dag.slot!.covers}`)
        .join(", ")}; gaps: ${gaps.length}`,
    );

    // The action's own record: every run it ran, once; every succeeded slot run is there exactly once.
    const ran = existsSync(records) ? readFileSync(records, "utf8").trim().split("\n") : [];
    const seen = new Map<string, number>();
    for (const id of ran) seen.set(id, (seen.get(id) ?? 0) + 1);
    expect([...seen.entries()].filter(([, n]) => n > 1)).toEqual([]);
    const ended = await Promise.all(runs.map((r) => s.getRunById(r.runId)));
    const succeeded = ended.filter((r) => r?.status === "succeeded");
    // A run whose task was on a killed node fails (no retries): at most one per kill.
    expect(succeeded.length).toBeGreaterThanOrEqual(runs.length - 4);
    for (const r of succeeded) expect(seen.get(r!.runId), r!.dagId).toBe(1);
    expect(termRegressions(await allEvents(s))).toEqual([]);
  }, 200_000);
});
