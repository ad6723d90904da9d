/**
 * The SQLite schema: numbered SQL files in ./migrations/ (docs/architecture.md §11),
 * applied at open by the shared runner (store-common/migrations.ts) inside one BEGIN IMMEDIATE
 * transaction. Add a file for a new version; never edit a released one (test/adapters/schema-golden.test.ts).
 * An empty store is created from ./schema.sql, the schema those files leave as one script, then
 * given the files newer than it (test/adapters/sqlite-schema-script.test.ts keeps it equal to them).
 * A database whose recorded version is newer than this release's schema is refused.
 */
import type Database from "better-sqlite3";
import { STORE_SCHEMA } from "../../domain/release.js";
import type { Migration } from "../store-common/schema.js";
import type { MigrationScript, SchemaScript } from "../store-common/migrations.js";
import * as runner from "../store-common/migrations.js";
import { treeUrl } from "../../package-files.js";

export const LATEST_SCHEMA_VERSION = STORE_SCHEMA;

const FOLDER = treeUrl("adapters/sqlite/migrations/");

/** The migration files, versions 1 to LATEST_SCHEMA_VERSION, read when first needed. */
export const migrations = (): readonly Migration[] => runner.readMigrations(FOLDER, LATEST_SCHEMA_VERSION);

/** The schema script an empty store is created from, read when first needed. */
export const schemaScript = (): SchemaScript => runner.readSchemaScript(SCHEMA_FILE, LATEST_SCHEMA_VERSION);

const SCHEMA_FILE = treeUrl("adapters/sqlite/schema.sql");

/** The recorded version, 0 for an empty database. */
export function currentSchemaVersion(db: Database.Database): number {
  const exists = db
    .prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'")
    .get();
  if (exists === undefined) return 0;
  const row = db.prepare("SELECT MAX(version) AS v FROM schema_version").get() as { v: number | null };
  return row.v ?? 0;
}

/**
 * Whether a store at `found` may be opened by this release (store-common/migrations.ts). Checked
 * before anything is written, so a refused store is left byte for byte as it was.
 */
export function checkSchemaVersion(found: number, migrate: boolean): void {
  runner.checkSchemaVersion(found, LATEST_SCHEMA_VERSION, migrate);
}

/**
 * Bring the schema to LATEST_SCHEMA_VERSION. Runs inside the caller's write transaction, so
 * several processes opening one new file at once apply each migration exactly once: the first
 * takes the write lock and migrates, the others then find the version it recorded.
 */
export function migrate(
  db: Database.Database,
  now: number,
  allowUpgrade = true,
): { from: number; to: number } {
  return carryOut(
    db,
    runner.migrationScript(migrations, LATEST_SCHEMA_VERSION, allowUpgrade, schemaScript),
    now,
  );
}

/** Carries out the runner's script on `db`, each version recorded at `now`. */
export function carryOut(
  db: Database.Database,
  script: MigrationScript,
  now: number,
): { from: number; to: number } {
  // Prepared once schema_version exists (after "prepare").
  let insert: Database.Statement | undefined;
  const record = (version: number): void => {
    insert ??= db.prepare("INSERT INTO schema_version (version, applied_at) VALUES (?, ?)");
    insert.run(version, now);
  };
  let next = script.next();
  while (next.done !== true) {
    const step = next.value;
    switch (step.step) {
      case "version":
        next = script.next(currentSchemaVersion(db));
        break;
      case "prepare":
        db.exec(
          "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL) STRICT",
        );
        next = script.next();
        break;
      case "create":
        db.exec(step.schema.sql);
        for (let v = 1; v <= step.schema.version; v++) record(v);
        next = script.next();
        break;
      case "apply":
        db.exec(step.migration.sql);
        record(step.migration.version);
        next = script.next();
        break;
    }
  }
  return next.value;
}
