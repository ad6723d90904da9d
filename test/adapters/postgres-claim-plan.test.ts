/**
 * The claim's query plan on PostgreSQL (docs/query-plans.md): the pick walks the partial index of
 * queued tasks and touches the same few rows and pages whether 200 or 20 000 tasks already finished.
 * A plan that scans claimed or finished rows is a bug.
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import { openPostgresStore } from "../../src/adapters/postgres/index.js";
import pg from "pg";
import { CLAIM_PICK_SQL, CLAIM_SQL, FINISH_SQL } from "../../src/adapters/postgres/tasks.js";
import type { Store } from "../../src/ports/store.js";
import { explainClaimPick } from "../support/postgres-harness.js";
import type { TestDatabase } from "../support/postgres.js";
import { createTestDatabase, dropOrKeep } from "../support/postgres.js";

interface PlanNode {
  "Node Type": string;
  "Relation Name"?: string;
  "Index Name"?: string;
  "Actual Rows"?: number;
  "Rows Removed by Filter"?: number;
  "Shared Hit Blocks"?: number;
  "Shared Read Blocks"?: number;
  Plans?: PlanNode[];
}

const flatten = (n: PlanNode): PlanNode[] => [n, ...(n.Plans ?? []).flatMap(flatten)];

let db: TestDatabase;
let store: Store;
let failed = false;

beforeAll(async () => {
  db = await createTestDatabase();
  store = await openPostgresStore(db.url, { poolSize: 2 });
  await db.query(`INSERT INTO runs (run_id, room_id, dag_id, hash, status, publisher, created_at, updated_at, dag)
                  VALUES ('r1', '!room', 'd', 'h', 'running', 'p', 0, 0, '{}')`);
});

afterAll(async () => {
  await store?.close();
  if (db !== undefined) await dropOrKeep(db, failed);
});

/** Bring the table to `finished` finished tasks plus 5 queued ones, and explain the pick. */
async function pickAfter(finished: number): Promise<{ nodes: PlanNode[]; text: string[] }> {
  await db.query("DELETE FROM tasks");
  await db.query(
    `INSERT INTO tasks (run_id, task_id, room_id, status, version, attempt, max_attempts, action, args, needs,
                        labels, priority, retry_backoff_ms)
     SELECT 'r1', 't' || g, '!room', CASE WHEN g <= $1 THEN 'succeeded' ELSE 'queued' END, 1, 1, 1, 'echo', '{}',
            '{}', '{linux}', 0, 1000
       FROM generate_series(1, $1 + 5) g`,
    [finished],
  );
  await db.query("VACUUM ANALYZE tasks");
  const json = await db.query<{ "QUERY PLAN": Array<{ Plan: PlanNode }> }>(
    `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${CLAIM_PICK_SQL}`,
    [null, ["!room"], "node", ["echo"], ["linux"]],
  );
  return { nodes: flatten(json[0]!["QUERY PLAN"][0]!.Plan), text: await explainClaimPick(db, true) };
}

it("the claim pick uses the partial index of queued tasks and touches the same rows at 200 and 20 000 finished tasks", async () => {
  try {
    const small = await pickAfter(200);
    const large = await pickAfter(20_000);
    console.info(`claim pick plan with 20 000 finished tasks:\n${large.text.join("\n")}`);
    for (const { nodes } of [small, large]) {
      const onTasks = nodes.filter((n) => n["Relation Name"] === "tasks");
      expect(onTasks.map((n) => [n["Node Type"], n["Index Name"]])).toEqual([["Index Scan", "tasks_claim"]]);
      expect(onTasks[0]!["Actual Rows"]).toBe(1);
      expect(onTasks[0]!["Rows Removed by Filter"] ?? 0).toBe(0);
    }
    const pages = (p: PlanNode[]): number =>
      p
        .filter((n) => n["Relation Name"] === "tasks")
        .reduce((s, n) => s + (n["Shared Hit Blocks"] ?? 0) + (n["Shared Read Blocks"] ?? 0), 0);
    // Flat: a handful of pages either way (20 000 rows span well over 100 heap pages).
    expect(pages(small.nodes)).toBeLessThanOrEqual(8);
    expect(pages(large.nodes)).toBeLessThanOrEqual(8);
    // And a claim through the Store still works on the large table.
    const claimed = await store.claimTask({
      session: { nodeId: "node", bootId: "b" },
      roomIds: ["!room"],
      labels: ["linux"],
      actions: ["echo"],
      leaseMs: 1000,
    });
    expect(claimed?.task.taskId).toBe("t20001");
  } catch (e) {
    failed = true;
    throw e;
  }
});

/** EXPLAIN ANALYZE writing statements in order, inside one transaction that is rolled back. */
async function explainWrites(statements: Array<[string, unknown[]]>): Promise<string[][]> {
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  try {
    await client.query("BEGIN");
    const plans: string[][] = [];
    for (const [sql, params] of statements) {
      const { rows } = await client.query<{ "QUERY PLAN": string }>(
        `EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) ${sql}`,
        params,
      );
      plans.push(rows.map((r) => r["QUERY PLAN"]));
    }
    return plans;
  } finally {
    await client.query("ROLLBACK").catch(() => {});
    await client.end();
  }
}

it("the whole claim and finish statements reach their rows by index only: no sequential scan of tasks", async () => {
  try {
    await pickAfter(20_000);
    const [claim, finish] = await explainWrites([
      [CLAIM_SQL, [null, ["!room"], "node", ["echo"], ["linux"], "boot", 1000, "node/boot", 1]],
      [FINISH_SQL, [null, "r1", "t20001", 2, "node", "boot", "succeeded", 0, "out", null, "node/boot", 3]],
    ]);
    console.info(`claim statement plan with 20 000 finished tasks:\n${claim!.join("\n")}`);
    console.info(`finish statement plan:\n${finish!.join("\n")}`);
    expect(claim!.join("\n")).toMatch(/Index Scan using tasks_claim on tasks \(actual rows=1/);
    expect(claim!.join("\n")).toMatch(/Index Scan using tasks_pkey on tasks t \(actual rows=1/);
    // The finish found its row (the claim above made it running) through an index.
    expect(finish!.join("\n")).toMatch(/Update on tasks \(actual rows=1/);
    expect(finish!.join("\n")).toMatch(/Index Scan using tasks_pkey on tasks/);
    for (const plan of [claim!, finish!]) expect(plan.filter((l) => /Seq Scan on tasks/.test(l))).toEqual([]);
  } catch (e) {
    failed = true;
    throw e;
  }
});

it("the prepared claim keeps the partial-index plan when PostgreSQL switches it to a generic plan", async () => {
  try {
    await pickAfter(20_000);
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      await client.query("SET plan_cache_mode = force_generic_plan");
      await client.query(`PREPARE pick AS ${CLAIM_PICK_SQL}`);
      const { rows } = await client.query<{ "QUERY PLAN": string }>(
        `EXPLAIN (COSTS OFF) EXECUTE pick(NULL, '{"!room"}', 'node', '{echo}', '{linux}')`,
      );
      const plan = rows.map((r) => r["QUERY PLAN"]).join("\n");
      console.info(`generic claim pick plan:\n${plan}`);
      expect(plan).toContain("Index Scan using tasks_claim on tasks");
      expect(plan).not.toMatch(/Seq Scan on tasks/);
    } finally {
      await client.end();
    }
  } catch (e) {
    failed = true;
    throw e;
  }
});
