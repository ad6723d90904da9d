/**
 * PostgreSQL side of the store tests: a fresh database per test file (kept and printed when a test
 * failed), and the contract's capabilities done through plain SQL connections to that database.
 */
import pg from "pg";
import { openPostgresStore } from "../../src/adapters/postgres/index.js";
import type { PostgresStoreOptions } from "../../src/adapters/postgres/index.js";
import { migrations } from "../../src/adapters/postgres/migrations.js";
import type { Store } from "../../src/ports/store.js";
import type { ContractCapabilities, StoreHarness } from "../contracts/context.js";
import type { TestDatabase } from "./postgres.js";
import { createTestDatabase, dropOrKeep } from "./postgres.js";

/** Enough connections per Store for its own concurrency; racers each open their own Store. */
export const TEST_POOL_SIZE = 4;

let trapCounter = 0;
let legacyCounter = 0;
const quote = (s: string): string => `'${s.replaceAll("'", "''")}'`;

/** A plan node as EXPLAIN's JSON format gives it (the fields the plan tests read). */
export interface PlanNode {
  "Node Type": string;
  "Relation Name"?: string;
  "Index Name"?: string;
  "Actual Rows"?: number;
  "Rows Removed by Filter"?: number;
  "Shared Hit Blocks"?: number;
  "Shared Read Blocks"?: number;
  Plans?: PlanNode[];
}

/** The statements run inside claim_pick during one claim, with their plans as executed. */
export interface ClaimPickPlans {
  /** The pick (FOR UPDATE SKIP LOCKED). */
  pick: PlanNode;
  /** The check for a fitting task left behind; null when the batch was not filled (not run). */
  more: PlanNode | null;
  /** The same plans as text, for the test's log. */
  text: string[];
}

/**
 * The plans claim_pick's own statements ran with, for one claim of up to `max` tasks (a node
 * "node" with action echo and label linux in room !room), read through auto_explain's nested
 * statement logging sent to this client; the claim is rolled back.
 */
export async function explainClaimPick(db: TestDatabase, max = 1): Promise<ClaimPickPlans> {
  const client = new pg.Client({ connectionString: db.url });
  const notices: string[] = [];
  client.on("notice", (n) => notices.push(n.message ?? ""));
  await client.connect();
  try {
    for (const sql of [
      "LOAD 'auto_explain'",
      "SET auto_explain.log_min_duration = 0",
      "SET auto_explain.log_nested_statements = on",
      "SET auto_explain.log_analyze = on",
      "SET auto_explain.log_buffers = on",
      "SET auto_explain.log_timing = off",
      "SET auto_explain.log_format = 'json'",
      "SET client_min_messages = log",
    ])
      await client.query(sql);
    await client.query("BEGIN");
    await client.query("SELECT * FROM claim_pick(NULL, '{!room}', 'node', '{echo}', '{linux}', $1)", [max]);
    await client.query("ROLLBACK");
  } finally {
    await client.end().catch(() => {});
  }
  const plans = notices
    .map((m) => m.slice(m.indexOf("{")))
    .filter((m) => m.startsWith("{"))
    .map((m) => JSON.parse(m) as { "Query Text": string; Plan: PlanNode });
  const pick = plans.find((p) => p["Query Text"].includes("SKIP LOCKED"));
  if (pick === undefined) throw new Error(`no plan of claim_pick's pick among ${plans.length} logged`);
  const more = plans.find((p) => p["Query Text"].includes("SELECT 1 FROM tasks")) ?? null;
  return {
    pick: pick.Plan,
    more: more?.Plan ?? null,
    text: [pick, ...(more === null ? [] : [more])].map((p) => JSON.stringify(p.Plan, null, 1)),
  };
}

export function postgresCapabilities(
  db: () => TestDatabase,
  openStore: (options: PostgresStoreOptions) => Promise<Store> = (options) =>
    openPostgresStore(db().url, options),
): ContractCapabilities {
  return {
    asOlderRelease: async (sql, protocol) => {
      // A connection as a release before 0.2.0 opened it: no dagbot.protocol setting; or as a
      // release of an older protocol: its own setting (db.ts, as it was then).
      const url = new URL(db().url);
      url.searchParams.delete("options");
      if (protocol !== undefined) url.searchParams.set("options", `-c dagbot.protocol=${protocol}`);
      const older = new pg.Client({ connectionString: url.toString() });
      await older.connect();
      try {
        await older.query(sql);
      } finally {
        await older.end().catch(() => {});
      }
    },
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
          ...migrations()
            .filter((m) => m.version <= version)
            .flatMap((m) => [m.sql, `INSERT INTO schema_version (version) VALUES (${m.version})`]),
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
        open: (options) => openStore({ poolSize: 2, ...options, schema }),
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
    setTaskStatus: async (runId, taskId, status) => {
      await db().query("UPDATE tasks SET status = $3 WHERE run_id = $1 AND task_id = $2", [
        runId,
        taskId,
        status,
      ]);
    },
    explainClaim: async () => (await explainClaimPick(db())).text,
  };
}

/**
 * The harness describeStoreContract needs, over one database per test file. `urlOf`: the URL the
 * Stores open for the test database (default its own; a pooler's for the pooler's suite).
 */
export function postgresHarness(
  options: PostgresStoreOptions = {},
  urlOf: (db: TestDatabase) => Promise<string> | string = (db) => db.url,
): {
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
    capabilities: postgresCapabilities(database, async (o) =>
      openPostgresStore(await urlOf(database()), { ...options, ...o }),
    ),
    create: async () => ({
      open: async (o): Promise<Store> =>
        openPostgresStore(await urlOf(database()), { poolSize: TEST_POOL_SIZE, ...options, ...o }),
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
