/**
 * Publishing without running (docs/dag-format.md, "Publishing without running"): a DAG with a per-second
 * schedule, submitted with `--register` to a `dagbot node` process (SQLite, PostgreSQL), awaits confirmation
 * like any publish, creates no task and runs no action when it is confirmed, and its schedule then
 * fires. Counted from the store and from the action's own record of each run it ran. A second DAG
 * declared `after` it fires nothing for the registering run.
 */
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
  writeDag,
  writeNodeConfig,
} from "../support/engine-cluster.js";
import { untilNodeBeats, waitFor } from "../support/store-wait.js";

beforeAll(() => requireBuild());

const slotRuns = async (store: Store): Promise<RunRecord[]> =>
  (await store.listDefinitionRuns(ROOM, "tick", { limit: 10_000 })).filter((r) => r.dag.slot !== undefined);

describe.each(["sqlite", "postgres"] as const)("publish --register on %s", (kind) => {
  let target: Target | null = null;
  let store: Store | null = null;
  const nodes: NodeProcess[] = [];

  afterEach(async (context) => {
    await killAll(nodes);
    nodes.length = 0;
    await store?.close();
    await target?.cleanup(context.task.result?.state === "fail");
  });

  it("registers a scheduled DAG without a run: confirmed like any publish, no task, and its slots fire", async () => {
    target = await createTarget(kind, `publish-register-${kind}`);
    const records = join(target.dir, "records.txt");
    const script = "require('fs').appendFileSync(process.argv[1], process.env.DAGBOT_RUN_ID + '\\n')";
    const extra = [
      "[actions.stamp]",
      `argv = [${JSON.stringify(process.execPath)}, "-e", ${JSON.stringify(script)}, ${JSON.stringify(records)}]`,
      'timeout = "10s"',
      'kill_grace = "300ms"',
      "",
    ].join("\n");
    const config = writeNodeConfig(target, { nodeId: "solo", extra });
    nodes.push(startNode(target, config, "solo"));
    store = await target.open();
    const s = store;
    await untilNodeBeats(s);
    const tick = writeDag(target, {
      id: "tick",
      schedule: "* * * * * *",
      missed: "skip",
      tasks: [{ id: "stamp", action: "stamp", args: {} }],
    });
    const after = writeDag(target, {
      id: "follow",
      after: { dag: "tick", status: ["succeeded"] },
      tasks: [{ id: "stamp", action: "stamp", args: {} }],
    });
    const cliOk = async (...args: string[]) => {
      const r = await cli([...args, "--config", config], { cwd: target!.dir });
      expect(r.code, `${args.join(" ")}: ${r.stdout}${r.stderr}`).toBe(0);
      return r;
    };

    // Registered, not confirmed: it waits like any publish, and nothing fires.
    const submitted = await cliOk("submit", tick, "--register");
    expect(submitted.stderr).toContain("Registered tick without running it");
    expect(submitted.stderr).toContain("It awaits confirmation");
    const pending = (await s.getRun(ROOM, "tick"))!;
    expect(pending.status).toBe("pending");
    expect(pending.dag.registered).toBe(true);
    expect(await s.listTasks(pending.runId)).toEqual([]);
    const pendingAt = await s.now();
    await waitFor(
      "2 slots to pass",
      () => s.now(),
      (now) => now > pendingAt + 2_000,
      { timeoutMs: 10_000, intervalMs: 200 },
    );
    expect(await slotRuns(s)).toEqual([]);

    // A DAG that runs after tick's runs, published before tick is confirmed: the registering run
    // that ends then is no run of tick for it.
    await cliOk("submit", after, "--confirm");
    // Confirmed: the registering run ends without a task, and the schedule fires.
    const confirmed = await cliOk("confirm", "tick");
    expect(confirmed.stdout + confirmed.stderr).toContain("confirmed tick: registered, nothing runs now.");
    const registered = await waitFor(
      "the registering run to end",
      () => s.getRun(ROOM, "tick"),
      (r) => r !== null && r.status !== "running" && r.status !== "pending",
      { timeoutMs: 10_000, intervalMs: 50 },
    );
    expect(registered!.status).toBe("succeeded");
    expect(await s.listTasks(registered!.runId)).toEqual([]);
    const fired = await waitFor(
      "2 slot runs to succeed",
      async () => (await slotRuns(s)).filter((r) => r.status === "succeeded"),
      (r) => r.length >= 2,
      { timeoutMs: 30_000, intervalMs: 100 },
    );
    // The action ran for the slot runs (and the `follow` runs after them), never for "tick" itself.
    const ran = existsSync(records) ? readFileSync(records, "utf8").split("\n").filter(Boolean) : [];
    expect(ran).not.toContain(registered!.runId);
    for (const slot of fired) expect(ran).toContain(slot.runId);
    // `after` fires for the slot runs, and skips the registering run, saying why.
    const firedFor = async () =>
      (await s.listDefinitionRuns(ROOM, "follow", { limit: 100 }))
        .filter((r) => r.dag.trigger !== undefined)
        .map((r) => r.dag.trigger!.runId);
    await waitFor(
      "follow to run after a slot run",
      firedFor,
      (ids) => ids.some((id) => fired.some((f) => f.runId === id)),
      { timeoutMs: 20_000, intervalMs: 100 },
    );
    expect(await firedFor()).not.toContain(registered!.runId);
    const skipped = (await allEvents(s)).filter(
      (e) => e.kind === "after.skipped" && e.runId === registered!.runId,
    );
    expect(skipped.length, JSON.stringify(skipped)).toBe(1);
    expect(JSON.stringify(skipped[0]!.data)).toContain("registered tick without running it");
  }, 90_000);
});
