// A fan-out end to end (docs/dag-format.md "Fan-out"): real `dagbot node` processes on SQLite and on
// PostgreSQL. A producer publishes a 50-item list; the leader fans a task out over it, 50 instances
// each given its item, at most 8 running at once (measured from the actions' own start and end
// records); one instance fails its first attempt and is retried alone; the fan-in is given the 50
// instances' outputs in item order. A retry of a run whose instance failed for good runs the
// producer again and re-expands. A producer writing 10,000 items against max_items = 100 fails
// naming the output, the count and the bound.
import { writeFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import type { StoreKind } from "../support/engine-cluster.js";
import {
  ROOM,
  allEvents,
  cli,
  successCounts,
  waitForRunStatus,
  writeDag,
} from "../support/engine-cluster.js";
import { useNodeFleet } from "../support/node-fleet.js";
import { untilNodeBeats } from "../support/store-wait.js";
import { fanOutActions, fleetDag, maxOverlap, recordsOf } from "../support/fan-out-fleet.js";

const ITEMS = 50;
const LIMIT = 8;

describe.each<StoreKind>(["sqlite", "postgres"])("a fan-out on %s with two node processes", (kind) => {
  const openFleet = useNodeFleet(kind);

  it("runs one instance per item of a 50-item list, at most 8 at once, retries one alone, and gives the fan-in the 50 outputs in order; a retry re-expands; refuses a 10,000-item list naming the bound", async () => {
    const { target, store, records, startNodes } = await openFleet("foreach");
    const failing = "deploy[item=7]";
    writeFileSync(`${records}.fail`, failing);
    const extra = fanOutActions(records);
    // Twelve slots between the two nodes: the fan-out's own limit is what holds it to eight.
    const configs = startNodes(["node-a", "node-b"], { capacity: 6, extra });
    const fleet = (id: string, n: number) => writeDag(target, fleetDag(id, n, LIMIT));
    await untilNodeBeats(store);
    const submitted = await cli(["submit", fleet("fleet", ITEMS), "--config", configs[0]!, "--confirm"]);
    expect(submitted.code, submitted.stderr).toBe(0);
    expect(await waitForRunStatus(store, "fleet", (s) => s !== "pending" && s !== "running")).toBe(
      "succeeded",
    );
    const run = (await store.getRun(ROOM, "fleet"))!;

    const lines = recordsOf(records, run.runId);
    // Each instance ran with its own item: one attempt each, two for the one that failed first.
    const starts = lines.filter((l) => l.event === "start");
    const expected = Array.from({ length: ITEMS }, (_, i) => `deploy[item=${i}]`);
    expect([...new Set(starts.map((l) => l.task))].sort()).toEqual([...expected].sort());
    for (const l of starts) {
      expect(l.host).toBe(`host-${l.index}`);
      expect(l.task).toBe(`deploy[item=${l.index}]`);
    }
    expect(starts.filter((l) => l.task === failing).map((l) => l.attempt)).toEqual([1, 2]);
    expect(starts.filter((l) => l.task !== failing).every((l) => l.attempt === 1)).toBe(true);
    expect(starts).toHaveLength(ITEMS + 1);
    expect(maxOverlap(lines)).toBeLessThanOrEqual(LIMIT);
    // The fan-in got every instance's url, in item order.
    const report = lines.filter((l) => l.mode === "report");
    expect(report.map((l) => l.urls)).toEqual([Array.from({ length: ITEMS }, (_, i) => `u-host-${i}`)]);

    // The store agrees: the template was replaced by its instances, each succeeded exactly once.
    const tasks = await store.listTasks(run.runId);
    expect(tasks.map((t) => t.taskId).sort()).toEqual(["discover", "report", ...expected].sort());
    expect(tasks.every((t) => t.status === "succeeded")).toBe(true);
    const counts = successCounts(await allEvents(store), run.runId);
    expect([...counts.values()].every((n) => n === 1)).toBe(true);
    expect(counts.size).toBe(ITEMS + 2);

    // The CLI groups the instances under the fan-out's id.
    const status = await cli(["status", "fleet", "--config", configs[1]!]);
    expect(status.stdout).toContain(`deploy × ${ITEMS}: ${ITEMS} succeeded`);
    const json = await cli(["status", "fleet", "--config", configs[1]!, "--json"]);
    expect(JSON.parse(json.stdout)).toMatchObject({
      groups: [{ task: "deploy", summary: { total: ITEMS, byStatus: { succeeded: ITEMS } } }],
    });
    const one = await cli(["status", "fleet", failing, "--config", configs[1]!]);
    expect(one.code, one.stderr).toBe(0);
    expect(one.stdout).toMatch(/deploy\[item=7\]\s+succeeded/);
    expect(one.stdout).toContain("url=u-host-7");

    // A retry of a run whose instance failed for good runs the producer again and re-expands.
    writeFileSync(`${records}.fail`, "deploy[item=2] always");
    const small = await cli(["submit", fleet("small", 5), "--config", configs[0]!, "--confirm"]);
    expect(small.code, small.stderr).toBe(0);
    expect(await waitForRunStatus(store, "small", (s) => s !== "pending" && s !== "running")).toBe("failed");
    const smallRun = (await store.getRun(ROOM, "small"))!;
    expect(
      Object.fromEntries((await store.listTasks(smallRun.runId)).map((t) => [t.taskId, t.status])),
    ).toMatchObject({ "deploy[item=2]": "failed", "deploy[item=3]": "succeeded", report: "skipped" });
    writeFileSync(`${records}.fail`, "");
    const retried = await cli(["retry", "small", "--config", configs[0]!, "--confirm"]);
    expect(retried.code, retried.stderr).toBe(0);
    expect(await waitForRunStatus(store, "small.retry1", (s) => s !== "pending" && s !== "running")).toBe(
      "succeeded",
    );
    const retryRun = (await store.getRun(ROOM, "small.retry1"))!;
    expect((await store.listTasks(retryRun.runId)).map((t) => [t.taskId, t.status]).sort()).toEqual(
      [
        ["discover", "succeeded"],
        ["report", "succeeded"],
        ...Array.from({ length: 5 }, (_, i) => [`deploy[item=${i}]`, "succeeded"]),
      ].sort(),
    );
    const again = recordsOf(records, retryRun.runId);
    expect(again.filter((l) => l.mode === "discover")).toHaveLength(1);
    expect(again.filter((l) => l.mode === "report").map((l) => l.urls)).toEqual([
      Array.from({ length: 5 }, (_, i) => `u-host-${i}`),
    ]);

    // 10,000 items against max_items = 100: the producer fails naming the output, the count and
    // the bound (the file is past 64 KiB: its lines are counted, not refused for its size).
    const big = await cli(["submit", fleet("big", 10_000), "--config", configs[0]!, "--confirm"]);
    expect(big.code, big.stderr).toBe(0);
    expect(await waitForRunStatus(store, "big", (s) => s !== "pending" && s !== "running")).toBe("failed");
    const bigRun = (await store.getRun(ROOM, "big"))!;
    const discover = (await store.getTask(bigRun.runId, "discover"))!;
    expect(discover.status).toBe("failed");
    expect(discover.error).toBe(
      'outputs refused: list output "hosts" of task discover has 10000 items; at most 100 (its max_items)',
    );
    expect((await store.listTasks(bigRun.runId)).map((t) => [t.taskId, t.status]).sort()).toEqual([
      ["deploy", "skipped"],
      ["discover", "failed"],
      ["report", "skipped"],
    ]);
  });
});
