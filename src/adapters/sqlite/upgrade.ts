/**
 * A SQLite store looked at before anything changes it, and its online backup before a migration
 * (docs/architecture.md §11). Reads only: no schema, table or file is created here.
 */
import { chmodSync } from "node:fs";
import Database from "better-sqlite3";
import type { StoreInspection, StoreNodeSeen } from "../../ports/store.js";
import { planSteps } from "../store-common/schema.js";
import { currentSchemaVersion, LATEST_SCHEMA_VERSION, migrations } from "./migrations.js";

const BUSY_TIMEOUT_MS = 5_000;

export function inspectSqliteStore(path: string, now = Date.now()): StoreInspection {
  const db = new Database(path, { fileMustExist: true });
  try {
    db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
    const schema = currentSchemaVersion(db);
    return {
      schema,
      latest: LATEST_SCHEMA_VERSION,
      steps: schema > LATEST_SCHEMA_VERSION ? [] : planSteps(migrations(), schema),
      nodes: schema === 0 ? [] : nodesSeen(db, now),
    };
  } finally {
    db.close();
  }
}

/** The nodes table as any release wrote it: release and protocol only where the schema has them. */
function nodesSeen(db: Database.Database, now: number): StoreNodeSeen[] {
  const columns = new Set(
    (db.prepare("SELECT name FROM pragma_table_info('nodes')").all() as { name: string }[]).map(
      (c) => c.name,
    ),
  );
  if (!columns.has("node_id")) return [];
  const extra = columns.has("release") ? "release, protocol" : "NULL AS release, NULL AS protocol";
  const rows = db.prepare(`SELECT node_id, heartbeat_at, ${extra} FROM nodes ORDER BY node_id`).all() as {
    node_id: string;
    heartbeat_at: number;
    release: string | null;
    protocol: number | null;
  }[];
  return rows.map((r) => ({
    nodeId: r.node_id,
    release: r.release,
    protocol: r.protocol,
    heartbeatAgeMs: Math.max(0, now - r.heartbeat_at),
  }));
}

/** An online copy of the store (SQLite's backup API: other connections may go on writing), owner-only. */
export async function backupSqliteStore(path: string, to: string): Promise<void> {
  const db = new Database(path, { fileMustExist: true });
  try {
    db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
    await db.backup(to);
    chmodSync(to, 0o600);
  } finally {
    db.close();
  }
}
