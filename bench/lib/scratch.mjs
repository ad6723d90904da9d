/**
 * Scratch places for one bench run: PostgreSQL databases named dagbot_bench_<random>_<part> on the
 * local server (dropped at the end, whatever happened) and temporary folders for SQLite files.
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { URL } from "node:url";
import pg from "pg";

export const DEFAULT_BENCH_PG_URL = "postgres://postgres@127.0.0.1:5432/postgres";

export function adminUrl() {
  const fromEnv = process.env.DAGBOT_BENCH_PG_URL;
  return fromEnv !== undefined && fromEnv !== "" ? fromEnv : DEFAULT_BENCH_PG_URL;
}

async function withAdmin(fn) {
  const client = new pg.Client({ connectionString: adminUrl(), connectionTimeoutMillis: 10_000 });
  try {
    await client.connect();
  } catch (e) {
    throw new Error(
      `PostgreSQL is not reachable at ${redact(adminUrl())} (${e instanceof Error ? e.message : String(e)}); ` +
        "start it or point DAGBOT_BENCH_PG_URL at a server where this user may CREATE DATABASE",
    );
  }
  try {
    return await fn(client);
  } finally {
    await client.end().catch(() => {});
  }
}

function redact(url) {
  try {
    const u = new URL(url);
    if (u.password !== "") u.password = "***";
    return u.toString();
  } catch {
    return "(unparsable url)";
  }
}

/** Everything one bench run creates, removed by cleanup(). */
export class Scratch {
  constructor() {
    this.id = randomBytes(4).toString("hex");
    this.databases = [];
    this.dirs = [];
  }

  /** A new empty database; returns its URL. */
  async database(part) {
    const name = `dagbot_bench_${this.id}_${part}`;
    await withAdmin((c) => c.query(`CREATE DATABASE ${name}`));
    this.databases.push(name);
    const u = new URL(adminUrl());
    u.pathname = `/${name}`;
    return u.toString();
  }

  /**
   * A new temporary folder (for SQLite files, node configs and logs); `base` puts it elsewhere than
   * the system's temp dir (a RAM disk, for figures that are not about the disk).
   */
  dir(part, base = tmpdir()) {
    const d = mkdtempSync(join(base, `dagbot-bench-${this.id}-${part}-`));
    this.dirs.push(d);
    return d;
  }

  async cleanup() {
    const dbs = this.databases.splice(0);
    if (dbs.length > 0) {
      await withAdmin(async (c) => {
        for (const name of dbs) await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      }).catch((e) => process.stderr.write(`bench: could not drop scratch databases: ${String(e)}\n`));
    }
    for (const d of this.dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  }
}

/** The server's version string (for the results table). */
export async function postgresVersion() {
  return withAdmin(async (c) => (await c.query("SHOW server_version")).rows[0].server_version);
}
