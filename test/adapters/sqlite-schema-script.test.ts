/**
 * SQLite's schema script (src/adapters/sqlite/schema.sql, docs/architecture.md §11): an empty store
 * is created from it in one step instead of 21 migrations, so it must be exactly what the migrations
 * make (sqlite_master entry for entry, and the same schema_version rows), and a migration newer than
 * it must still apply on top. A new migration leaves it behind: `UPDATE_SCHEMA_GOLDEN=1 npx vitest
 * run test/adapters/sqlite-schema-script.test.ts` writes it again from the migrated schema.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import Database from "better-sqlite3";
import { afterAll, beforeEach, describe, expect, it } from "vitest";
import {
  carryOut,
  LATEST_SCHEMA_VERSION,
  migrations,
  schemaScript,
} from "../../src/adapters/sqlite/migrations.js";
import type { SchemaScript } from "../../src/adapters/store-common/migrations.js";
import { migrationScript, readSchemaScript } from "../../src/adapters/store-common/migrations.js";
import type { Migration } from "../../src/adapters/store-common/schema.js";
import { dumpSqliteSchema, readSchemaGolden, sqliteSchemaScript } from "../support/schema-dump.js";
import { sqliteTestDb } from "../support/sqlite-harness.js";

const UPDATE = process.env["UPDATE_SCHEMA_GOLDEN"] === "1";
const SCRIPT_FILE = new URL("../../src/adapters/sqlite/schema.sql", import.meta.url);

let failed = false;
beforeEach(({ onTestFailed }) =>
  onTestFailed(() => {
    failed = true;
  }),
);
const db = sqliteTestDb("schema-script");
afterAll(() => db.cleanup(failed));

let files = 0;
/** A new database file, opened raw (closed by the caller). */
const fresh = (): Database.Database => new Database(join(db.dir, `s${++files}.db`));

/** `migrations` carried out on `raw` as a store opening it does, from `schema` when given. */
function migrate(
  raw: Database.Database,
  list: readonly Migration[],
  latest: number,
  schema?: SchemaScript,
): { from: number; to: number } {
  const tx = raw.transaction(() =>
    carryOut(
      raw,
      migrationScript(() => list, latest, true, schema === undefined ? undefined : () => schema),
      0,
    ),
  );
  return tx.immediate();
}

const versions = (raw: Database.Database): unknown[] =>
  raw.prepare("SELECT version, applied_at FROM schema_version ORDER BY version").all();

/** A database made by the migrations alone, 1 to `upTo`. */
function migrated(upTo: number): Database.Database {
  const raw = fresh();
  migrate(
    raw,
    migrations().filter((m) => m.version <= upTo),
    upTo,
  );
  return raw;
}

describe("SQLite's schema script", () => {
  it("is the schema the migrations leave, at this release's schema", () => {
    const raw = migrated(LATEST_SCHEMA_VERSION);
    try {
      const expected = sqliteSchemaScript(raw, LATEST_SCHEMA_VERSION);
      if (UPDATE) writeFileSync(SCRIPT_FILE, expected);
      expect(
        readFileSync(SCRIPT_FILE, "utf8"),
        "src/adapters/sqlite/schema.sql is behind the migrations: write it again with UPDATE_SCHEMA_GOLDEN=1",
      ).toBe(expected);
      expect(schemaScript().version).toBe(LATEST_SCHEMA_VERSION);
    } finally {
      raw.close();
    }
  });

  it("makes an empty store exactly what the migrations make: every sqlite_master entry and schema_version row", () => {
    const byMigrations = migrated(LATEST_SCHEMA_VERSION);
    const byScript = fresh();
    try {
      // No migration file is read: the list the runner would apply is empty.
      expect(migrate(byScript, [], LATEST_SCHEMA_VERSION, schemaScript())).toEqual({
        from: 0,
        to: LATEST_SCHEMA_VERSION,
      });
      expect(dumpSqliteSchema(byScript)).toBe(dumpSqliteSchema(byMigrations));
      expect(dumpSqliteSchema(byScript)).toBe(readSchemaGolden("sqlite").schema);
      expect(versions(byScript)).toEqual(versions(byMigrations));
      expect(versions(byScript)).toHaveLength(LATEST_SCHEMA_VERSION);
      expect(byScript.pragma("user_version", { simple: true })).toBe(
        byMigrations.pragma("user_version", { simple: true }),
      );
      expect(byScript.pragma("integrity_check", { simple: true })).toBe("ok");
    } finally {
      byMigrations.close();
      byScript.close();
    }
  });

  it("is what a store opened empty is created from: the migrated schema, versions 1 to this release's", async () => {
    const store = await db.open();
    await store.close();
    const raw = new Database(db.path, { readonly: true });
    try {
      expect(dumpSqliteSchema(raw)).toBe(readSchemaGolden("sqlite").schema);
      expect(raw.prepare("SELECT version FROM schema_version ORDER BY version").pluck().all()).toEqual(
        Array.from({ length: LATEST_SCHEMA_VERSION }, (_, i) => i + 1),
      );
    } finally {
      raw.close();
    }
  });

  it("takes the migrations newer than it on top: an older script plus the rest is the migrated schema", () => {
    const older = LATEST_SCHEMA_VERSION - 3;
    const at = migrated(older);
    const file = join(db.dir, "older-schema.sql");
    writeFileSync(file, sqliteSchemaScript(at, older));
    at.close();
    const script = readSchemaScript(pathToFileURL(file), LATEST_SCHEMA_VERSION);
    expect(script.version).toBe(older);
    const byScript = fresh();
    const byMigrations = migrated(LATEST_SCHEMA_VERSION);
    try {
      migrate(byScript, migrations(), LATEST_SCHEMA_VERSION, script);
      expect(dumpSqliteSchema(byScript)).toBe(dumpSqliteSchema(byMigrations));
      expect(versions(byScript)).toEqual(versions(byMigrations));
    } finally {
      byScript.close();
      byMigrations.close();
    }
  });

  it("takes a migration added after it: this release's script plus one more is the migrated schema", () => {
    const next: Migration = {
      version: LATEST_SCHEMA_VERSION + 1,
      summary: "a later migration",
      sql: "CREATE TABLE later (x INTEGER NOT NULL) STRICT; CREATE INDEX later_x ON later (x); ALTER TABLE tasks ADD COLUMN later_note TEXT;",
    };
    const all = [...migrations(), next];
    const byScript = fresh();
    const byMigrations = fresh();
    try {
      expect(migrate(byScript, all, next.version, schemaScript())).toEqual({ from: 0, to: next.version });
      migrate(byMigrations, all, next.version);
      expect(dumpSqliteSchema(byScript)).toContain("later_note");
      expect(dumpSqliteSchema(byScript)).toBe(dumpSqliteSchema(byMigrations));
      expect(versions(byScript)).toEqual(versions(byMigrations));
    } finally {
      byScript.close();
      byMigrations.close();
    }
  });
});

describe("the migration runner with a schema script", () => {
  const list: Migration[] = [1, 2, 3].map((version) => ({ version, summary: `v${version}`, sql: "" }));
  /** The steps the runner asks for, given the recorded version `from`; whether it read the files. */
  function steps(from: number, schema?: SchemaScript): { steps: string[]; read: boolean } {
    let read = false;
    const script = migrationScript(
      () => {
        read = true;
        return list;
      },
      3,
      true,
      schema === undefined ? undefined : () => schema,
    );
    const out: string[] = [];
    let next = script.next();
    while (next.done !== true) {
      const s = next.value;
      out.push(
        s.step === "apply"
          ? `apply ${s.migration.version}`
          : s.step === "create"
            ? `create ${s.schema.version}`
            : s.step,
      );
      next = script.next(s.step === "version" ? from : undefined);
    }
    return { steps: out, read };
  }

  it("creates an empty store from the script, reading no migration file when the script is current", () => {
    expect(steps(0, { version: 3, sql: "" })).toEqual({
      steps: ["version", "prepare", "create 3"],
      read: false,
    });
    expect(steps(0, { version: 2, sql: "" })).toEqual({
      steps: ["version", "prepare", "create 2", "apply 3"],
      read: true,
    });
  });

  it("migrates a store that has a schema file by file, as without a script", () => {
    expect(steps(1, { version: 3, sql: "" })).toEqual({
      steps: ["version", "prepare", "apply 2", "apply 3"],
      read: true,
    });
    expect(steps(0)).toEqual({ steps: ["version", "prepare", "apply 1", "apply 2", "apply 3"], read: true });
    expect(steps(3, { version: 3, sql: "" })).toEqual({ steps: ["version"], read: false });
  });
});
