/**
 * A store outage shorter than the task lease's bound stops no action (docs/architecture.md §3, "Task
 * lease"; docs/operations.md, "How a worker fences itself"): three `dagbot node` processes on PostgreSQL reach it
 * through a TCP proxy this test owns; with nine actions running longer than the cut, the proxy is
 * closed (every connection dropped, new ones refused) for 20 s and opened again. Every run
 * succeeds, and each action ran exactly once, counted from the lines the actions appended to their
 * own records file.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { openPostgresStore } from "../../src/adapters/postgres/index.js";
import type { Store } from "../../src/ports/store.js";
import type { ActionRecord } from "../support/chaos-records.js";
import { readRecords } from "../support/chaos-records.js";
import {
  REPO,
  allEvents,
  cli,
  killAll,
  requireBuild,
  startNode,
  targetIn,
  waitForRunStatus,
  writeDag,
  writeNodeConfig,
} from "../support/engine-cluster.js";
import type { NodeProcess, Target } from "../support/engine-cluster.js";
import { createTestDatabase, dropOrKeep } from "../support/postgres.js";
import type { TestDatabase } from "../support/postgres.js";
import { untilNodeBeats, waitFor } from "../support/store-wait.js";
import { freePort, startProxy } from "../support/tcp-proxy.js";

const PG_PORT = 5432;
const OUTAGE_MS = 20_000;
const ACTION_MS = 30_000;
const RECORD = join(REPO, "test", "support", "engine-fixtures", "record.mjs");

/** What the record action itself wrote: a start and an end line per attempt. */
const records = (target: Target): ActionRecord[] => readRecords(join(target.dir, "records.jsonl"));

/** The `rec` action: appends its start and end to the target's records file (engine-fixtures/record.mjs). */
function recordAction(t: Target): string {
  return `
[actions.rec]
argv = [${JSON.stringify(process.execPath)}, ${JSON.stringify(RECORD)}, "{ms}", ${JSON.stringify(join(t.dir, "records.jsonl"))}]
args = { ms = { pattern = '[0-9]{1,6}' } }
timeout = "5m"
kill_grace = "300ms"
`;
}

function logLines(node: NodeProcess): Array<Record<string, unknown>> {
  return readFileSync(node.logPath, "utf8")
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

describe("a PostgreSQL outage shorter than the task lease's bound", () => {
  let target: Target | null = null;
  let db: TestDatabase | null = null;
  let store: Store | null = null;
  const nodes: NodeProcess[] = [];
  const proxies: Array<{ close(): Promise<void> }> = [];

  beforeAll(() => requireBuild());

  afterEach(async (context) => {
    const failed = context.task.result?.state === "fail";
    await killAll(nodes.splice(0));
    for (const p of proxies.splice(0)) await p.close();
    await store?.close();
    store = null;
    await target?.cleanup(failed);
    target = null;
    if (db !== null) await dropOrKeep(db, failed);
    db = null;
  });

  it("stops no action of three nodes cut from the store for 20 s: every run succeeds, each action ran once", async () => {
    db = await createTestDatabase();
    const d = db;
    const port = await freePort();
    proxies.push(await startProxy(port, PG_PORT));
    const viaProxy = new URL(d.url);
    viaProxy.port = String(port);
    target = targetIn("postgres", "outage", viaProxy.toString(), "outage test folder");
    const t = target;
    // The test watches the store directly, not through the proxy.
    store = await openPostgresStore(d.url, { poolSize: 2 });
    const s = store;
    const extra = recordAction(t);
    // The room lease stays short (a leader is replaced within 2 s); the task lease is the default.
    const configs = ["n1", "n2", "n3"].map((nodeId) =>
      writeNodeConfig(t, { nodeId, capacity: 3, ttl: "2s", renewEvery: "500ms", taskTtl: "60s", extra }),
    );
    ["n1", "n2", "n3"].forEach((nodeId, i) => nodes.push(startNode(t, configs[i]!, nodeId)));
    await waitFor(
      "three heartbeats",
      () => s.listNodes(),
      (n) => n.length === 3,
      { timeoutMs: 30_000 },
    );
    await untilNodeBeats(s);

    const runs = ["r1", "r2", "r3"];
    for (const id of runs) {
      const tasks = ["a", "b", "c"].map((task) => ({ id: task, action: "rec", args: { ms: ACTION_MS } }));
      const submitted = await cli(
        ["submit", writeDag(t, { id, tasks }), "--config", configs[0]!, "--store", d.url, "--confirm"],
        { cwd: t.dir },
      );
      expect(submitted.code, submitted.stderr).toBe(0);
    }
    await waitFor(
      "nine actions running",
      () => records(t).filter((r) => r.ev === "start").length,
      (n) => n === 9,
      { timeoutMs: 30_000, intervalMs: 50 },
    );

    // The cut: every connection dropped, new ones refused, for 20 s; the actions outlive it.
    const cutAt = Date.now();
    await proxies.pop()!.close();
    await new Promise((r) => setTimeout(r, OUTAGE_MS));
    expect(records(t).filter((r) => r.ev === "end")).toEqual([]);
    proxies.push(await startProxy(port, PG_PORT));
    console.log(`[outage] the store was cut for ${Date.now() - cutAt} ms under 9 running actions`);

    for (const id of runs) {
      expect(await waitForRunStatus(s, id, (st) => st !== "running" && st !== "pending", 90_000)).toBe(
        "succeeded",
      );
    }
    // Each action ran once: one start and one end ("done", not a SIGTERM) per task, attempt 1.
    const recs = records(t);
    const starts = new Map<string, number>();
    for (const r of recs.filter((x) => x.ev === "start"))
      starts.set(`${r.run}/${r.task}`, (starts.get(`${r.run}/${r.task}`) ?? 0) + 1);
    expect(starts.size).toBe(9);
    expect([...starts.values()].every((n) => n === 1)).toBe(true);
    const ends = recs.filter((r) => r.ev === "end");
    expect(ends.map((r) => r.why)).toEqual(Array.from({ length: 9 }, () => "done"));
    expect(new Set(recs.map((r) => r.attempt))).toEqual(new Set([1]));

    // The cut was felt: renewals failed while it lasted, and were answered again once it ended.
    const lines = nodes.flatMap((n) => logLines(n));
    expect(lines.filter((l) => l["msg"] === "task lease renewal failed").length).toBeGreaterThan(0);
    const back = lines.filter((l) => l["msg"] === "task lease renewed again after the store was back");
    expect(back.length).toBeGreaterThan(0);
    expect(Math.max(...back.map((l) => Number(l["unreachableMs"])))).toBeGreaterThan(OUTAGE_MS - 3_000);
    expect(lines.filter((l) => String(l["msg"]).includes("stopping the action"))).toEqual([]);
  }, 180_000);

  it("past the bound, stops each action at its own deadline saying why, and runs it again once the store is back", async () => {
    db = await createTestDatabase();
    const d = db;
    const port = await freePort();
    proxies.push(await startProxy(port, PG_PORT));
    const viaProxy = new URL(d.url);
    viaProxy.port = String(port);
    target = targetIn("postgres", "long-outage", viaProxy.toString(), "outage test folder");
    const t = target;
    store = await openPostgresStore(d.url, { poolSize: 2 });
    const s = store;
    // A 6 s task lease with a 2.5 s margin: each action is stopped 3.2 s after its last renewal
    // (its bound: 6 s - 500 ms - 2.5 s - 300 ms - 500 ms = 2.2 s), and the lease expires 6 s after
    // it. The cut lasts 4.5 s: the store is back after the stops and before the leases expire, so
    // each node releases its attempt itself, with its own words.
    const configs = ["n1", "n2"].map((nodeId) =>
      writeNodeConfig(t, {
        nodeId,
        capacity: 1,
        ttl: "2s",
        renewEvery: "500ms",
        taskTtl: "6s",
        taskMargin: "2500ms",
        extra: recordAction(t),
      }),
    );
    ["n1", "n2"].forEach((nodeId, i) => nodes.push(startNode(t, configs[i]!, nodeId)));
    await waitFor(
      "two heartbeats",
      () => s.listNodes(),
      (n) => n.length === 2,
      { timeoutMs: 30_000 },
    );
    const tasks = ["a", "b"].map((task) => ({ id: task, action: "rec", args: { ms: 6_000 } }));
    const submitted = await cli(
      ["submit", writeDag(t, { id: "long", tasks }), "--config", configs[0]!, "--store", d.url, "--confirm"],
      { cwd: t.dir },
    );
    expect(submitted.code, submitted.stderr).toBe(0);
    await waitFor(
      "two actions running",
      () => records(t).filter((r) => r.ev === "start").length,
      (n) => n === 2,
      { timeoutMs: 30_000, intervalMs: 50 },
    );
    const cutAt = Date.now();
    await proxies.pop()!.close();
    // Each action is stopped (SIGTERM, recorded as its end) while the store is still away.
    await waitFor(
      "both first attempts stopped",
      () => records(t).filter((r) => r.ev === "end" && r.attempt === 1),
      (rs) => rs.length === 2,
      { timeoutMs: 8_000, intervalMs: 50 },
    );
    await new Promise((r) => setTimeout(r, Math.max(0, cutAt + 4_500 - Date.now())));
    proxies.push(await startProxy(port, PG_PORT));

    expect(await waitForRunStatus(s, "long", (st) => st !== "running" && st !== "pending", 60_000)).toBe(
      "succeeded",
    );
    const recs = records(t);
    for (const task of ["a", "b"]) {
      const mine = recs.filter((r) => r.task === task);
      // Attempt 1 was stopped with SIGTERM before attempt 2 started: never two at once.
      expect(mine.map((r) => `${r.ev}${r.attempt}${r.why === undefined ? "" : `:${r.why}`}`)).toEqual([
        "start1",
        "end1:term",
        "start2",
        "end2:done",
      ]);
    }
    // The node said why, in words: the store unreachable, not a lost node.
    const stops = nodes
      .flatMap((n) => logLines(n))
      .filter((l) => String(l["msg"]).includes("stopping the action before its task lease could expire"));
    expect(stops).toHaveLength(2);
    for (const l of stops) expect(String(l["why"])).toMatch(/^the store was unreachable for [0-9.]+s$/);
    console.log(`[outage] past the bound: ${String(stops[0]!["msg"])}`);
    // And the task's record says the same, distinct from a lost node: each node released its attempt.
    const requeues = (await allEvents(s)).filter(
      (e) => e.kind === "task.queued" && e.data["lostNode"] === true,
    );
    expect(requeues).toHaveLength(2);
    for (const e of requeues) {
      expect(String(e.data["reason"])).toMatch(
        /^node n[12] stopped its action: the store was unreachable for [0-9.]+s; running again$/,
      );
      expect(e.data["retrySpent"]).toBe(false);
    }
  }, 120_000);
});
