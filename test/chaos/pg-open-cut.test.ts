/**
 * Chaos on PostgreSQL: a node's connection cut by the server while it opens the store (a server
 * restart, or an administrator ending sessions) while the migration waits behind another migrator.
 * Opening must fail with a StoreError, never crash the process with an unhandled driver event; and
 * the error must be one `dagbot node` counts as transient, so the node retries the open with backoff
 * instead of exiting (test/e2e/node-store-reach.test.ts runs that with real processes).
 * The child runs the built adapter and retry rule (dist/).
 */
import { spawn } from "node:child_process";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import pg from "pg";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { REPO, requireBuild } from "../support/engine-cluster.js";
import type { TestDatabase } from "../support/postgres.js";
import { createTestDatabase, dropOrKeep } from "../support/postgres.js";
import { waitFor } from "../support/store-wait.js";

const ADAPTER = pathToFileURL(join(REPO, "dist", "adapters", "postgres", "index.js")).href;
const RETRY = pathToFileURL(join(REPO, "dist", "composition", "store-retry.js")).href;

describe("chaos on postgres: the connection cut while a node opens the store", () => {
  let db: TestDatabase | null = null;
  let holder: pg.Client | null = null;

  beforeAll(() => requireBuild());

  afterEach(async (context) => {
    await holder?.end().catch(() => {});
    if (db !== null) await dropOrKeep(db, context.task.result?.state === "fail");
  });

  it("a migration whose connection is terminated rejects with a transient StoreError (the node retries) instead of crashing the process", async () => {
    db = await createTestDatabase();
    const d = db;
    // Another migrator holds the lock, so the opener's connection sits in a known query.
    holder = new pg.Client({ connectionString: d.url });
    await holder.connect();
    await holder.query("BEGIN");
    await holder.query("SELECT pg_advisory_xact_lock(hashtext('dagbot.migrate'), hashtext('public'))");

    const script = `import { openPostgresStore } from ${JSON.stringify(ADAPTER)};
      import { isTransientStoreError } from ${JSON.stringify(RETRY)};
      openPostgresStore(${JSON.stringify(d.url)}).then(
        () => { console.log("opened"); process.exit(0); },
        (e) => { console.log("rejected " + e.name + " " + (isTransientStoreError(e) ? "transient" : "permanent") + ": " + e.message); process.exit(3); });`;
    const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
    const closed = new Promise<number | null>((done) => child.once("close", (code) => done(code)));

    const waiting = await waitFor(
      "the opener waiting for the migration lock",
      () =>
        d.query<{ pid: number }>(
          `SELECT pid FROM pg_stat_activity
            WHERE datname = current_database() AND application_name = 'dagbot' AND wait_event = 'advisory'`,
        ),
      (rows) => rows.length > 0,
      { timeoutMs: 20_000, intervalMs: 25 },
    );
    await d.query("SELECT pg_terminate_backend($1)", [waiting[0]!.pid]);

    const code = await closed;
    expect(stderr).not.toContain("Unhandled 'error' event");
    expect({ code, stdout: stdout.trim().split(":")[0] }).toEqual({
      code: 3,
      stdout: "rejected StoreError transient",
    });
  }, 60_000);
});
