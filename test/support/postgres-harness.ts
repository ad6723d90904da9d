/**
 * PostgreSQL side of the store tests: a fresh database per test file (kept and printed when a test
 * failed), and the contract's capabilities done through plain SQL connections to that database.
 */
import { openPostgresStore } from "../../src/adapters/postgres/index.js";
import type { PostgresStoreOptions } from "../../src/adapters/postgres/index.js";
import { CLAIM_PICK_SQL } from "../../src/adapters/postgres/tasks.js";
import type { Store } from "../../src/ports/store.js";
import type { ContractCapabilities, StoreHarness } from "../contracts/context.js";
import type { TestDatabase } from "./postgres.js";
import { createTestDatabase, dropOrKeep } from "./postgres.js";

/** Enough connections per Store for its own concurrency; racers each open their own Store. */
export const TEST_POOL_SIZE = 4;

let trapCounter = 0;
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
