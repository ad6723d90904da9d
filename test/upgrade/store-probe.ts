/**
 * The upgrade test looks into the store with plain SQL, never through src/ (today's store code would
 * be the thing under test, and opening a store with it could migrate it): the schema version, the
 * shape of the schema (a digest, and the dump the golden schemas of test/adapters/schema-golden/
 * are taken with), and the raw bytes of a SQLite file.
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import Database from "better-sqlite3";
import pg from "pg";
import { dumpPostgresSchema, dumpSqliteSchema } from "../support/schema-dump.js";

export type StoreKind = "postgres" | "sqlite";

export interface StoreProbe {
  kind: StoreKind;
  /** The store string nodes and CLI take (`postgres://…` or `sqlite:PATH`). */
  store: string;
  /** Rows of a query (`?` placeholders on both stores). */
  query(sql: string, params?: unknown[]): Promise<Record<string, unknown>[]>;
  /** The newest applied schema version. */
  schemaVersion(): Promise<number>;
  /** A digest of the schema's definition (tables, columns, indexes, triggers, functions). */
  schemaDigest(): Promise<string>;
  /** The schema as test/support/schema-dump.ts writes it, to compare with the golden dumps. */
  schemaDump(): Promise<string>;
}

export function sqliteProbe(path: string): StoreProbe {
  const query = async (sql: string, params: unknown[] = []): Promise<Record<string, unknown>[]> => {
    const db = new Database(path, { readonly: true, fileMustExist: true });
    try {
      db.pragma("busy_timeout = 5000");
      return db.prepare(sql).all(...params) as Record<string, unknown>[];
    } finally {
      db.close();
    }
  };
  return {
    kind: "sqlite",
    store: `sqlite:${path}`,
    query,
    async schemaVersion() {
      const rows = await query("SELECT max(version) AS v FROM schema_version");
      return Number(rows[0]?.["v"]);
    },
    async schemaDigest() {
      const rows = await query("SELECT type, name, sql FROM sqlite_master ORDER BY type, name");
      return digest(rows);
    },
    async schemaDump() {
      const db = new Database(path, { readonly: true, fileMustExist: true });
      try {
        db.pragma("busy_timeout = 5000");
        return dumpSqliteSchema(db);
      } finally {
        db.close();
      }
    },
  };
}

export function postgresProbe(url: string): StoreProbe {
  const query = async (sql: string, params: unknown[] = []): Promise<Record<string, unknown>[]> => {
    let n = 0;
    const text = sql.replace(/\?/g, () => `$${++n}`);
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      return (await client.query(text, params)).rows as Record<string, unknown>[];
    } finally {
      await client.end().catch(() => {});
    }
  };
  return {
    kind: "postgres",
    store: url,
    query,
    async schemaVersion() {
      const rows = await query("SELECT max(version) AS v FROM schema_version");
      return Number(rows[0]?.["v"]);
    },
    async schemaDigest() {
      const columns = await query(
        `SELECT table_name, column_name, data_type, column_default, is_nullable
           FROM information_schema.columns WHERE table_schema = current_schema()
          ORDER BY table_name, column_name`,
      );
      const indexes = await query(
        "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema() ORDER BY indexname",
      );
      const triggers = await query(
        `SELECT tgname, pg_get_triggerdef(t.oid) AS def FROM pg_trigger t
           JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname = current_schema() AND NOT t.tgisinternal ORDER BY tgname`,
      );
      const functions = await query(
        `SELECT p.proname, md5(p.prosrc) AS src FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
          WHERE n.nspname = current_schema() ORDER BY p.proname, src`,
      );
      return digest([columns, indexes, triggers, functions]);
    },
    async schemaDump() {
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        const { rows } = await client.query<{ s: string }>("SELECT current_schema() AS s");
        return await dumpPostgresSchema(client, rows[0]!.s);
      } finally {
        await client.end().catch(() => {});
      }
    },
  };
}

function digest(value: unknown): string {
  return createHash("sha256").update(JSON.stringify(value)).digest("hex");
}

/** The SHA-256 of a file's bytes, or "absent". */
export function fileDigest(path: string): string {
  return existsSync(path) ? createHash("sha256").update(readFileSync(path)).digest("hex") : "absent";
}
