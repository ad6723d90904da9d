/**
 * The Store contract through a real PgBouncer in transaction mode (test/support/pgbouncer.ts), the
 * Store opened with pooler = "transaction" (docs/operations.md, "Behind a connection pooler"): no
 * LISTEN, no named prepared statements, no startup options, every setting made per transaction.
 * Plus what only this mode has: wake-ups by polling, the fleet protocol fence carried per
 * transaction (it still refuses a connection that does not declare it), and a direct connection's
 * startup options refused by the pooler.
 */
import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { POOLER_POLL_MS } from "../../src/adapters/postgres/change-feed.js";
import {
  LATEST_SCHEMA_VERSION,
  openPostgresStore,
  postgresStoreStats,
} from "../../src/adapters/postgres/index.js";
import { inspectPostgresStore } from "../../src/adapters/postgres/upgrade.js";
import { FLEET_PROTOCOL } from "../../src/domain/release.js";
import type { Store } from "../../src/ports/store.js";
import { describeStoreContract } from "../contracts/store.contract.js";
import type { PgBouncer } from "../support/pgbouncer.js";
import { startPgBouncer } from "../support/pgbouncer.js";
import { postgresHarness } from "../support/postgres-harness.js";
import type { TestDatabase } from "../support/postgres.js";
import { createTestDatabase, dropOrKeep } from "../support/postgres.js";
import { becomeLeader, dag, offer, ok, publishRunning, session, task } from "../support/store-fixtures.js";

let bouncer: Promise<PgBouncer> | undefined;
const pooler = (): Promise<PgBouncer> => (bouncer ??= startPgBouncer());

afterAll(async () => {
  if (bouncer !== undefined) await (await bouncer).stop();
});

const { create, capabilities } = postgresHarness({ pooler: "transaction" }, async (db) =>
  (await pooler()).url(db.name),
);

describeStoreContract({ name: "postgres behind a transaction-mode pooler", create, capabilities });

describe("PostgreSQL store behind a transaction-mode PgBouncer", () => {
  let db: TestDatabase;
  let url: string;
  let failed = false;
  const opened: Store[] = [];
  const open = async (): Promise<Store> => {
    const s = await openPostgresStore(url, { poolSize: 2, pooler: "transaction" });
    opened.push(s);
    return s;
  };

  beforeAll(async () => {
    db = await createTestDatabase();
    url = (await pooler()).url(db.name);
  });
  afterEach((test) => {
    if (test.task.result?.state === "fail") failed = true;
  });
  afterAll(async () => {
    await Promise.all(opened.map((s) => s.close()));
    if (db !== undefined) await dropOrKeep(db, failed);
  });

  it("the pooler refuses a direct-mode connection's startup options, so this mode is what gets through", async () => {
    const client = new pg.Client({
      connectionString: url,
      options: "-c dagbot.protocol=2",
    });
    client.on("error", () => {});
    await expect(client.connect()).rejects.toThrow(/unsupported startup parameter/);
    await client.end().catch(() => {});
    await expect(openPostgresStore(url, { poolSize: 1 })).rejects.toThrow(/startup parameter/);
  });

  it("a store is inspected through the pooler (dagbot migrate --dry-run, a node's start): its schema and nodes", async () => {
    const a = await open();
    await a.heartbeat({ session: session("seen"), labels: [], actions: [], capacity: 1, roomIds: [] });
    const seen = await inspectPostgresStore(url, "public", "transaction");
    expect(seen.schema).toBe(LATEST_SCHEMA_VERSION);
    expect(seen.steps).toEqual([]);
    expect(seen.nodes.map((n) => n.nodeId)).toContain("seen");
    // Without the mode, the pooler refuses the connection's startup options.
    await expect(inspectPostgresStore(url)).rejects.toThrow(/startup parameter/);
  });

  it("another Store hears a commit with no LISTEN: by its poll, naming every topic", async () => {
    const a = await open();
    const b = await open();
    const room = "!poll:example.org";
    const fence = await becomeLeader(a, room);
    const heard: string[] = [];
    let woke!: () => void;
    const wake = new Promise<void>((resolve) => (woke = resolve));
    const off = b.onChange((topic, r) => {
      heard.push(`${topic}:${r ?? "*"}`);
      if (topic === "tasks" && r === null) woke();
    });
    await publishRunning(a, fence, dag("p1", [task("t")]));
    // b's poll wakes it (room null: it cannot say what changed) within POOLER_POLL_MS; it finds the task.
    await wake;
    off();
    expect(POOLER_POLL_MS).toBeLessThanOrEqual(1_000);
    const claimed = await b.claimTask(offer(session("w"), [room]));
    expect(claimed?.task.taskId).toBe("t");
    // This Store's own commit is heard at once, naming its room.
    const own: string[] = [];
    const offOwn = b.onChange((topic, r) => own.push(`${topic}:${r ?? "*"}`));
    await b.finishTask(claimed!.token, ok);
    offOwn();
    expect(own).toContain(`done:${room}`);
    expect(heard.length).toBeGreaterThan(0);
  });

  it("the fleet protocol fence still refuses a connection through the pooler that does not declare it, and accepts this node's", async () => {
    const a = await open();
    const room = "!fence:example.org";
    const fence = await becomeLeader(a, room);
    await publishRunning(a, fence, dag("f1", [task("t")]));
    // A connection as a release before 0.2.0 makes one, through the same pooler: no dagbot.protocol.
    const older = new pg.Client({ connectionString: url });
    older.on("error", () => {});
    await older.connect();
    try {
      await expect(older.query("UPDATE tasks SET started_at = 1 WHERE task_id = 't'")).rejects.toThrow(
        new RegExp(`fleet protocol ${FLEET_PROTOCOL}`),
      );
      // The setting of a transaction before it does not leak into the next one on the server connection.
      await older.query("BEGIN");
      await older.query("SELECT set_config('dagbot.protocol', '2', true)");
      await older.query("COMMIT");
      await expect(older.query("INSERT INTO processed_events (event_id) VALUES ('x')")).rejects.toThrow(
        new RegExp(`fleet protocol ${FLEET_PROTOCOL}`),
      );
    } finally {
      await older.end().catch(() => {});
    }
    const t = await a.claimTask(offer(session("w"), [room]));
    expect(t?.task.taskId).toBe("t");
    await a.finishTask(t!.token, ok);
    expect((await a.getTask(t!.token.runId, "t"))?.status).toBe("succeeded");
    // Its commits still NOTIFY (for nodes that LISTEN directly), batched.
    expect(postgresStoreStats(a)?.notifyTransactions).toBeGreaterThan(0);
  });
});
