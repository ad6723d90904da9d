// DAGs that run after another DAG's runs on a real fleet of three `dagbot node` processes,
// on SQLite and PostgreSQL: a chain a → b → c where every run succeeds starts each exactly once
// (b takes its parameters from a's run: an output its action published and a parameter of it);
// where the middle one fails, the third does not start (its firing is recorded as skipped, with the
// reason). Counted from the store and from the actions' own records of the runs they ran. A leader
// killed while the upstream run's last task runs: after-chain-leader-kill.test.ts.
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
  const { fleet, publish, runsOf } = useAfterFleet(kind);

  it("a chain a → b → c where every run succeeds: one upstream run starts each exactly once, in order, as the actions record", async () => {
    const { s, configs, recorded, t } = await fleet(`after-ok-${kind}`);
    await publish(s, t, configs[0]!, {
      id: "a",
      params: { v: { pattern: "[0-9.]+", default: "1.0.0" } },
      tasks: [
        {
          id: "stamp",
          action: "release",
          args: { v: "{params.v}" },
          outputs: { version: "[0-9]+\\.[0-9]+\\.[0-9]+" },
        },
      ],
    });
    await publish(s, t, configs[0]!, {
      id: "b",
      params: {
        version: { pattern: "[0-9.]+", default: "0" },
        from: { pattern: "[0-9.]+", default: "0" },
      },
      after: {
        dag: "a",
        status: "succeeded",
        params: { version: "tasks.stamp.outputs.version", from: "params.v" },
      },
      tasks: [{ id: "stamp", action: "stamp" }],
    });
    await publish(s, t, configs[0]!, {
      id: "c",
      after: { dag: "b", status: ["succeeded"] },
      tasks: [{ id: "stamp", action: "stamp" }],
    });
    const before = recorded().length;
    const trig = await cli(["trigger", "a", "v=2.5.1", "--confirm", "--config", configs[1]!], { cwd: t.dir });
    expect(trig.code, trig.stderr).toBe(0);
    expect(await waitForRunStatus(s, "c.2", ENDED)).toBe("succeeded");
    // Time for a second firing to show itself, were there one.
    await new Promise((done) => setTimeout(done, 2_000));

    const [a, b, c] = await Promise.all(["a", "b", "c"].map((id) => runsOf(s, id)));
    // Publishing a ran it with its defaults, which its action published as a valid output.
    expect(a![0]!.status).toBe("succeeded");
    expect(a!.map((r) => r.dagId)).toEqual(["a", "a.2"]);
    expect(b!.map((r) => r.dagId)).toEqual(["b", "b.2"]);
    expect(c!.map((r) => r.dagId)).toEqual(["c", "c.2"]);
    const b2 = b![1]!;
    const c2 = c![1]!;
    expect(b2.dag.trigger).toMatchObject({ run: "a.2", runId: a![1]!.runId, status: "succeeded", depth: 1 });
    // One value from the output a.2's action published, one from a.2's own parameter.
    expect(b2.dag.values).toEqual({ version: "2.5.1", from: "2.5.1" });
    expect(c2.dag.trigger).toMatchObject({ run: "b.2", runId: b2.runId, status: "succeeded", depth: 2 });
    expect(b2.createdAt).toBeGreaterThanOrEqual(a![1]!.updatedAt);
    expect(c2.createdAt).toBeGreaterThanOrEqual(b2.updatedAt);

    // The actions' own records: a.2, b.2 and c.2 ran once each, and nothing else ran since the publishes.
    const since = recorded().slice(before);
    expect(since.sort()).toEqual([a![1]!.runId, b2.runId, c2.runId].sort());
    const events = await allEvents(s);
    const fired = events.filter((e) => e.kind === "after.fired");
    // Logged on both runs of each firing: the upstream's and the one it started.
    expect(fired.map((e) => e.runId).sort()).toEqual([a![1]!.runId, b2.runId, b2.runId, c2.runId].sort());
    expect(termRegressions(events)).toEqual([]);

    const listed = await cli(["triggers", "--json", "--config", configs[2]!], { cwd: t.dir });
    expect(listed.code, listed.stderr).toBe(0);
    const json = JSON.parse(listed.stdout) as {
      triggers: Array<{ dagId: string; last: { run: string } | null }>;
    };
    expect(json.triggers.map((l) => [l.dagId, l.last?.run])).toEqual([
      ["b", "b.2"],
      ["c", "c.2"],
    ]);
  }, 120_000);

  it("a chain a → b → c where b fails: c does not start, and its skipped firing says why", async () => {
    const { s, configs, recorded, t } = await fleet(`after-fail-${kind}`);
    await publish(s, t, configs[0]!, { id: "a", tasks: [{ id: "stamp", action: "stamp" }] });
    await publish(s, t, configs[0]!, {
      id: "b",
      after: { dag: "a" },
      tasks: [
        { id: "stamp", action: "stamp" },
        { id: "boom", action: "fail", needs: ["stamp"] },
      ],
    });
    await publish(s, t, configs[0]!, {
      id: "c",
      after: { dag: "b", status: "succeeded" },
      tasks: [{ id: "stamp", action: "stamp" }],
    });
    const before = recorded().length;
    const trig = await cli(["trigger", "a", "--confirm", "--config", configs[1]!], { cwd: t.dir });
    expect(trig.code, trig.stderr).toBe(0);
    expect(await waitForRunStatus(s, "b.2", ENDED)).toBe("failed");
    const skipped = await waitFor(
      "c's skipped firing",
      async () => (await s.listAfterFirings(ROOM, { dagId: "c" }))[0],
      (f) => f !== undefined,
      { timeoutMs: 20_000, intervalMs: 50 },
    );
    expect(skipped).toMatchObject({ upstreamDagId: "b.2", upstreamStatus: "failed", runId: null });
    expect(skipped!.reason).toBe("b.2 failed; c runs after b succeeded");
    await new Promise((done) => setTimeout(done, 2_000));

    expect((await runsOf(s, "c")).map((r) => r.dagId)).toEqual(["c"]);
    expect(await s.getRun(ROOM, "c.2")).toBeNull();
    const a2 = (await s.getRun(ROOM, "a.2"))!;
    const b2 = (await s.getRun(ROOM, "b.2"))!;
    expect(recorded().slice(before).sort()).toEqual([a2.runId, b2.runId].sort());
    const events = await allEvents(s);
    expect(events.filter((e) => e.kind === "after.skipped").map((e) => e.runId)).toEqual([b2.runId]);
    expect(events.filter((e) => e.kind === "after.fired" && e.runId === b2.runId)).toHaveLength(1);
  }, 120_000);
});
