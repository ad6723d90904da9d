/** SQLite schema at open: migrations idempotent on restart, a newer schema refused, bad files reported as StoreError. */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeEach, describe, expect, it } from "vitest";
import Database from "better-sqlite3";
import { LATEST_SCHEMA_VERSION, openSqliteStore } from "../../src/adapters/sqlite/index.js";
import { migrations } from "../../src/adapters/sqlite/migrations.js";
import { SchemaTooNewError, StoreError } from "../../src/ports/errors.js";
import { becomeLeader, chainDag, publishRunning } from "../support/store-fixtures.js";
import { sqliteCapabilities, sqliteTestDb } from "../support/sqlite-harness.js";

const db = sqliteTestDb("sqlite-migrations");
const caps = sqliteCapabilities(() => db);
let failed = false;
beforeEach(({ onTestFailed }) =>
  onTestFailed(() => {
    failed = true;
  }),
);
afterAll(() => db.cleanup(failed));

describe("SQLite migrations", () => {
  it("apply once; reopening (a restart) changes nothing and keeps the data", async () => {
    const first = await db.open();
    const fence = await becomeLeader(first, "!mig");
    const run = await publishRunning(first, fence, chainDag("kept", 3));
    await first.close();
    const tables = () =>
      db.raw().prepare("SELECT type, name, sql FROM sqlite_master ORDER BY type, name").all() as unknown[];
    const before = tables();
    const versions = () => db.raw().prepare("SELECT version, applied_at FROM schema_version").all();
    const v1 = versions();
    expect(v1).toHaveLength(LATEST_SCHEMA_VERSION);
    for (let i = 0; i < 3; i++) await (await db.open()).close();
    expect(versions()).toEqual(v1);
    expect(tables()).toEqual(before);
    const again = await db.open();
    expect((await again.listTasks(run.runId)).map((t) => t.taskId)).toEqual(["t0", "t1", "t2"]);
    await again.close();
    expect(await caps.schemaVersion()).toBe(LATEST_SCHEMA_VERSION);
  });

  it("refuse a database written by a newer dagbot, and leave it untouched", async () => {
    await (await db.open()).close();
    await caps.forceSchemaVersion(LATEST_SCHEMA_VERSION + 1);
    const before = db.raw().prepare("SELECT version FROM schema_version ORDER BY version").all();
    const e = await db.open().catch((x: unknown) => x);
    expect(e).toBeInstanceOf(SchemaTooNewError);
    expect(e).toMatchObject({ found: LATEST_SCHEMA_VERSION + 1, supported: LATEST_SCHEMA_VERSION });
    expect(db.raw().prepare("SELECT version FROM schema_version ORDER BY version").all()).toEqual(before);
    db.raw().prepare("DELETE FROM schema_version WHERE version > ?").run(LATEST_SCHEMA_VERSION);
    await (await db.open()).close();
  });

  it("version 7 keeps event seqs rising past every seq handed out before, also one whose row was pruned", async () => {
    const path = join(db.dir, "events-v6.db");
    const raw = new Database(path);
    raw.exec("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL) STRICT");
    for (const m of migrations().filter((m) => m.version <= 6)) {
      raw.exec(m.sql);
      raw.prepare("INSERT INTO schema_version (version, applied_at) VALUES (?, ?)").run(m.version, 0);
    }
    const add = raw.prepare(
      "INSERT INTO events (room_id, at, kind, data) VALUES ('!old', 1, 'task.queued', '{}')",
    );
    for (let i = 0; i < 5; i++) add.run();
    // The newest two were pruned: AUTOINCREMENT still remembered 5.
    raw.prepare("DELETE FROM events WHERE seq > 3").run();
    raw.close();
    const store = await openSqliteStore(path, { migrate: true });
    try {
      const fence = await becomeLeader(store, "!new");
      await publishRunning(store, fence, chainDag("after", 2));
      const fresh = await store.readEvents("!new", 0, 100);
      expect(fresh.length).toBeGreaterThan(0);
      expect(Math.min(...fresh.map((e) => e.seq))).toBeGreaterThan(5);
      // The old room's events are kept as they were.
      expect((await store.readEvents("!old", 0, 100)).map((e) => e.seq)).toEqual([1, 2, 3]);
    } finally {
      await store.close();
    }
    const check = new Database(path);
    const sql = (
      check.prepare("SELECT sql FROM sqlite_master WHERE name = 'events'").get() as { sql: string }
    ).sql;
    check.close();
    expect(sql).not.toContain("AUTOINCREMENT");
  });

  it("retention keeps the newest event, so the next seq stays above every seq handed out", async () => {
    const store = await db.open();
    try {
      const fence = await becomeLeader(store, "!prune");
      const add = db
        .raw()
        .prepare("INSERT INTO events (room_id, at, kind, data) VALUES ('!prune', 1, 'room.cap', '{}')");
      for (let i = 0; i < 3; i++) add.run();
      db.raw().prepare("UPDATE events SET at = 1 WHERE room_id = '!prune'").run();
      const newest = (db.raw().prepare("SELECT MAX(seq) AS s FROM events").get() as { s: number }).s;
      const limits = { olderThanMs: 0, nodesOlderThanMs: 3_600_000, keysOlderThanMs: 0, runs: 10, rows: 100 };
      const pruned = await store.pruneBatch!(fence, limits);
      expect(pruned.events).toBeGreaterThan(0);
      const left = db.raw().prepare("SELECT seq FROM events WHERE room_id = '!prune'").all() as Array<{
        seq: number;
      }>;
      // The prune's own line comes after its deletes; of those before, only the newest is left.
      expect(left.map((r) => r.seq).filter((seq) => seq <= newest)).toEqual([newest]);
      await publishRunning(store, fence, chainDag("later", 1));
      const after = await store.readEvents("!prune", newest, 100);
      expect(after.length).toBeGreaterThan(0);
    } finally {
      await store.close();
    }
  });

  it("report a missing directory or a file that is not a database as a StoreError naming the path", async () => {
    const missing = join(db.dir, "no-such-dir", "store.db");
    const e1 = await openSqliteStore(missing).catch((x: unknown) => x);
    expect(e1).toBeInstanceOf(StoreError);
    expect(String((e1 as Error).message)).toContain(missing);
    const junk = join(db.dir, "junk.db");
    writeFileSync(junk, "this is not a database, just text that is long enough to have a header".repeat(10));
    const e2 = await openSqliteStore(junk).catch((x: unknown) => x);
    expect(e2).toBeInstanceOf(StoreError);
    expect(String((e2 as Error).message)).toContain(junk);
  });
});
