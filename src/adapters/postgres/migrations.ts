/**
 * The PostgreSQL schema: numbered SQL files in ./migrations/ (docs/architecture.md §11), applied
 * at open by the shared runner (store-common/migrations.ts) in one transaction under an advisory
 * lock, so concurrent openers apply each version once. Add a file for a new version; never edit a
 * released one (test/adapters/schema-golden.test.ts). A schema whose recorded version is newer
 * than this release's is refused.
 */
import type pg from "pg";
import { STORE_SCHEMA } from "../../domain/release.js";
import type { Migration } from "../store-common/schema.js";
import * as runner from "../store-common/migrations.js";
import { quoteIdent } from "./sql.js";
import { treeUrl } from "../../package-files.js";

export const LATEST_SCHEMA_VERSION = STORE_SCHEMA;

const FOLDER = treeUrl("adapters/postgres/migrations/");

/** The migration files, versions 1 to LATEST_SCHEMA_VERSION, read when first needed. */
export const migrations = (): readonly Migration[] => runner.readMigrations(FOLDER, LATEST_SCHEMA_VERSION);

/**
 * Bring the schema to LATEST_SCHEMA_VERSION inside one transaction. The advisory lock (keyed by
 * schema) makes a second opener wait and then find the work done; a failing migration leaves the
 * schema as it was.
 */
export async function migrate(
  client: pg.PoolClient,
  schema: string,
  allowUpgrade = true,
  begin = "BEGIN",
): Promise<{ from: number; to: number }> {
  // `begin`: what opens the transaction (Db.begin: behind a pooler, with the connection's settings).
  await client.query(begin);
  try {
    await client.query("SELECT pg_advisory_xact_lock(hashtext('dagbot.migrate'), hashtext($1))", [schema]);
    const script = runner.migrationScript(migrations, LATEST_SCHEMA_VERSION, allowUpgrade);
    let next = script.next();
    while (next.done !== true) {
      const step = next.value;
      switch (step.step) {
        case "version": {
          await client.query(`CREATE SCHEMA IF NOT EXISTS ${quoteIdent(schema)}`);
          await client.query(
            `CREATE TABLE IF NOT EXISTS ${quoteIdent(schema)}.schema_version (
         version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`,
          );
          const { rows } = await client.query<{ v: number | null }>(
            `SELECT max(version) AS v FROM ${quoteIdent(schema)}.schema_version`,
          );
          next = script.next(rows[0]?.v ?? 0);
          break;
        }
        case "prepare":
          // The files name no schema: their tables, functions and triggers go where the store's are.
          await client.query(`SET LOCAL search_path TO ${quoteIdent(schema)}`);
          next = script.next();
          break;
        case "apply":
          await client.query(step.migration.sql);
          await client.query("INSERT INTO schema_version (version) VALUES ($1)", [step.migration.version]);
          next = script.next();
          break;
      }
    }
    const done = next.value;
    // Nothing applied (the schema was already at this release's): nothing to keep either.
    await client.query(done.from === done.to ? "ROLLBACK" : "COMMIT");
    return done;
  } catch (e) {
    await client.query("ROLLBACK").catch(() => {});
    throw e;
  }
}
