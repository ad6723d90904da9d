/**
 * A throwaway PostgreSQL database per test file: created on the server at DAGBOT_TEST_PG_URL
 * (default the local trust-auth server), dropped afterwards unless a test failed, so a failure
 * leaves its data to look at. A server that cannot be reached fails the test; it never skips.
 */
import { FLEET_PROTOCOL_OPTION } from "../../src/adapters/postgres/db.js";
import { randomBytes } from "node:crypto";
import pg from "pg";

export const DEFAULT_TEST_PG_URL = "postgres://postgres@127.0.0.1:5432/postgres";

const START_HINT =
  "start it with: pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start " +
  "(or point DAGBOT_TEST_PG_URL at a server where this user may CREATE DATABASE)";

/** The maintenance connection URL (a database that exists, used to create and drop test databases). */
export function adminUrl(): string {
  const fromEnv = process.env.DAGBOT_TEST_PG_URL;
  return fromEnv !== undefined && fromEnv !== "" ? fromEnv : DEFAULT_TEST_PG_URL;
}

/** The URL with its password masked, for messages. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password !== "") u.password = "***";
    return u.toString();
  } catch {
    return "(unparsable url)";
  }
}

export interface TestDatabase {
  readonly name: string;
  /** Connection URL of the test database. */
  readonly url: string;
  /** Run SQL in the test database on a short-lived connection (for fault injection and inspection). */
  query<R extends pg.QueryResultRow = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<R[]>;
  /** Drop the database (closing whatever is still connected to it). */
  drop(): Promise<void>;
}

async function withAdmin<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const url = adminUrl();
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000 });
  try {
    await client.connect();
  } catch (e) {
    const why = e instanceof Error ? e.message : String(e);
    throw new Error(`PostgreSQL is not reachable at ${redactUrl(url)} (${why}); ${START_HINT}`);
  }
  try {
    return await fn(client);
  } finally {
    await client.end().catch(() => {});
  }
}

/** Create `dagbot_test_<random>` on the test server. */
export async function createTestDatabase(): Promise<TestDatabase> {
  const name = `dagbot_test_${randomBytes(6).toString("hex")}`;
  await withAdmin((c) => c.query(`CREATE DATABASE ${name}`));
  const u = new URL(adminUrl());
  u.pathname = `/${name}`;
  // Every connection to it speaks this release's fleet protocol, as a node's does (db.ts): the
  // store's fence triggers refuse claims and new runs from connections that do not (§11).
  u.searchParams.set("options", FLEET_PROTOCOL_OPTION);
  const url = u.toString();
  return {
    name,
    url,
    async query<R extends pg.QueryResultRow>(sql: string, params: unknown[] = []): Promise<R[]> {
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        return (await client.query<R>(sql, params)).rows;
      } finally {
        await client.end().catch(() => {});
      }
    },
    async drop(): Promise<void> {
      await withAdmin((c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
    },
  };
}

/** Drop the database, or when the file had a failure keep it and say where it is. */
export async function dropOrKeep(db: TestDatabase, failed: boolean): Promise<void> {
  if (failed) {
    console.warn(`kept PostgreSQL test database ${db.name} for inspection: psql ${redactUrl(db.url)}`);
    return;
  }
  await db.drop();
}
