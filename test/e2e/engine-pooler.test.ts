/**
 * A fleet behind a real transaction-mode PgBouncer (docs/operations.md, "Behind a connection
 * pooler"): three `dagbot node` processes and the CLI with store_pooler = "transaction", on a fresh
 * database reached only through the pooler, run a DAG of 30 tasks; the leader is killed with
 * SIGKILL in the middle. Each task succeeds exactly once, counted from the actions' own marker
 * files and from the event log; the test itself reads the store directly.
 */
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { openPostgresStore } from "../../src/adapters/postgres/index.js";
import type { Store } from "../../src/ports/store.js";
import type { NodeProcess, Target } from "../support/engine-cluster.js";
import {
  ROOM,
  allEvents,
  cli,
  killAll,
  marksDir,
  requireBuild,
  startNode,
  successCounts,
  targetIn,
  termRegressions,
  waitForRunStatus,
  waitForTasks,
  writeDag,
  writeNodeConfig,
} from "../support/engine-cluster.js";
import type { PgBouncer } from "../support/pgbouncer.js";
import { startPgBouncer } from "../support/pgbouncer.js";
import type { TestDatabase } from "../support/postgres.js";
import { createTestDatabase, dropOrKeep } from "../support/postgres.js";
import { untilNodeBeats, waitFor } from "../support/store-wait.js";

describe("a fleet behind a transaction-mode PgBouncer", () => {
  let bouncer: PgBouncer | undefined;
  let db: TestDatabase | undefined;
  let target: Target | undefined;
  let store: Store | undefined;
  const nodes: NodeProcess[] = [];

  beforeAll(() => requireBuild());

  afterEach(async (context) => {
    const failed = context.task.result?.state === "fail";
    await killAll(nodes);
    await store?.close();
    if (failed && bouncer !== undefined) console.warn(`pgbouncer log:\n${bouncer.log()}`);
    await bouncer?.stop();
    if (db !== undefined) await dropOrKeep(db, failed);
    await target?.cleanup(failed);
  });

  it("3 nodes run a 30-task DAG through the pooler, the leader killed mid-run: each task's action ends once per attempt the store kept, each task succeeds once", async () => {
    db = await createTestDatabase();
    bouncer = await startPgBouncer();
    target = targetIn("postgres", "pooler", bouncer.url(db.name), "pooler test folder");
    // The test reads the store directly (the nodes and the CLI go through the pooler).
    store = await openPostgresStore(db.url, { poolSize: 2 });
    const t = target;
    const configs = ["node-a", "node-b", "node-c"].map((nodeId) => {
      const path = writeNodeConfig(t, { nodeId, capacity: 2 });
      // A top-level key, so it goes before the first table.
      writeFileSync(
        path,
        readFileSync(path, "utf8").replace(/^store = (.*)$/m, '$&\nstore_pooler = "transaction"'),
      );
      nodes.push(startNode(t, path, nodeId));
      return path;
    });
    // Three layers of ten: a task of a later layer needs one of the layer before.
    const tasks = Array.from({ length: 30 }, (_, i) => ({
      id: `w${String(i).padStart(2, "0")}`,
      action: "work",
      args: { ms: 200 },
      // A crash costs the tasks the dead node was running one attempt (docs/architecture.md §3).
      retries: 1,
      retry_backoff: "100ms",
      ...(i >= 10 ? { needs: [`w${String(i - 10).padStart(2, "0")}`] } : {}),
    }));
    await untilNodeBeats(store);
    const submitted = await cli([
      "submit",
      writeDag(t, { id: "pooled", tasks }),
      "--config",
      configs[0]!,
      "--confirm",
    ]);
    expect(submitted.code, submitted.stderr).toBe(0);
    const run = await store.getRun(ROOM, submitted.stdout.trim());
    expect(run, submitted.stdout).not.toBeNull();
    const runId = run!.runId;

    await waitForTasks(
      store,
      runId,
      "8 tasks succeeded",
      (ts) => ts.filter((x) => x.status === "succeeded").length >= 8,
      60_000,
    );
    const lease = await store.getLease(ROOM);
    const leader = lease?.holder?.nodeId;
    const victim = nodes.find((n) => n.nodeId === leader);
    expect(victim, `leader ${String(leader)}`).toBeDefined();
    victim!.kill("SIGKILL");
    expect((await victim!.exited).signal).toBe("SIGKILL");
    await waitFor(
      "a new leader",
      () => store!.getLease(ROOM),
      (l) => l !== null && l.holder !== null && l.holder.nodeId !== leader && l.term > lease!.term,
      { timeoutMs: 30_000, intervalMs: 50 },
    );

    expect(await waitForRunStatus(store, "pooled", (s) => s !== "running", 120_000)).toBe("succeeded");
    const final = await store.listTasks(runId);
    expect(final).toHaveLength(30);
    expect(final.filter((x) => x.status !== "succeeded")).toEqual([]);

    // The event log: each task succeeded once; no leader write went back in term.
    const events = await allEvents(store);
    const counts = successCounts(events, runId);
    expect(counts.size).toBe(30);
    expect([...counts.entries()].filter(([, n]) => n !== 1)).toEqual([]);
    expect(termRegressions(events)).toEqual([]);

    // The actions' own records: `<run>.<task>.<attempt>.start|end` files. The attempt the store
    // recorded as succeeded ended; no attempt started twice; a task has a second attempt only when
    // the killed node was running its first.
    const marks = readdirSync(marksDir(t)).filter((f) => f.startsWith(`${runId}.`));
    const victimRan = new Set(
      events
        .filter((e) => e.kind === "task.running" && e.actor?.startsWith(`${leader}/`) === true)
        .map((e) => e.taskId),
    );
    expect(victimRan.size).toBeGreaterThan(0);
    for (const task of final) {
      const starts = marks.filter((f) => f.startsWith(`${runId}.${task.taskId}.`) && f.endsWith(".start"));
      const ends = marks.filter((f) => f.startsWith(`${runId}.${task.taskId}.`) && f.endsWith(".end"));
      expect(ends, task.taskId).toContain(`${runId}.${task.taskId}.${task.attempt}.end`);
      if (!victimRan.has(task.taskId)) {
        expect(starts, task.taskId).toEqual([`${runId}.${task.taskId}.1.start`]);
        expect(ends, task.taskId).toEqual([`${runId}.${task.taskId}.1.end`]);
      } else expect(starts.length, task.taskId).toBeLessThanOrEqual(2);
    }
    // The survivors did the work through the pooler, and the killed node ran some before it died.
    const ranBy = new Set(events.filter((e) => e.kind === "task.running").map((e) => e.actor?.split("/")[0]));
    expect(ranBy.size).toBeGreaterThanOrEqual(2);
  }, 240_000);
});
