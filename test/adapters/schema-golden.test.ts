/**
 * A released migration never changes (docs/architecture.md §11): the schema each one
 * leaves, applied in order on an empty store, is compared with golden dumps taken when it was
 * released (test/adapters/schema-golden/). `<dialect>-steps.txt` holds the sha256 of the schema
 * after each version, `<dialect>-schema.txt` the whole schema at the newest; a store opened empty,
 * and one opened at 0.2.0's schema (17), must end with that schema. An edit to an old migration
 * fails here. A new migration has no golden yet: `UPDATE_SCHEMA_GOLDEN=1 npx vitest run
 * test/adapters/schema-golden.test.ts` records it, and never rewrites a version already recorded.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import pg from "pg";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { openPostgresStore } from "../../src/adapters/postgres/index.js";
import { migrations as pgMigrations } from "../../src/adapters/postgres/migrations.js";
import { openSqliteStore } from "../../src/adapters/sqlite/index.js";
import { migrations as sqliteMigrations } from "../../src/adapters/sqlite/migrations.js";
import type { Migration } from "../../src/adapters/store-common/schema.js";
import type { TestDatabase } from "../support/postgres.js";
import { createTestDatabase, dropOrKeep } from "../support/postgres.js";
import type { SchemaGolden } from "../support/schema-dump.js";
import {
  SCHEMA_GOLDEN,
  dumpPostgresSchema,
  dumpSqliteSchema,
  readSchemaGolden,
  sha256,
} from "../support/schema-dump.js";
import { sqliteTestDb } from "../support/sqlite-harness.js";

const UPDATE = process.env["UPDATE_SCHEMA_GOLDEN"] === "1";
/** 0.2.0's schema in both stores: a store it left is migrated by this release. */
const FROM_RELEASED = 17;

/**
 * Compares each version's schema with its golden; with UPDATE_SCHEMA_GOLDEN=1, versions not
 * recorded yet are added (and the newest whole schema written) before the comparison.
 */
function checkGolden(dialect: "sqlite" | "postgres", dumps: Map<number, string>): SchemaGolden {
  const golden = readSchemaGolden(dialect);
  const latest = Math.max(...dumps.keys());
  if (UPDATE && !golden.steps.has(latest)) {
    for (const [v, dump] of dumps) if (!golden.steps.has(v)) golden.steps.set(v, sha256(dump));
    const lines = [...golden.steps].sort(([a], [b]) => a - b).map(([v, h]) => `${v} ${h}\n`);
    writeFileSync(new URL(`${dialect}-steps.txt`, SCHEMA_GOLDEN), lines.join(""));
    writeFileSync(new URL(`${dialect}-schema.txt`, SCHEMA_GOLDEN), dumps.get(latest)!);
    golden.schema = dumps.get(latest)!;
  }
  for (const [v, dump] of dumps) {
    const expected = golden.steps.get(v);
    if (expected === undefined)
      throw new Error(
        `${dialect} migration ${v} has no golden schema yet: record it with UPDATE_SCHEMA_GOLDEN=1 (test/adapters/schema-golden.test.ts)`,
      );
    expect(sha256(dump), `${dialect} schema after migration ${v} (a released migration was edited?)`).toBe(
      expected,
    );
  }
  expect(dumps.get(latest)).toBe(golden.schema);
  return golden;
}

let failed = false;
beforeEach(({ onTestFailed }) =>
  onTestFailed(() => {
    failed = true;
  }),
);

describe("SQLite migrations against the golden schema", () => {
  const db = sqliteTestDb("schema-golden");
  afterAll(() => db.cleanup(failed));

  /** A file at `upTo`, each migration applied as the store's runner applies it. */
  function stepwise(
    path: string,
    migrations: readonly Migration[],
    upTo: number,
    each?: (v: number) => void,
  ) {
    const raw = new Database(path);
    try {
      raw.exec(
        "CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL) STRICT",
      );
      for (const m of migrations.filter((x) => x.version <= upTo)) {
        raw.exec(m.sql);
        raw.prepare("INSERT INTO schema_version (version, applied_at) VALUES (?, ?)").run(m.version, 0);
        each?.(m.version);
      }
    } finally {
      raw.close();
    }
  }

  const dumpFile = (path: string): string => {
    const raw = new Database(path, { readonly: true });
    try {
      return dumpSqliteSchema(raw);
    } finally {
      raw.close();
    }
  };

  it("each migration leaves the schema it left when it was released", () => {
    const dumps = new Map<number, string>();
    const path = join(db.dir, "steps.db");
    stepwise(path, sqliteMigrations(), Infinity, (v) => dumps.set(v, dumpFile(path)));
    expect(dumps.size).toBe(sqliteMigrations().length);
    checkGolden("sqlite", dumps);
  });

  it("an empty store and one of 0.2.0's schema, opened, end with the golden schema", async () => {
    const golden = readSchemaGolden("sqlite");
    await (await db.open()).close();
    expect(dumpFile(db.path)).toBe(golden.schema);
    const released = join(db.dir, "released.db");
    stepwise(released, sqliteMigrations(), FROM_RELEASED);
    expect(dumpFile(released)).not.toBe(golden.schema);
    await (await openSqliteStore(released, { migrate: true })).close();
    expect(dumpFile(released)).toBe(golden.schema);
  });
});

describe("PostgreSQL migrations against the golden schema", () => {
  let pgdb: TestDatabase;
  let client: pg.Client;
  beforeAll(async () => {
    pgdb = await createTestDatabase();
    client = new pg.Client({ connectionString: pgdb.url });
    await client.connect();
  });
  afterAll(async () => {
    await client?.end();
    await dropOrKeep(pgdb, failed);
  });

  async function stepwise(schema: string, upTo: number, each?: (v: number) => Promise<void>) {
    await client.query(`CREATE SCHEMA ${schema}`);
    await client.query(`SET search_path TO ${schema}`);
    await client.query(
      "CREATE TABLE schema_version (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())",
    );
    for (const m of pgMigrations().filter((x) => x.version <= upTo)) {
      await client.query(m.sql);
      await client.query("INSERT INTO schema_version (version) VALUES ($1)", [m.version]);
      await each?.(m.version);
    }
    await client.query("RESET search_path");
  }

  it("each migration leaves the schema it left when it was released", async () => {
    const dumps = new Map<number, string>();
    await stepwise("golden_steps", Infinity, async (v) => {
      dumps.set(v, await dumpPostgresSchema(client, "golden_steps"));
    });
    expect(dumps.size).toBe(pgMigrations().length);
    checkGolden("postgres", dumps);
  });

  it("an empty store and one of 0.2.0's schema, opened, end with the golden schema", async () => {
    const golden = readSchemaGolden("postgres");
    await (await openPostgresStore(pgdb.url, { poolSize: 1, schema: "golden_fresh" })).close();
    expect(await dumpPostgresSchema(client, "golden_fresh")).toBe(golden.schema);
    await stepwise("golden_released", FROM_RELEASED);
    expect(await dumpPostgresSchema(client, "golden_released")).not.toBe(golden.schema);
    await (
      await openPostgresStore(pgdb.url, { poolSize: 1, schema: "golden_released", migrate: true })
    ).close();
    expect(await dumpPostgresSchema(client, "golden_released")).toBe(golden.schema);
  });
});
