/**
 * A page of runs reads its page, not the room's history: with 6,000 runs in the room (of many DAGs,
 * most ended), each filter's statement walks an index already in list order (newest first), with no
 * sort, on SQLite and on PostgreSQL, from the first page and from a cursor.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openPostgresStore } from "../../src/adapters/postgres/index.js";
import { queryOf as pgQuery } from "../../src/adapters/postgres/script-driver.js";
import { queryOf as sqliteQuery } from "../../src/adapters/sqlite/script-driver.js";
import { pageRunsStatement, pageRunsValues } from "../../src/adapters/store-common/ops/run-reads.js";
import type { RunPageQuery, Store } from "../../src/ports/store.js";
import type { TestDatabase } from "../support/postgres.js";
import { createTestDatabase, dropOrKeep } from "../support/postgres.js";
import { sqliteTestDb } from "../support/sqlite-harness.js";

const ROOM = "!plans";
const RUNS = 6_000;
const after = { createdAt: 1_000_000 + RUNS / 2, seq: RUNS / 2 };

/** Each filter a list may ask for, from the first page and from a cursor. */
const QUERIES: Array<[string, RunPageQuery, string]> = [
  ["the room's runs", { limit: 20 }, "runs_room_created"],
  ["after a cursor", { limit: 20, after }, "runs_room_created"],
  ["one status", { limit: 20, statuses: ["failed"] }, "runs_room_status"],
  ["one status after a cursor", { limit: 20, statuses: ["failed"], after }, "runs_room_status"],
  ["one DAG", { limit: 20, definition: "d7" }, "runs_definition"],
  ["one DAG after a cursor", { limit: 20, definition: "d7", after }, "runs_definition"],
];

/** Rows: run i of DAG d<i % 50>, every 10th failed, the rest succeeded; created one ms apart. */
const FILL = (seq: string) => `
  INSERT INTO runs (run_id, room_id, dag_id, hash, status, publisher, created_at, updated_at, dag, definition_id)
  SELECT 'r' || i, '${ROOM}', 'd' || (i % 50) || '.' || i, 'h',
         CASE WHEN i % 10 = 0 THEN 'failed' ELSE 'succeeded' END, 'p', 1000000 + i, 1000000 + i, '{}', 'd' || (i % 50)
    FROM ${seq}`;

describe("SQLite", () => {
  const db = sqliteTestDb("run-page-plans");
  let store: Store;
  let failed = false;
  beforeAll(async () => {
    store = await db.open();
    db.raw().exec(
      FILL(
        `(WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${RUNS}) SELECT i FROM n)`,
      ),
    );
    db.raw().exec("ANALYZE");
  });
  afterAll(async () => {
    await store?.close();
    db.cleanup(failed);
  });

  it.each(QUERIES)("%s: searches its index in list order, no sort", async (_name, query, index) => {
    try {
      const { sql, values } = sqliteQuery(pageRunsStatement(query), pageRunsValues(ROOM, query));
      const plan = (
        db
          .raw()
          .prepare(`EXPLAIN QUERY PLAN ${sql}`)
          .all(...values) as { detail: string }[]
      ).map((r) => r.detail);
      expect(plan).toEqual([expect.stringMatching(new RegExp(`^SEARCH runs USING INDEX ${index} \\(`))]);
      const page = await store.pageRuns(ROOM, query);
      expect(page.runs).toHaveLength(20);
    } catch (e) {
      failed = true;
      throw e;
    }
  });
});

describe("PostgreSQL", () => {
  let db: TestDatabase;
  let store: Store;
  let failed = false;
  beforeAll(async () => {
    db = await createTestDatabase();
    store = await openPostgresStore(db.url, { poolSize: 2 });
    await db.query(FILL(`generate_series(1, ${RUNS}) AS g(i)`));
    await db.query("VACUUM ANALYZE runs");
  });
  afterAll(async () => {
    await store?.close();
    if (db !== undefined) await dropOrKeep(db, failed);
  });

  type Node = { "Node Type": string; "Index Name"?: string; Plans?: Node[] };
  const flatten = (n: Node): Node[] => [n, ...(n.Plans ?? []).flatMap(flatten)];

  it.each(QUERIES)("%s: scans its index in list order, no sort", async (_name, query, index) => {
    try {
      const { sql, values } = pgQuery(pageRunsStatement(query), pageRunsValues(ROOM, query));
      const [row] = await db.query<{ "QUERY PLAN": [{ Plan: Node }] }>(
        `EXPLAIN (FORMAT JSON) ${sql}`,
        values,
      );
      const nodes = flatten(row!["QUERY PLAN"][0].Plan);
      expect(nodes.map((n) => n["Node Type"])).toEqual(["Limit", "Index Scan"]);
      expect(nodes[1]!["Index Name"]).toBe(index === "runs_room_status" ? "runs_room_status_created" : index);
      const page = await store.pageRuns(ROOM, query);
      expect(page.runs).toHaveLength(20);
    } catch (e) {
      failed = true;
      throw e;
    }
  });
});
