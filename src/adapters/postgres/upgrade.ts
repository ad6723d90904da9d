/**
 * A PostgreSQL store looked at before anything changes it (docs/architecture.md §11). Reads only,
 * on one connection of its own: no schema or table is created here.
 */
import pg from "pg";
import type { StoreInspection, StoreNodeSeen } from "../../ports/store.js";
import { planSteps } from "../store-common/schema.js";
import type { PoolerMode } from "./db.js";
import { clientConfig, transactionSettings } from "./db.js";
import { LATEST_SCHEMA_VERSION, migrations } from "./migrations.js";
import { mapError, NOW } from "./sql.js";

export async function inspectPostgresStore(
  url: string,
  schema = "public",
  pooler: PoolerMode = "none",
): Promise<StoreInspection> {
  const client = new pg.Client(clientConfig({ url, poolSize: 1, schema, clock: undefined, pooler }));
  client.on("error", () => {});
  try {
    await client.connect();
    // Behind a transaction-mode pooler the settings last one transaction: look inside one.
    if (pooler === "transaction") await client.query(`BEGIN READ ONLY; ${transactionSettings({ schema })}`);
    const version = await client.query<{ t: string | null }>(
      "SELECT to_regclass('schema_version')::text AS t",
    );
    let found = 0;
    if (version.rows[0]?.t !== null && version.rows[0]?.t !== undefined) {
      const { rows } = await client.query<{ v: number | null }>(
        "SELECT max(version) AS v FROM schema_version",
      );
      found = rows[0]?.v ?? 0;
    }
    return {
      schema: found,
      latest: LATEST_SCHEMA_VERSION,
      steps: found > LATEST_SCHEMA_VERSION ? [] : planSteps(migrations(), found),
      nodes: found === 0 ? [] : await nodesSeen(client),
    };
  } catch (e) {
    throw mapError("inspect postgres store", e);
  } finally {
    await client.end().catch(() => {});
  }
}

async function nodesSeen(client: pg.Client): Promise<StoreNodeSeen[]> {
  const cols = await client.query<{ c: string }>(
    `SELECT column_name AS c FROM information_schema.columns
      WHERE table_schema = current_schema() AND table_name = 'nodes'`,
  );
  const columns = new Set(cols.rows.map((r) => r.c));
  if (!columns.has("node_id")) return [];
  const extra = columns.has("release") ? "release, protocol" : "NULL::text AS release, NULL::int AS protocol";
  const { rows } = await client.query<{
    node_id: string;
    age_ms: string;
    release: string | null;
    protocol: number | null;
  }>(`SELECT node_id, ${NOW} - heartbeat_at AS age_ms, ${extra} FROM nodes ORDER BY node_id`, [null]);
  return rows.map((r) => ({
    nodeId: r.node_id,
    release: r.release,
    protocol: r.protocol,
    heartbeatAgeMs: Math.max(0, Number(r.age_ms)),
  }));
}
