/** SQLite schema at open: migrations idempotent on restart, a newer schema refused, bad files reported as StoreError. */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeEach, describe, expect, it } from "vitest";
import { LATEST_SCHEMA_VERSION, openSqliteStore } from "../../src/adapters/sqlite/index.js";
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
