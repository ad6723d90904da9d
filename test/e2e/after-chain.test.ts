// DAGs that run after another DAG's runs on a real fleet of three `dagbot node` processes,
// on SQLite and PostgreSQL: a chain a → b → c where every run succeeds starts each exactly once
// (b takes its parameters from a's run: an output its action published and a parameter of it);
// where the middle one fails, the third does not start (its firing is recorded as skipped, with the
// reason); and a leader killed (kill -9) while the upstream run's last task runs, so that the run
// ends with no leader, is fired by the next leader exactly once. Counted from the store and from the
// actions' own records of the runs they ran.
import { existsSync, readFileSync } from "node:fs";
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
  waitForRunStatus,
  writeDag,
  writeNodeConfig,
} from "../support/engine-cluster.js";
import { waitFor } from "../support/store-wait.js";

beforeAll(() => requireBuild());

const ENDED = (s: string): boolean => s === "succeeded" || s === "failed" || s === "canceled";

describe.each(["sqlite", "postgres"] as const)("after another DAG on %s: a fleet of 3", (kind) => {
  let target: Target | null = null;
  let store: Store | null = null;
  const nodes: NodeProcess[] = [];

  afterEach(async (context) => {
    await killAll(nodes);
    nodes.length = 0;
    await store?.close();
    store = null;
    await target?.cleanup(context.task.result?.state === "fail");
  });

  /** Three nodes with `stamp` (appends its run's uuid to records.txt) and `fail` (exits 1). */
  async function fleet(
    label: string,
    lease: { ttl: string; renewEvery: string } = { ttl: "2s", renewEvery: "500ms" },
  ) {
    target = await createTarget(kind, label);
    const records = join(target.dir, "records.txt");
    const script = "require('fs').appendFileSync(process.argv[1], process.env.DAGBOT_RUN_ID + '\\n')";
    const release =
      "const fs = require('fs'); fs.appendFileSync(process.argv[1], process.env.DAGBOT_RUN_ID + '\\n'); " +
      "fs.appendFileSync(process.env.DAGBOT_OUTPUT, 'version=' + process.argv[2] + '\\n')";
    const extra = [
      "[actions.stamp]",
      `argv = [${JSON.stringify(process.execPath)}, "-e", ${JSON.stringify(script)}, ${JSON.stringify(records)}]`,
      'timeout = "10s"',
      'kill_grace = "300ms"',
      "",
      // Records its run like stamp, and publishes version=<v> as its output (DAGBOT_OUTPUT).
      "[actions.release]",
      `argv = [${JSON.stringify(process.execPath)}, "-e", ${JSON.stringify(release)}, ${JSON.stringify(records)}, "{v}"]`,
      "args = { v = { pattern = '[0-9.]{1,20}' } }",
      'timeout = "10s"',
      'kill_grace = "300ms"',
      "",
      "[actions.fail]",
      `argv = [${JSON.stringify(process.execPath)}, "-e", "process.exit(1)"]`,
      'timeout = "10s"',
      'kill_grace = "300ms"',
      "",
    ].join("\n");
    const configs = ["node-a", "node-b", "node-c"].map((nodeId) => {
      const config = writeNodeConfig(target!, { nodeId, extra, ...lease });
      nodes.push(startNode(target!, config, nodeId));
      return config;
    });
    store = await target.open();
    const s = store;
    await waitFor(
      "three heartbeats",
      () => s.listNodes(),
      (n) => n.length >= 3,
      { timeoutMs: 15_000, intervalMs: 50 },
    );
    await waitFor(
      "a leader",
      () => s.getLease(ROOM),
      (l) => l?.holder !== null && l !== null,
      {
        timeoutMs: 15_000,
        intervalMs: 50,
      },
    );
    const recorded = (): string[] =>
      existsSync(records) ? readFileSync(records, "utf8").trim().split("\n").filter(Boolean) : [];
    return { s, configs, recorded, t: target };
  }

  /** Publishes a DAG (auto-confirmed) and waits for its first run to end. */
  async function publish(s: Store, t: Target, config: string, dag: Record<string, unknown>): Promise<void> {
    const path = writeDag(t, dag);
    const r = await cli(["submit", path, "--confirm", "--config", config], { cwd: t.dir });
    expect(r.code, r.stderr).toBe(0);
    await waitForRunStatus(s, String(dag["id"]), ENDED);
  }

  const runsOf = async (s: Store, id: string): Promise<RunRecord[]> =>
    (await s.listDefinitionRuns(ROOM, id)).sort((a, b) => a.createdAt - b.createdAt);

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
