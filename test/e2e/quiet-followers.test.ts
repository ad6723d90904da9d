/**
 * Quiet followers, with real `dagbot node` processes on PostgreSQL: a follower reaches
 * the server through a proxy that reads the wire protocol and counts the statements it executes,
 * by their text. While another node leads, the follower does not poll the lease every
 * acquire_every (its failed acquire says when the lease expires and it waits for that), nor claim
 * every second (claims come from the leader's wake-ups; the idle tick is slow). After kill -9 of
 * the leader it still takes over once the lease has expired, and not later than one TTL after.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { connect, createServer } from "node:net";
import type { Server, Socket } from "node:net";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { openPostgresStore } from "../../src/adapters/postgres/index.js";
import type { Store } from "../../src/ports/store.js";
import { requireBuild, startNode, targetIn, writeNodeConfig } from "../support/engine-cluster.js";
import type { NodeProcess, Target } from "../support/engine-cluster.js";
import { createTestDatabase, dropOrKeep } from "../support/postgres.js";
import type { TestDatabase } from "../support/postgres.js";
import { waitFor } from "../support/store-wait.js";

const TTL_MS = 2_000;
const ACQUIRE_EVERY_MS = 500;
const WINDOW_MS = 8_000;

/** Executed statements per query text, read from the client → server half of the wire protocol. */
class StatementCounter {
  readonly executed: string[] = [];
  private readonly texts = new Map<string, string>();

  /** Feeds one connection's client bytes; returns the per-connection parser. */
  parser(): (chunk: Buffer) => void {
    let buf = Buffer.alloc(0);
    let started = false;
    return (chunk) => {
      buf = Buffer.concat([buf, chunk]);
      for (;;) {
        if (!started) {
          // The startup message (or an SSL request) has a length but no type byte.
          if (buf.length < 4) return;
          const len = buf.readInt32BE(0);
          if (buf.length < len) return;
          const code = buf.readInt32BE(4);
          buf = buf.subarray(len);
          if (code !== 80877103) started = true; // 80877103: SSLRequest, the startup follows
          continue;
        }
        if (buf.length < 5) return;
        const type = String.fromCharCode(buf[0]!);
        const len = buf.readInt32BE(1);
        if (buf.length < 1 + len) return;
        const body = buf.subarray(5, 1 + len);
        buf = buf.subarray(1 + len);
        const cstrings = (): string[] => body.toString("utf8").split("\u0000");
        if (type === "P") {
          const [name = "", text = ""] = cstrings();
          this.texts.set(name, text);
        } else if (type === "B") {
          const [, statement = ""] = cstrings();
          this.executed.push(this.texts.get(statement) ?? "?");
        } else if (type === "Q") {
          this.executed.push(cstrings()[0] ?? "");
        }
      }
    };
  }

  count(match: (text: string) => boolean, from = 0): number {
    return this.executed.slice(from).filter(match).length;
  }
}

async function countingProxy(counter: StatementCounter): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((inbound) => {
    const outbound = connect(5432, "127.0.0.1");
    const parse = counter.parser();
    for (const s of [inbound, outbound]) {
      sockets.add(s);
      s.on("close", () => sockets.delete(s));
      s.on("error", () => {
        inbound.destroy();
        outbound.destroy();
      });
    }
    inbound.on("data", (c: Buffer) => parse(c));
    inbound.pipe(outbound);
    outbound.pipe(inbound);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("no port");
  return {
    port: address.port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

describe("quiet followers on PostgreSQL: real node processes", () => {
  let db: TestDatabase | null = null;
  let target: Target | null = null;
  let store: Store | null = null;
  let proxy: { close(): Promise<void> } | null = null;
  const nodes: NodeProcess[] = [];

  beforeAll(() => requireBuild());

  afterEach(async (context) => {
    const failed = context.task.result?.state === "fail";
    for (const n of nodes.splice(0)) {
      n.kill("SIGKILL");
      await n.exited;
    }
    await proxy?.close();
    await store?.close();
    await target?.cleanup(failed);
    if (db !== null) await dropOrKeep(db, failed);
    db = null;
    target = null;
    store = null;
    proxy = null;
  });

  it("a follower neither polls the lease every acquire_every nor claims every second, and still takes over after kill -9 of the leader", async () => {
    db = await createTestDatabase();
    const counter = new StatementCounter();
    const p = await countingProxy(counter);
    proxy = p;
    target = targetIn("postgres", "quiet", db.url, "quiet-followers test folder");
    const s = await openPostgresStore(db.url, { poolSize: 2 });
    store = s;
    const timings = { ttl: `${TTL_MS}ms`, renewEvery: "500ms", acquireEvery: `${ACQUIRE_EVERY_MS}ms` };
    const leaderConfig = writeNodeConfig(target, { nodeId: "leader", ...timings });
    const followerConfig = writeNodeConfig(target, { nodeId: "follower", ...timings });
    const viaProxy = new URL(db.url);
    viaProxy.port = String(p.port);
    writeFileSync(
      followerConfig,
      readFileSync(followerConfig, "utf8").replace(
        `store = ${JSON.stringify(db.url)}`,
        `store = ${JSON.stringify(viaProxy.toString())}`,
      ),
    );
    nodes.push(startNode(target, leaderConfig, "leader"));
    await waitFor(
      "the first node to lead",
      () => s.getLease("local"),
      (l) => l?.holder?.nodeId === "leader",
      { timeoutMs: 30_000, intervalMs: 50 },
    );
    const follower = startNode(target, followerConfig, "follower");
    nodes.push(follower);
    await waitFor(
      "the follower's heartbeat",
      () => s.listNodes(),
      (ns) => ns.some((n) => n.session.nodeId === "follower"),
      { timeoutMs: 30_000, intervalMs: 50 },
    );
    // Past its start (first acquire, first claim), then a window of plain following.
    await new Promise((r) => setTimeout(r, 2 * TTL_MS));
    const from = counter.executed.length;
    await new Promise((r) => setTimeout(r, WINDOW_MS));
    const lease = counter.count((t) => t.includes("room_leases"), from);
    const claims = counter.count((t) => t.includes("'task.running'"), from);
    const all = counter.executed.length - from;
    console.log(
      `[quiet] follower over ${WINDOW_MS} ms: ${all} statements, ${lease} on the lease, ${claims} claims ` +
        `(polling would be ${WINDOW_MS / ACQUIRE_EVERY_MS} lease attempts and ${WINDOW_MS / 1000} claims)`,
    );
    expect(counter.executed.length).toBeGreaterThan(0);
    // It still tries: at least once per TTL, since the leader keeps renewing.
    expect(lease).toBeGreaterThanOrEqual(1);
    // But not once per acquire_every (a polling follower makes WINDOW/ACQUIRE_EVERY attempts, three
    // statements each), and claims only on its slow tick.
    expect(lease).toBeLessThan(WINDOW_MS / ACQUIRE_EVERY_MS / 2);
    expect(claims).toBeLessThanOrEqual(2);
    expect((await s.getLease("local"))?.holder?.nodeId).toBe("leader");

    const before = await s.getLease("local");
    nodes[0]!.kill("SIGKILL");
    const taken = await waitFor(
      "the follower to take over",
      () => s.getLease("local"),
      (l) => l?.holder?.nodeId === "follower",
      { timeoutMs: 30_000, intervalMs: 20 },
    );
    expect(taken?.term).toBe((before?.term ?? 0) + 1);
    const acquired = (await s.readEvents("local", 0)).find(
      (e) => e.kind === "lease.acquired" && e.term === taken?.term,
    );
    // Never before the dead leader's lease expired, and not a TTL after (it waited for the expiry).
    expect(acquired?.at).toBeGreaterThanOrEqual(before?.expiresAt ?? Infinity);
    expect(acquired!.at).toBeLessThanOrEqual((before?.expiresAt ?? 0) + TTL_MS);
  }, 90_000);
});
