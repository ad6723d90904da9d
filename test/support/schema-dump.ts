/**
 * A store's schema as text, to compare with a committed golden dump (test/adapters/schema-golden/):
 * what a migration leaves behind, never its rows. SQLite: every sqlite_master entry with its SQL as
 * stored. PostgreSQL: one schema's columns, constraints, indexes, sequences, functions and
 * triggers, the schema's own name written as <schema> so dumps of two schemas compare.
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import type Database from "better-sqlite3";
import type pg from "pg";

export function dumpSqliteSchema(db: Database.Database): string {
  const rows = db
    .prepare("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name")
    .all() as { type: string; name: string; tbl_name: string; sql: string | null }[];
  return rows.map((r) => `-- ${r.type} ${r.name} on ${r.tbl_name}\n${r.sql ?? "(no sql)"};\n`).join("\n");
}

export async function dumpPostgresSchema(client: pg.ClientBase, schema: string): Promise<string> {
  const sections: [string, string][] = [
    [
      "columns",
      `SELECT table_name, ordinal_position, column_name, data_type, udt_name, is_nullable, column_default,
              is_identity, identity_generation, character_maximum_length, numeric_precision
         FROM information_schema.columns WHERE table_schema = $1 ORDER BY table_name, ordinal_position`,
    ],
    [
      "constraints",
      `SELECT c.relname AS table_name, k.conname, k.contype, pg_get_constraintdef(k.oid) AS def
         FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid JOIN pg_namespace n ON n.oid = k.connamespace
        WHERE n.nspname = $1 ORDER BY c.relname, k.conname`,
    ],
    [
      "indexes",
      "SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = $1 ORDER BY tablename, indexname",
    ],
    [
      "sequences",
      `SELECT sequence_name, data_type, start_value, minimum_value, maximum_value, increment, cycle_option
         FROM information_schema.sequences WHERE sequence_schema = $1 ORDER BY sequence_name`,
    ],
    [
      "functions",
      `SELECT p.proname, pg_get_function_identity_arguments(p.oid) AS args, pg_get_functiondef(p.oid) AS def
         FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1 ORDER BY 1, 2`,
    ],
    [
      "triggers",
      `SELECT c.relname AS table_name, t.tgname, pg_get_triggerdef(t.oid) AS def
         FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = $1 AND NOT t.tgisinternal ORDER BY c.relname, t.tgname`,
    ],
  ];
  // Definitions name what is outside the search path with its schema: read them with none of
  // the store's schemas in it, so a dump does not depend on the connection's setting.
  const { rows: saved } = await client.query<{ p: string }>("SELECT current_setting('search_path') AS p");
  await client.query("SET search_path TO pg_catalog");
  const out: string[] = [];
  try {
    for (const [title, sql] of sections) {
      const { rows } = await client.query<Record<string, unknown>>(sql, [schema]);
      out.push(`-- ${title}`);
      for (const r of rows)
        out.push(
          Object.values(r)
            .map((v) => (v === null ? "NULL" : String(v)))
            .join(" | "),
        );
      out.push("");
    }
  } finally {
    await client.query("SELECT set_config('search_path', $1, false)", [saved[0]?.p ?? ""]);
  }
  return out.join("\n").replaceAll(`${schema}.`, "<schema>.");
}

export const sha256 = (text: string): string => createHash("sha256").update(text).digest("hex");

/** Where the golden dumps are kept (test/adapters/schema-golden.test.ts records and checks them). */
export const SCHEMA_GOLDEN = new URL("../adapters/schema-golden/", import.meta.url);

export interface SchemaGolden {
  /** The sha256 of the dump after each version. */
  steps: Map<number, string>;
  /** The whole dump at the newest version. */
  schema: string;
}

/** A dialect's golden dumps, empty where none is recorded yet. */
export function readSchemaGolden(dialect: "sqlite" | "postgres"): SchemaGolden {
  const stepsFile = new URL(`${dialect}-steps.txt`, SCHEMA_GOLDEN);
  const schemaFile = new URL(`${dialect}-schema.txt`, SCHEMA_GOLDEN);
  const steps = new Map<number, string>();
  if (existsSync(stepsFile))
    for (const line of readFileSync(stepsFile, "utf8").split("\n")) {
      const [v, hash] = line.split(" ");
      if (v !== undefined && hash !== undefined) steps.set(Number(v), hash);
    }
  return { steps, schema: existsSync(schemaFile) ? readFileSync(schemaFile, "utf8") : "" };
}

/**
 * src/adapters/sqlite/schema.sql as it must be for a store migrated to `version`: the header, then
 * the SQL of every sqlite_master entry in the order SQLite made them (rowid), as stored. Left out:
 * schema_version (the runner's "prepare" makes it), sqlite_sequence and automatic indexes
 * (SQLite makes those itself).
 */
export function sqliteSchemaScript(db: Database.Database, version: number): string {
  const rows = db
    .prepare(
      `SELECT sql FROM sqlite_master
        WHERE sql IS NOT NULL AND name NOT IN ('schema_version', 'sqlite_sequence') ORDER BY rowid`,
    )
    .all() as { sql: string }[];
  const header = [
    `-- schema: ${version}`,
    `-- The SQLite schema that migrations 1 to ${version} (./migrations/) leave, as one script: an empty store`,
    "-- is created from it, then given the migrations newer than it (docs/architecture.md §11).",
    "-- Written from a migrated store by test/adapters/sqlite-schema-script.test.ts with",
    "-- UPDATE_SCHEMA_GOLDEN=1, which also checks it; never edited by hand.",
  ];
  return `${header.join("\n")}\n${rows.map((r) => `\n${r.sql};\n`).join("")}`;
}
