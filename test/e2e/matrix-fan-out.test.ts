// A task's matrix end to end (docs/dag-format.md "Matrix"): real `dagbot node` processes on SQLite
// and on PostgreSQL run a 2 × 3 matrix's six instances exactly once each, counted from the action's
// own records; the CLI shows the matrix task as one group and names an instance; a failed instance
// is retried alone; a matrix past its bound is refused with the bound and the count, and nothing is
// stored.
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";
import type { StoreKind } from "../support/engine-cluster.js";
import {
  REPO,
  ROOM,
  allEvents,
  cli,
  successCounts,
  waitForRunStatus,
  writeDag,
} from "../support/engine-cluster.js";
import { useNodeFleet } from "../support/node-fleet.js";
import { untilNodeBeats } from "../support/store-wait.js";

const RECORD = resolve(REPO, "test/support/engine-fixtures/matrix-record.mjs");

interface Record {
  run: string;
  task: string;
  attempt: number;
  values: string[];
}

describe.each<StoreKind>(["sqlite", "postgres"])("a matrix on %s with two node processes", (kind) => {
  const openFleet = useNodeFleet(kind);

  it("runs the six instances of a 2 × 3 matrix exactly once each; retries the one that failed alone, then what needs them; refuses 272 instances", async () => {
    const { target, store, records, startNodes } = await openFleet("matrix");
    const failing = "deploy[region=us,tier=db]";
    writeFileSync(`${records}.fail`, failing);
    const extra = `
[actions.deploy]
argv = [${JSON.stringify(process.execPath)}, ${JSON.stringify(RECORD)}, ${JSON.stringify(records)}, "{region}", "{tier}"]
args = { region = { pattern = '[a-z]{2}' }, tier = { pattern = '[a-z]+' } }
timeout = "30s"
kill_grace = "300ms"
`;
    const configs = startNodes(["node-a", "node-b"], { capacity: 3, extra });
    const dagPath = writeDag(target, {
      id: "rollout",
      tasks: [
        { id: "build", action: "echo", args: { message: "built" } },
        {
          id: "deploy",
          action: "deploy",
          needs: ["build"],
          matrix: { region: ["eu", "us"], tier: ["web", "db", "cache"] },
          args: { region: "{matrix.region}", tier: "{matrix.tier}" },
        },
        { id: "smoke", action: "echo", needs: ["deploy"], args: { message: "all deployed" } },
      ],
    });
    await untilNodeBeats(store);
    const submitted = await cli(["submit", dagPath, "--config", configs[0]!, "--confirm"]);
    expect(submitted.code, submitted.stderr).toBe(0);
    expect(await waitForRunStatus(store, "rollout", (s) => s !== "pending" && s !== "running")).toBe(
      "failed",
    );
    const run = (await store.getRun(ROOM, "rollout"))!;

    // The action's own records: six attempts, one per instance, each given its own values.
    const recorded = () =>
      readFileSync(records, "utf8")
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l) as Record);
    const instances = [
      ["eu", "web"],
      ["eu", "db"],
      ["eu", "cache"],
      ["us", "web"],
      ["us", "db"],
      ["us", "cache"],
    ].map(([region, tier]) => ({ id: `deploy[region=${region},tier=${tier}]`, values: [region, tier] }));
    const lines = recorded();
    expect(lines).toHaveLength(6);
    expect(lines.map((l) => l.task).sort()).toEqual(instances.map((i) => i.id).sort());
    for (const l of lines) {
      expect(l.run).toBe(run.runId);
      expect(l.attempt).toBe(1);
      expect(l.values).toEqual(instances.find((i) => i.id === l.task)!.values);
    }

    // The store agrees: eight ordinary tasks; the failed instance's dependent was skipped.
    const tasks = await store.listTasks(run.runId);
    const expected = (id: string) => (id === failing ? "failed" : "succeeded");
    expect(tasks.map((t) => [t.taskId, t.status]).sort()).toEqual(
      [...instances.map((i) => [i.id, expected(i.id)]), ["build", "succeeded"], ["smoke", "skipped"]].sort(),
    );
    const counts = successCounts(await allEvents(store), run.runId);
    expect(counts.size).toBe(6);
    expect([...counts.values()].every((n) => n === 1)).toBe(true);

    // The CLI shows the matrix task as one group, and names one instance.
    const status = await cli(["status", "rollout", "--config", configs[1]!]);
    expect(status.stdout).toContain("deploy × 6: 5 succeeded, 1 failed");
    const json = await cli(["status", "rollout", "--config", configs[1]!, "--json"]);
    expect(JSON.parse(json.stdout)).toMatchObject({
      groups: [{ task: "deploy", summary: { total: 6, byStatus: { succeeded: 5, failed: 1 } } }],
    });
    const one = await cli(["status", "rollout", failing, "--config", configs[1]!]);
    expect(one.code, one.stderr).toBe(0);
    expect(one.stdout).toMatch(/deploy\[region=us,tier=db\]\s+failed/);

    // A retry runs the failed instance alone, then what needs the matrix task.
    rmSync(`${records}.fail`);
    const retried = await cli(["retry", "rollout", "--config", configs[0]!, "--confirm"]);
    expect(retried.code, retried.stderr).toBe(0);
    expect(await waitForRunStatus(store, "rollout.retry1", (s) => s !== "pending" && s !== "running")).toBe(
      "succeeded",
    );
    const retry = (await store.getRun(ROOM, "rollout.retry1"))!;
    const again = recorded().slice(6);
    expect(again.map((l) => [l.run, l.task, l.values])).toEqual([[retry.runId, failing, ["us", "db"]]]);
    const retryTasks = await store.listTasks(retry.runId);
    expect(retryTasks.map((t) => [t.taskId, t.status]).sort()).toEqual([
      [failing, "succeeded"],
      ["smoke", "succeeded"],
    ]);
    const smoke = retryTasks.find((t) => t.taskId === "smoke")!;
    const instance = retryTasks.find((t) => t.taskId === failing)!;
    expect(smoke.startedAt!).toBeGreaterThanOrEqual(instance.finishedAt!);
    // Across the run and its retry, each instance succeeded exactly once.
    const events = await allEvents(store);
    const both = [...successCounts(events, run.runId), ...successCounts(events, retry.runId)];
    const perInstance = new Map<string, number>();
    for (const [task, n] of both)
      if (task.startsWith("deploy[")) perInstance.set(task, (perInstance.get(task) ?? 0) + n);
    expect([...perInstance.keys()].sort()).toEqual(instances.map((i) => i.id).sort());
    expect([...perInstance.values()].every((n) => n === 1)).toBe(true);

    // Past the bound: refused with the bound and the count, and nothing stored.
    const values = (n: number) => Array.from({ length: n }, (_, i) => `v${i}`);
    const tooBig = writeDag(target, {
      id: "toobig",
      tasks: [{ id: "t", action: "deploy", matrix: { a: values(16), b: values(17) } }],
    });
    const refused = await cli(["submit", tooBig, "--config", configs[0]!, "--confirm"]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain(
      "tasks[0].matrix: expands to 272 instances (16 × 17); a matrix task may have at most 256",
    );
    expect(await store.getRun(ROOM, "toobig")).toBeNull();
    expect((await store.listRuns(ROOM, { limit: 10 })).map((r) => r.dagId).sort()).toEqual([
      "rollout",
      "rollout.retry1",
    ]);
  });
});
