// A leader killed (kill -9) in the middle of a 50-item fan-out (docs/dag-format.md "Fan-out"), on
// real `dagbot node` processes on SQLite and PostgreSQL: the leader node offers none of the fan-out's
// actions (its kill stops no action), two worker nodes run them. The next leader goes on from what
// the store holds: the fan-out was expanded once, every instance ran exactly once (counted from the
// actions' own records and from the store), and the fan-in got the 50 urls in item order. Its own
// file so that it runs in the timing group (vitest.config.ts).
import { describe, expect, it } from "vitest";
import type { StoreKind } from "../support/engine-cluster.js";
import {
  ROOM,
  allEvents,
  cli,
  successCounts,
  termRegressions,
  waitForRunStatus,
  writeDag,
} from "../support/engine-cluster.js";
import { useNodeFleet } from "../support/node-fleet.js";
import { waitFor } from "../support/store-wait.js";
import { fanOutActions, fleetDag, recordsOf } from "../support/fan-out-fleet.js";

const ITEMS = 50;

describe.each<StoreKind>(["sqlite", "postgres"])("a fan-out on %s when its leader is killed", (kind) => {
  const openFleet = useNodeFleet(kind);

  it("kill -9 of the leader mid fan-out: expanded once, every instance run exactly once, the fan-in complete", async () => {
    const { target, store: s, records, startNode, startNodes } = await openFleet("foreach-kill");
    // The leader first, alone and without the fan-out's actions; then two workers with them.
    const leader = startNode("node-a", { capacity: 2 }).node;
    const first = await waitFor(
      "node-a leading",
      () => s.getLease(ROOM),
      (l) => l?.holder?.nodeId === "node-a",
      { timeoutMs: 20_000, intervalMs: 25 },
    );
    const configs = startNodes(["node-b", "node-c"], { capacity: 3, extra: fanOutActions(records) });
    await waitFor(
      "three nodes",
      () => s.listNodes(),
      (n) => n.length === 3,
      { timeoutMs: 20_000, intervalMs: 25 },
    );
    const submitted = await cli([
      "submit",
      writeDag(target, fleetDag("fleet", ITEMS, 4)),
      "--config",
      configs[0]!,
      "--confirm",
    ]);
    expect(submitted.code, submitted.stderr).toBe(0);
    const run = (await waitFor(
      "the run",
      () => s.getRun(ROOM, "fleet"),
      (r) => r !== null,
      { timeoutMs: 15_000, intervalMs: 25 },
    ))!;
    // In the middle: some instances ended, most have not.
    await waitFor(
      "some instances succeeded",
      () => s.listTasks(run.runId),
      (ts) => ts.filter((t) => t.fanOut === "deploy" && t.status === "succeeded").length >= 4,
      { timeoutMs: 30_000, intervalMs: 10 },
    );
    leader.kill("SIGKILL");
    expect((await leader.exited).signal).toBe("SIGKILL");
    const left = (await s.listTasks(run.runId)).filter(
      (t) => t.fanOut === "deploy" && t.status !== "succeeded",
    );
    expect(left.length).toBeGreaterThan(0);

    expect(await waitForRunStatus(s, "fleet", (x) => x !== "pending" && x !== "running", 90_000)).toBe(
      "succeeded",
    );
    const events = await allEvents(s);
    const takeover = events.find((e) => e.kind === "lease.acquired" && (e.term ?? 0) > first!.term);
    expect(takeover).toBeDefined();
    expect(events.filter((e) => e.kind === "fan_out.expanded" && e.runId === run.runId)).toHaveLength(1);
    expect(termRegressions(events)).toEqual([]);

    // Each instance started and ended once, with its own item, by the actions' own records.
    const lines = recordsOf(records, run.runId);
    const expected = Array.from({ length: ITEMS }, (_, i) => `deploy[item=${i}]`);
    for (const event of ["start", "end"] as const) {
      const seen = lines.filter((l) => l.event === event).map((l) => l.task);
      expect(seen.sort()).toEqual([...expected].sort());
    }
    expect(
      lines.filter((l) => l.event === "start").every((l) => l.host === `host-${l.index}` && l.attempt === 1),
    ).toBe(true);
    const counts = successCounts(events, run.runId);
    expect(counts.size).toBe(ITEMS + 2);
    expect([...counts.values()].every((n) => n === 1)).toBe(true);
    expect(lines.filter((l) => l.mode === "report").map((l) => l.urls)).toEqual([
      Array.from({ length: ITEMS }, (_, i) => `u-host-${i}`),
    ]);
  }, 150_000);
});
