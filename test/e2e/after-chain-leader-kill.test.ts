// A leader killed (kill -9) while the upstream run's last task runs, on a real fleet of three
// `dagbot node` processes on SQLite and PostgreSQL: the run ends with no leader, and the next leader
// fires the DAG that runs after it exactly once. Counted from the store and from the action's own
// record. Its own file so that it runs in the timing group (vitest.config.ts): the task must end
// before the next leader takes over, a race of seconds that CPU load could tip.
import { beforeAll, describe, expect, it } from "vitest";
import {
  ROOM,
  allEvents,
  cli,
  requireBuild,
  termRegressions,
  waitForRunStatus,
} from "../support/engine-cluster.js";
import { ENDED, useAfterFleet } from "../support/after-fleet.js";
import { waitFor } from "../support/store-wait.js";

beforeAll(() => requireBuild());

describe.each(["sqlite", "postgres"] as const)("after another DAG on %s: a fleet of 3", (kind) => {
  const { fleet, publish, runsOf, nodes } = useAfterFleet(kind);

  it("kill -9 of the leader while the upstream run's last task runs: the run ends with no leader, and the next leader fires it exactly once", async () => {
    // A long lease: the task ends (seconds after the kill) before the next leader takes over.
    const { s, configs, recorded, t } = await fleet(`after-kill-${kind}`, { ttl: "6s", renewEvery: "1s" });
    const leader = (await s.getLease(ROOM))!.holder!.nodeId;
    const worker = ["node-a", "node-b", "node-c"].find((n) => n !== leader)!;
    const config = configs[["node-a", "node-b", "node-c"].indexOf(worker)]!;
    await publish(s, t, config, {
      id: "up",
      tasks: [{ id: "slow", action: "work", args: { ms: "2500" }, on: { node: worker } }],
    });
    await publish(s, t, config, {
      id: "down",
      after: { dag: "up" },
      tasks: [{ id: "stamp", action: "stamp" }],
    });
    const before = recorded().length;
    const lease = (await s.getLease(ROOM))!;
    expect(lease.holder!.nodeId).toBe(leader);
    const trig = await cli(["trigger", "up", "--confirm", "--config", config], { cwd: t.dir });
    expect(trig.code, trig.stderr).toBe(0);
    const up2 = (await waitFor(
      "up.2",
      () => s.getRun(ROOM, "up.2"),
      (r) => r !== null,
      { timeoutMs: 15_000, intervalMs: 25 },
    ))!;
    await waitFor(
      "up.2's task running",
      () => s.listTasks(up2.runId),
      (ts) => ts.some((x) => x.status === "running"),
      { timeoutMs: 15_000, intervalMs: 25 },
    );
    const victim = nodes.find((n) => n.nodeId === leader)!;
    victim.kill("SIGKILL");
    expect((await victim.exited).signal).toBe("SIGKILL");

    expect(await waitForRunStatus(s, "down.2", ENDED, 60_000)).toBe("succeeded");
    await new Promise((done) => setTimeout(done, 2_000));
    const events = await allEvents(s);
    const taskEnd = events.find((e) => e.kind === "task.succeeded" && e.runId === up2.runId)!;
    const takeover = events.find((e) => e.kind === "lease.acquired" && (e.term ?? 0) > lease.term)!;
    expect(taskEnd).toBeDefined();
    expect(takeover).toBeDefined();
    // The upstream's last task ended while no node led the room; the run ended and fired under the next term.
    expect(taskEnd.at).toBeLessThan(takeover.at);
    const runEnd = events.find((e) => e.kind === "run.succeeded" && e.runId === up2.runId)!;
    expect(runEnd.term).toBeGreaterThan(lease.term);
    const firings = await s.listAfterFirings(ROOM, { dagId: "down" });
    expect(firings.map((f) => [f.upstreamDagId, f.runDagId])).toEqual([["up.2", "down.2"]]);
    expect(firings[0]!.term).toBeGreaterThan(lease.term);
    expect((await runsOf(s, "down")).map((r) => r.dagId)).toEqual(["down", "down.2"]);
    const down2 = (await s.getRun(ROOM, "down.2"))!;
    expect(recorded().slice(before)).toEqual([down2.runId]);
    expect(termRegressions(events)).toEqual([]);
  }, 120_000);
});
