/**
 * A `dagbot node` on PostgreSQL with real processes: it holds at most its pool (store_pool_size,
 * default 2) plus its lease lane and one LISTEN connection; it waits for a store that is not there yet (retrying with
 * backoff, logging each attempt) and comes up when the store does; it outlives the store going away
 * and coming back; a store that refuses its config (no such role) is exit 2 at once. The "server"
 * going down and up is a TCP proxy this test starts and stops in front of the real PostgreSQL.
 */
import { readFileSync } from "node:fs";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { systemClock } from "../../src/adapters/clock/system-clock.js";
import { createProcessExecutor } from "../../src/adapters/exec/process-executor.js";
import { silentLogger } from "../../src/adapters/log/pino-logger.js";
import { openPostgresStore } from "../../src/adapters/postgres/index.js";
import { openStore } from "../../src/adapters/store-factory.js";
import { DEFAULT_LEADER_TIMINGS } from "../../src/app/leader.js";
import { startEngineNode } from "../../src/app/node.js";
import { DEFAULT_STORE_POOL_SIZE } from "../../src/config/node-config.js";
import { parseStoreLocation } from "../../src/config/store-location.js";
import type { Store } from "../../src/ports/store.js";
import {
  cli,
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
import { waitFor } from "../support/store-wait.js";
import { freePort, startProxy as proxyTo } from "../support/tcp-proxy.js";

const PG_PORT = 5432;
const startProxy = (port: number) => proxyTo(port, PG_PORT);

function logLines(node: NodeProcess): Array<Record<string, unknown>> {
  return readFileSync(node.logPath, "utf8")
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

describe("a dagbot node and its PostgreSQL connections", () => {
  let target: Target | null = null;
  let db: TestDatabase | null = null;
  let store: Store | null = null;
  const nodes: NodeProcess[] = [];
  const proxies: Array<{ close(): Promise<void> }> = [];

  beforeAll(() => requireBuild());

  afterEach(async (context) => {
    const failed = context.task.result?.state === "fail";
    for (const n of nodes.splice(0)) {
      n.kill("SIGKILL");
      await n.exited;
    }
    for (const p of proxies.splice(0)) await p.close();
    await store?.close();
    store = null;
    await target?.cleanup(failed);
    target = null;
    if (db !== null) await dropOrKeep(db, failed);
    db = null;
  });

  /** A node's URL naming it in pg_stat_activity (node-postgres lets the URL's application_name win). */
  function named(url: string, name: string, port?: number): string {
    const u = new URL(url);
    u.searchParams.set("application_name", name);
    if (port !== undefined) u.port = String(port);
    return u.toString();
  }

  async function nodeConnections(d: TestDatabase, name: string): Promise<number> {
    const rows = await d.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1",
      [name],
    );
    return rows[0]?.n ?? 0;
  }

  it("holds at most store_pool_size (default 2) + 2 connections while running 40 tasks 8 at a time", async () => {
    db = await createTestDatabase();
    const d = db;
    target = targetIn("postgres", "pool", named(d.url, "node-under-test"), "pool test folder");
    store = await openPostgresStore(d.url, { poolSize: 2 });
    const s = store;
    const config = writeNodeConfig(target, { nodeId: "pooled", capacity: 8 });
    const node = startNode(target, config, "pooled");
    nodes.push(node);
    await waitFor(
      "the node's heartbeat",
      () => s.listNodes(),
      (n) => n.length > 0,
      {
        timeoutMs: 30_000,
        intervalMs: 50,
      },
    );
    const tasks = Array.from({ length: 40 }, (_, i) => ({ id: `t${i}`, action: "work", args: { ms: 100 } }));
    const submitted = await cli(
      ["submit", writeDag(target, { id: "many", tasks }), "--config", config, "--store", d.url, "--confirm"],
      { cwd: target.dir },
    );
    expect(submitted.code, submitted.stderr).toBe(0);

    const counts: number[] = [];
    for (;;) {
      counts.push(await nodeConnections(d, "node-under-test"));
      const run = await s.getRun("local", "many");
      if (run !== null && run.status !== "running" && run.status !== "pending") break;
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(await waitForRunStatus(s, "many", () => true)).toBe("succeeded");
    console.log(
      `[pool] the node's connections, sampled ${counts.length} times over 40 tasks at capacity 8: at most ${Math.max(...counts)}`,
    );
    expect(Math.max(...counts)).toBeGreaterThan(0);
    // The pool, the lease lane and the LISTEN connection (docs/operations.md, "Running many nodes").
    expect(Math.max(...counts)).toBeLessThanOrEqual(2 + 2);
  }, 90_000);

  it("waits for a store that is down, comes up when it is back, and outlives it going away again", async () => {
    db = await createTestDatabase();
    const d = db;
    const port = await freePort();
    target = targetIn("postgres", "reach", named(d.url, "node-reach", port), "reach test folder");
    const config = writeNodeConfig(target, { nodeId: "patient" });
    const node = startNode(target, config, "patient");
    nodes.push(node);
    let exited = false;
    void node.exited.then(() => (exited = true));

    // Nothing listens yet: the node logs each failed attempt with the next delay, and stays up.
    const retries = await waitFor(
      "three logged attempts to open the store",
      () => logLines(node).filter((l) => String(l["msg"]).startsWith("cannot open the store")),
      (ls) => ls.length >= 3,
      { timeoutMs: 20_000, intervalMs: 50 },
    );
    expect(retries.map((l) => l["attempt"])).toEqual([1, 2, 3]);
    for (const l of retries) {
      expect(l["retryInMs"]).toBeGreaterThan(0);
      expect(String(l["error"])).toContain("ECONNREFUSED");
    }
    expect(exited).toBe(false);

    // The server "comes up": the node opens its store, beats and runs a task.
    proxies.push(await startProxy(port));
    store = await openPostgresStore(d.url, { poolSize: 2 });
    const s = store;
    await waitFor(
      "the node's heartbeat",
      () => s.listNodes(),
      (n) => n.length > 0,
      {
        timeoutMs: 30_000,
        intervalMs: 50,
      },
    );
    const first = await cli(
      [
        "submit",
        writeDag(target, { id: "after-up", tasks: [{ id: "a", action: "echo", args: { message: "hi" } }] }),
        "--config",
        config,
        "--store",
        d.url,
        "--confirm",
      ],
      { cwd: target.dir },
    );
    expect(first.code, first.stderr).toBe(0);
    expect(await waitForRunStatus(s, "after-up", (st) => st !== "running" && st !== "pending", 30_000)).toBe(
      "succeeded",
    );

    // The server "goes down" under the running node (every connection dropped) for a while: its
    // operations fail, and the node stays up.
    const before = logLines(node).length;
    await proxies.pop()!.close();
    await waitFor(
      "the node to notice the store is gone",
      () => logLines(node).length,
      (n) => n > before + 2,
      {
        timeoutMs: 20_000,
        intervalMs: 50,
      },
    );
    await new Promise((r) => setTimeout(r, 2_000));
    expect(exited).toBe(false);

    // Back up: the same process runs the next task.
    proxies.push(await startProxy(port));
    const second = await cli(
      [
        "submit",
        writeDag(target, {
          id: "after-back",
          tasks: [{ id: "b", action: "echo", args: { message: "again" } }],
        }),
        "--config",
        config,
        "--store",
        d.url,
        "--confirm",
      ],
      { cwd: target.dir },
    );
    expect(second.code, second.stderr).toBe(0);
    expect(
      await waitForRunStatus(s, "after-back", (st) => st !== "running" && st !== "pending", 60_000),
    ).toBe("succeeded");
    expect(exited).toBe(false);
  }, 120_000);

  it("stops at once with exit 2 when the store refuses the config (no such role), without retrying", async () => {
    db = await createTestDatabase();
    const u = new URL(db.url);
    u.username = "no_such_role_dagbot";
    target = targetIn("postgres", "refused", u.toString(), "refused test folder");
    const config = writeNodeConfig(target, { nodeId: "refused" });
    const node = startNode(target, config, "refused");
    nodes.push(node);
    const { code } = await node.exited;
    const log = readFileSync(node.logPath, "utf8");
    expect(code).toBe(2);
    expect(log).toContain("cannot open the store");
    expect(log).toContain("no_such_role_dagbot");
    expect(log).not.toContain("retrying");
  }, 60_000);

  it("with five rooms a node's store still holds one LISTEN, one lease lane and at most store_pool_size pooled connections", async () => {
    db = await createTestDatabase();
    const d = db;
    const location = parseStoreLocation(d.url);
    if (!location.ok) throw new Error(location.message);
    store = await openStore(location.store, { poolSize: DEFAULT_STORE_POOL_SIZE });
    const rooms = ["r1", "r2", "r3", "r4", "r5"];
    const node = startEngineNode(
      {
        nodeId: "five-rooms",
        labels: [],
        capacity: 8,
        roomIds: rooms,
        actions: new Map(),
        lease: { ttlMs: 800, renewEveryMs: 100, acquireEveryMs: 100 },
        leader: DEFAULT_LEADER_TIMINGS,
        taskLeaseMs: 800,
        heartbeatEveryMs: 100,
        workerPollMs: 50,
        work: true,
        initialCap: 5,
      },
      {
        store,
        executor: createProcessExecutor(),
        clock: systemClock,
        logger: silentLogger(),
        processInbox: null,
      },
    );
    try {
      const s = store;
      await waitFor(
        "the node leading all five rooms",
        () => Promise.all(rooms.map((r) => s.getLease(r))),
        (leases) => leases.every((l) => l !== null && l.holder !== null),
        { timeoutMs: 20_000, intervalMs: 50 },
      );
      const seen = { pool: 0, lease: 0, listen: 0 };
      for (let i = 0; i < 40; i += 1) {
        const rows = await d.query<{ application_name: string; n: number }>(
          `SELECT application_name, count(*)::int AS n FROM pg_stat_activity
            WHERE datname = current_database() AND pid <> pg_backend_pid() GROUP BY application_name`,
        );
        for (const r of rows) {
          if (r.application_name === "dagbot") seen.pool = Math.max(seen.pool, r.n);
          if (r.application_name === "dagbot-listen") seen.listen = Math.max(seen.listen, r.n);
          if (r.application_name === "dagbot-lease") seen.lease = Math.max(seen.lease, r.n);
        }
        await new Promise((r) => setTimeout(r, 25));
      }
      console.log(
        `[pool] five rooms: at most ${seen.pool} pooled connections, ${seen.lease} lease lane and ${seen.listen} LISTEN`,
      );
      expect(seen.listen).toBe(1);
      expect(seen.lease).toBe(1);
      expect(seen.pool).toBeGreaterThan(0);
      expect(seen.pool).toBeLessThanOrEqual(DEFAULT_STORE_POOL_SIZE);
    } finally {
      await node.stop();
    }
  }, 60_000);
});
