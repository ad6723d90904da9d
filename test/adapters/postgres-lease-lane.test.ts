/**
 * The PostgreSQL Store's lease lane (src/adapters/postgres/db.ts, Lane; docs/operations.md,
 * "Running many nodes"), on a real server, directly and through a real transaction-mode PgBouncer:
 * with every connection of the Store's pool held by a claim that waits on a lock, and more claims
 * queued for the pool, the node's room lease statements (renewal, lease wishes, a read) and its own
 * heartbeat still complete, while the lock is held and before any claim does. What is asserted is
 * the order, not a time; the times are printed.
 */
import { performance } from "node:perf_hooks";
import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { PoolerMode } from "../../src/adapters/postgres/db.js";
import { openPostgresStore } from "../../src/adapters/postgres/index.js";
import type { Store } from "../../src/ports/store.js";
import type { PgBouncer } from "../support/pgbouncer.js";
import { startPgBouncer } from "../support/pgbouncer.js";
import type { TestDatabase } from "../support/postgres.js";
import { createTestDatabase, dropOrKeep } from "../support/postgres.js";
import { LEASE_TTL_MS, becomeLeader, offer, session } from "../support/store-fixtures.js";

/** How long the lock that stalls the pool is held at most: far past a renewal that waits for nothing. */
const HOLD_MS = 4_000;
const POOL_SIZE = 2;
/** Claims sent: enough to take every pooled connection and leave some queued for one. */
const CLAIMS = POOL_SIZE + 3;

let bouncer: Promise<PgBouncer> | undefined;
const pooler = (): Promise<PgBouncer> => (bouncer ??= startPgBouncer());

afterAll(async () => {
  if (bouncer !== undefined) await (await bouncer).stop();
});

describe.each<{ how: string; mode: PoolerMode }>([
  { how: "directly", mode: "none" },
  { how: "through a transaction-mode PgBouncer", mode: "transaction" },
])("PostgreSQL lease lane, $how", ({ mode }) => {
  let db: TestDatabase;
  let failed = false;
  const opened: Store[] = [];
  const held: pg.Client[] = [];

  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterEach((test) => {
    if (test.task.result?.state === "fail") failed = true;
  });
  afterAll(async () => {
    await Promise.all(held.map((c) => c.end().catch(() => {})));
    await Promise.all(opened.map((s) => s.close()));
    if (db !== undefined) await dropOrKeep(db, failed);
  });

  /** The backends of the test database that wait for a lock, but `except`'s. */
  const waitingOnLocks = async (except: number): Promise<number> => {
    const rows = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> $1`,
      [except],
    );
    return rows[0]?.n ?? 0;
  };

  it("renews the room's lease and beats while every pooled connection waits and more claims queue", async () => {
    const url = mode === "transaction" ? (await pooler()).url(db.name) : db.url;
    const store = await openPostgresStore(url, { poolSize: POOL_SIZE, pooler: mode });
    opened.push(store);
    const room = "!lane:example.org";
    const fence = await becomeLeader(store, room);
    const beat = {
      session: fence.session,
      labels: [],
      capacity: 1,
      actions: ["echo"],
      roomIds: [room],
    };
    await store.heartbeat(beat);

    // Another session locks the tasks table: every claim waits for it, holding its pooled
    // connection (and, through PgBouncer, a server connection) meanwhile.
    const holder = new pg.Client({ connectionString: db.url });
    held.push(holder);
    await holder.connect();
    const holderPid = (await holder.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0]?.pid;
    await holder.query("BEGIN; LOCK TABLE tasks IN ACCESS EXCLUSIVE MODE");
    let released = false;
    const release = async (): Promise<void> => {
      if (released) return;
      released = true;
      await holder.query("COMMIT");
    };
    // The lock goes at HOLD_MS at the latest, so a renewal stuck behind the claims ends (and fails
    // the test) instead of hanging.
    const deadline = setTimeout(() => void release(), HOLD_MS);

    let claimsDone = 0;
    const claims = Array.from({ length: CLAIMS }, (_, i) =>
      store.claimTask(offer(session(`worker-${i}`), [room])).finally(() => (claimsDone += 1)),
    );
    try {
      // Every pooled connection waits on the lock; the other claims wait for a connection.
      for (let i = 0; (await waitingOnLocks(holderPid ?? -1)) < POOL_SIZE; i++) {
        if (i > 200) throw new Error(`the claims never took all ${POOL_SIZE} pooled connections`);
        await new Promise((r) => setTimeout(r, 10));
      }
      expect(await waitingOnLocks(holderPid ?? -1)).toBe(POOL_SIZE);

      const times: Record<string, number> = {};
      const timed = async <T>(name: string, call: () => Promise<T>): Promise<T> => {
        const at = performance.now();
        const value = await call();
        times[name] = Math.round(performance.now() - at);
        return value;
      };
      const renewal = await timed("renewLease", () => store.renewLease(fence, LEASE_TTL_MS));
      const wishes = await timed("syncLeases", () =>
        store.syncLeases(fence.session, LEASE_TTL_MS, [{ roomId: room, term: fence.term }]),
      );
      const lease = await timed("getLease", () => store.getLease(room));
      await timed("heartbeat", () => store.heartbeat(beat));
      console.log(
        `[lease lane, ${mode === "none" ? "direct" : "pgbouncer"}] with the pool of ${POOL_SIZE} held and ` +
          `${CLAIMS - POOL_SIZE} claims queued (lock held up to ${HOLD_MS} ms): ` +
          Object.entries(times)
            .map(([k, v]) => `${k} ${v} ms`)
            .join(", "),
      );

      // All of it done while the lock was held and no claim had its answer.
      expect({ released, claimsDone }).toEqual({ released: false, claimsDone: 0 });
      expect(renewal.expiresAt).toBeGreaterThan(0);
      expect(wishes).toEqual([expect.objectContaining({ roomId: room, outcome: "renewed" })]);
      expect(lease?.term).toBe(fence.term);
    } finally {
      clearTimeout(deadline);
      await release();
      await Promise.allSettled(claims);
    }
    // The claims go on once the lock is gone (there is nothing to claim).
    expect(claimsDone).toBe(CLAIMS);
    await store.close();
  }, 30_000);
});

describe("PostgreSQL lease lane, connections", () => {
  let db: TestDatabase;
  let failed = false;
  let store: Store | undefined;

  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterEach((test) => {
    if (test.task.result?.state === "fail") failed = true;
  });
  afterAll(async () => {
    await store?.close();
    if (db !== undefined) await dropOrKeep(db, failed);
  });

  it("holds one connection for the lane beside the pool", async () => {
    store = await openPostgresStore(db.url, { poolSize: POOL_SIZE });
    const s = store;
    const fence = await becomeLeader(s, "!count:example.org");
    await Promise.all([...Array.from({ length: 8 }, () => s.listNodes()), s.renewLease(fence, LEASE_TTL_MS)]);
    const rows = await db.query<{ application_name: string; n: number }>(
      `SELECT application_name, count(*)::int AS n FROM pg_stat_activity
        WHERE datname = current_database() AND pid <> pg_backend_pid() GROUP BY application_name`,
    );
    const by = Object.fromEntries(rows.map((r) => [r.application_name, r.n]));
    expect(by["dagbot-lease"]).toBe(1);
    expect(by["dagbot"]).toBeLessThanOrEqual(POOL_SIZE);
  });
});
