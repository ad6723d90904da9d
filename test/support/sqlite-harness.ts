/**
 * SQLite side of the store tests: a fresh database file per test file under a temp dir (kept and
 * printed when a test failed), and the contract's capabilities done through a separate raw
 * better-sqlite3 connection to the same file.
 */
import { declareFleetProtocol } from "../../src/adapters/sqlite/connection.js";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { openSqliteStore } from "../../src/adapters/sqlite/index.js";
import type { SqliteStoreOptions } from "../../src/adapters/sqlite/index.js";
import { migrations } from "../../src/adapters/sqlite/migrations.js";
import { queryOf } from "../../src/adapters/sqlite/script-driver.js";
import { CLAIM } from "../../src/adapters/store-common/ops/claims.js";
import type { Store } from "../../src/ports/store.js";
import type { ContractCapabilities, StoreHarness } from "../contracts/context.js";

export interface SqliteTestDb {
  readonly dir: string;
  readonly path: string;
  open(options?: SqliteStoreOptions): Promise<Store>;
  /** A raw connection for arranging and inspecting (closed by cleanup). */
  raw(): Database.Database;
  /** Remove the dir, or keep it and print where it is when `failed`. */
  cleanup(failed: boolean): void;
}

export function sqliteTestDb(label: string): SqliteTestDb {
  const dir = mkdtempSync(join(tmpdir(), `dagbot-${label}-`));
  const path = join(dir, "store.db");
  let raw: Database.Database | undefined;
  return {
    dir,
    path,
    open: (options) => openSqliteStore(path, options),
    raw: () => {
      if (raw === undefined) {
        raw = new Database(path);
        raw.pragma("busy_timeout = 5000");
        // Arranges as this release does: the fence triggers (docs/architecture.md §11) let it write.
        declareFleetProtocol(raw);
      }
      return raw;
    },
    cleanup: (failed) => {
      raw?.close();
      raw = undefined;
      if (failed) console.error(`[${label}] a test failed; the SQLite database is kept at ${path}`);
      else rmSync(dir, { recursive: true, force: true });
    },
  };
}

let trapCounter = 0;
let legacyCounter = 0;
const quote = (s: string): string => `'${s.replaceAll("'", "''")}'`;

export function sqliteCapabilities(db: () => SqliteTestDb): ContractCapabilities {
  return {
    asOlderRelease: async (sql, protocol) => {
      // A connection as a release before 0.2.0 opened it: no fleet protocol view; or as a release
      // of an older protocol: its own view (connection.ts declareFleetProtocol, as it was then).
      const older = new Database(db().path);
      try {
        older.pragma("busy_timeout = 5000");
        if (protocol !== undefined)
          older.exec(`CREATE TEMP VIEW dagbot_fleet_protocol_${protocol} AS SELECT ${protocol} AS protocol`);
        older.exec(sql);
      } finally {
        older.close();
      }
    },
    injectTaskInsertFailure: async (taskId) => {
      const name = `inject_task_failure_${++trapCounter}`;
      db()
        .raw()
        .exec(
          `CREATE TRIGGER ${name} BEFORE INSERT ON tasks WHEN NEW.task_id = ${quote(taskId)}
           BEGIN SELECT RAISE(ABORT, ${quote(`injected failure inserting task ${taskId}`)}); END`,
        );
      return async () => {
        db().raw().exec(`DROP TRIGGER IF EXISTS ${name}`);
      };
    },
    schemaVersion: async () => {
      const row = db().raw().prepare("SELECT MAX(version) AS v FROM schema_version").get() as {
        v: number | null;
      };
      return row.v ?? 0;
    },
    forceSchemaVersion: async (version) => {
      const raw = db().raw();
      raw.prepare("DELETE FROM schema_version WHERE version > ?").run(version);
      raw
        .prepare("INSERT OR IGNORE INTO schema_version (version, applied_at) VALUES (?, ?)")
        .run(version, Date.now());
    },
    legacyStore: async (version, runs) => {
      const path = join(db().dir, `legacy-${++legacyCounter}.db`);
      const raw = new Database(path);
      try {
        raw.exec(
          "CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL) STRICT",
        );
        for (const m of migrations().filter((m) => m.version <= version)) {
          raw.exec(m.sql);
          raw.prepare("INSERT INTO schema_version (version, applied_at) VALUES (?, ?)").run(m.version, 0);
        }
        const insert = raw.prepare(
          `INSERT INTO runs (run_id, room_id, dag_id, hash, status, publisher, confirmed_by, created_at, updated_at, dag)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        );
        for (const r of runs)
          insert.run(
            r.runId,
            r.roomId,
            r.dagId,
            r.hash,
            r.status,
            r.publisher,
            r.confirmedBy,
            r.createdAt,
            r.createdAt,
            JSON.stringify(r.dag),
          );
      } finally {
        raw.close();
      }
      return { open: (options) => openSqliteStore(path, options) };
    },
    insertFinishedRuns: async (roomId, dagId, count, createdAt) => {
      const raw = db().raw();
      const at = { room: roomId, dag: dagId, count, at: createdAt };
      raw.transaction(() => {
        raw
          .prepare(
            `WITH RECURSIVE n(i) AS (SELECT 2 UNION ALL SELECT i + 1 FROM n WHERE i <= @count)
             INSERT INTO runs (run_id, room_id, dag_id, hash, status, publisher, created_at, updated_at, dag, definition_id)
             SELECT lower(hex(randomblob(16))), @room, @dag || '.' || i, 'filler', 'succeeded', '@filler:example.org',
                    @at, @at, json_object('id', @dag || '.' || i, 'description', NULL, 'maxParallel', NULL,
                                          'tasks', json('[]'), 'definition', @dag), @dag
               FROM n`,
          )
          .run(at);
        raw
          .prepare(
            `INSERT OR IGNORE INTO definitions (room_id, dag_id, hash, dag, publisher, last_run_number, created_at, updated_at)
             VALUES (@room, @dag, 'filler', json_object('id', @dag, 'description', NULL, 'maxParallel', NULL, 'tasks', json('[]')),
                     '@filler:example.org', @count + 1, @at, @at)`,
          )
          .run(at);
      })();
    },
    setTaskStatus: async (runId, taskId, status) => {
      db()
        .raw()
        .prepare("UPDATE tasks SET status = ? WHERE run_id = ? AND task_id = ?")
        .run(status, runId, taskId);
    },
    explainClaim: async () => {
      // The claim's first statement, SQLite's pick (store-common/ops/claims.ts).
      const q = queryOf(
        CLAIM,
        { rooms: ["!room"], node: "node", actions: ["echo"], labels: ["linux"], picks: 2 },
        Date.now(),
      );
      const rows = db()
        .raw()
        .prepare(`EXPLAIN QUERY PLAN ${q.sql}`)
        .all(...q.values) as Array<{ detail: string }>;
      return rows.map((r) => r.detail);
    },
  };
}

/** The harness describeStoreContract needs, over one database file per test file. */
export function sqliteHarness(label: string): {
  create: () => Promise<StoreHarness>;
  capabilities: ContractCapabilities;
} {
  let current: SqliteTestDb | undefined;
  const db = (): SqliteTestDb => {
    if (current === undefined) throw new Error(`${label}: no SQLite test database yet (fresh() not called)`);
    return current;
  };
  return {
    capabilities: sqliteCapabilities(db),
    create: async () => ({
      open: (options) => db().open(options),
      fresh: async () => {
        current?.cleanup(false);
        current = sqliteTestDb(label);
      },
      teardown: async (failed) => current?.cleanup(failed),
    }),
  };
}
