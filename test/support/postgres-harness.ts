/**
 * PostgreSQL side of the store tests: a fresh database per test file (kept and printed when a test
 * failed), and the contract's capabilities done through plain SQL connections to that database.
 */
import { openPostgresStore } from "../../src/adapters/postgres/index.js";
import type { PostgresStoreOptions } from "../../src/adapters/postgres/index.js";
import { MIGRATIONS } from "../../src/adapters/postgres/migrations.js";
import { CLAIM_PICK_SQL } from "../../src/adapters/postgres/tasks.js";
import type { Store } from "../../src/ports/store.js";
import type { ContractCapabilities, StoreHarness } from "../contracts/context.js";
import type { TestDatabase } from "./postgres.js";
import { createTestDatabase, dropOrKeep } from "./postgres.js";

/** Enough connections per Store for its own concurrency; racers each open their own Store. */
export const TEST_POOL_SIZE = 4;

let trapCounter = 0;
let legacyCounter = 0;
const quote = (s: string): string => `'${s.replaceAll("'", "''")}'`;

/** The claim's pick as EXPLAIN prints it, with parameters like a real claim's. */
export async function explainClaimPick(db: TestDatabase, analyze = false): Promise<string[]> {
  const rows = await db.query<{ "QUERY PLAN": string }>(
    `EXPLAIN ${analyze ? "(ANALYZE, BUFFERS, COSTS OFF) " : ""}${CLAIM_PICK_SQL}`,
    [null, ["!room"], "node", ["echo"], ["linux"]],
  );
  return rows.map((r) => r["QUERY PLAN"]);
}

export function postgresCapabilities(db: () => TestDatabase): ContractCapabilities {
  return {
    injectTaskInsertFailure: async (taskId) => {
      const n = ++trapCounter;
      await db().query(
        `CREATE FUNCTION inject_task_failure_${n}() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
           IF NEW.task_id = ${quote(taskId)} THEN
             RAISE EXCEPTION 'injected failure inserting task %', NEW.task_id;
           END IF;
           RETURN NEW;
         END $$;
         CREATE TRIGGER inject_task_failure_${n} BEFORE INSERT ON tasks
           FOR EACH ROW EXECUTE FUNCTION inject_task_failure_${n}();`,
      );
      return async () => {
        await db().query(
          `DROP TRIGGER IF EXISTS inject_task_failure_${n} ON tasks; DROP FUNCTION IF EXISTS inject_task_failure_${n}();`,
        );
      };
    },
    schemaVersion: async () => {
      const rows = await db().query<{ v: number | null }>("SELECT max(version) AS v FROM schema_version");
      return rows[0]?.v ?? 0;
    },
    forceSchemaVersion: async (version) => {
      await db().query("DELETE FROM schema_version WHERE version > $1", [version]);
      await db().query("INSERT INTO schema_version (version) VALUES ($1) ON CONFLICT DO NOTHING", [version]);
    },
    legacyStore: async (version, runs) => {
      const schema = `legacy_${++legacyCounter}`;
      await db().query(
        [
          `CREATE SCHEMA ${schema}`,
          `SET search_path TO ${schema}`,
          "CREATE TABLE schema_version (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())",
          ...MIGRATIONS.filter((m) => m.version <= version).flatMap((m) => [
            m.sql,
            `INSERT INTO schema_version (version) VALUES (${m.version})`,
          ]),
        ].join(";\n"),
      );
      for (const r of runs)
        await db().query(
          `INSERT INTO ${schema}.runs (run_id, room_id, dag_id, hash, status, publisher, confirmed_by, created_at, updated_at, dag)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8, $9::jsonb)`,
          [
            r.runId,
            r.roomId,
            r.dagId,
            r.hash,
            r.status,
            r.publisher,
            r.confirmedBy,
            r.createdAt,
            JSON.stringify(r.dag),
          ],
        );
      return {
        open: (options) => openPostgresStore(db().url, { poolSize: 2, ...options, schema }),
      };
    },
    insertFinishedRuns: async (roomId, dagId, count, createdAt) => {
      await db().query(
        `WITH filler AS (
           INSERT INTO runs (run_id, room_id, dag_id, hash, status, publisher, created_at, updated_at, dag, definition_id)
           SELECT md5(random()::text || i), $1::text, $2::text || '.' || i, 'filler', 'succeeded', '@filler:example.org', $4::bigint, $4::bigint,
                  jsonb_build_object('id', $2::text || '.' || i, 'description', null, 'maxParallel', null,
                                     'tasks', '[]'::jsonb, 'definition', $2::text), $2::text
             FROM generate_series(2, $3::int + 1) AS i
           RETURNING 1)
         INSERT INTO definitions (room_id, dag_id, hash, dag, publisher, last_run_number, created_at, updated_at)
         SELECT $1::text, $2::text, 'filler',
                jsonb_build_object('id', $2::text, 'description', null, 'maxParallel', null, 'tasks', '[]'::jsonb),
                '@filler:example.org', $3::int + 1, $4::bigint, $4::bigint
          WHERE (SELECT count(*) FROM filler) > 0
         ON CONFLICT DO NOTHING`,
        [roomId, dagId, count, createdAt],
      );
    },
    explainClaim: () => explainClaimPick(db()),
  };
}

/** The harness describeStoreContract needs, over one database per test file. */
export function postgresHarness(options: PostgresStoreOptions = {}): {
  create: () => Promise<StoreHarness>;
  capabilities: ContractCapabilities;
  database: () => TestDatabase;
} {
  let current: TestDatabase | undefined;
  const database = (): TestDatabase => {
    if (current === undefined) throw new Error("postgres: no test database yet (fresh() not called)");
    return current;
  };
  return {
    database,
    capabilities: postgresCapabilities(database),
    create: async () => ({
      open: (o): Promise<Store> =>
        openPostgresStore(database().url, { poolSize: TEST_POOL_SIZE, ...options, ...o }),
      fresh: async () => {
        if (current !== undefined) await current.drop();
        current = await createTestDatabase();
      },
      teardown: async (failed) => {
        if (current !== undefined) await dropOrKeep(current, failed);
      },
    }),
  };
}
