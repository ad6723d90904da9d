/**
 * The claim's query plan on PostgreSQL (docs/query-plans.md): the pick (claim_pick) walks the
 * partial index of queued tasks and touches the same few rows and pages whether 200 or 20 000 tasks
 * already finished, and whether the planner statistics are fresh or were taken before 2,000 tasks
 * were queued. A plan that scans claimed or finished rows, or sorts the queue, is a bug.
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import { openPostgresStore } from "../../src/adapters/postgres/index.js";
import pg from "pg";
import { queryOf } from "../../src/adapters/postgres/script-driver.js";
import { CLAIM } from "../../src/adapters/store-common/ops/claims.js";
import { FINISH, FINISH_CLAIM } from "../../src/adapters/store-common/ops/finish.js";
import type { Store } from "../../src/ports/store.js";
import type { PlanNode } from "../support/postgres-harness.js";
import { explainClaimPick } from "../support/postgres-harness.js";
import type { TestDatabase } from "../support/postgres.js";
import { createTestDatabase, dropOrKeep } from "../support/postgres.js";

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

/** `finished` finished tasks then `queued` queued ones (task ids t1, t2, … in that order). */
async function fill(finished: number, queued: number): Promise<void> {
  await db.query("DELETE FROM tasks");
  await db.query(
    `INSERT INTO tasks (run_id, task_id, room_id, status, version, attempt, max_attempts, action, args, needs,
                        labels, priority, retry_backoff_ms)
     SELECT 'r1', 't' || g, '!room', CASE WHEN g <= $1::int THEN 'succeeded' ELSE 'queued' END, 1, 1, 1, 'echo', '{}',
            '{}', '{linux}', 0, 1000
       FROM generate_series(1, $1::int + $2::int) g`,
    [finished, queued],
  );
}

/** Bring the table to `finished` finished tasks plus 5 queued ones, and explain the pick. */
async function pickAfter(finished: number): Promise<{ nodes: PlanNode[]; text: string[] }> {
  await fill(finished, 5);
  await db.query("VACUUM ANALYZE tasks");
  const plans = await explainClaimPick(db);
  return { nodes: flatten(plans.pick), text: plans.text };
}

const pagesOn = (p: PlanNode[]): number =>
  p
    .filter((n) => n["Relation Name"] === "tasks")
    .reduce((s, n) => s + (n["Shared Hit Blocks"] ?? 0) + (n["Shared Read Blocks"] ?? 0), 0);

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
    // Flat: a handful of pages either way (20 000 rows span well over 100 heap pages).
    expect(pagesOn(small.nodes)).toBeLessThanOrEqual(8);
    expect(pagesOn(large.nodes)).toBeLessThanOrEqual(8);
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
    const claimValues = {
      rooms: ["!room"],
      node: "node",
      actions: ["echo"],
      labels: ["linux"],
      boot: "boot",
      leaseMs: 1000,
      actor: "node/boot",
      max: 1,
    };
    const finishValues = (t: string) => ({
      runId: "r1",
      taskId: t,
      version: 2,
      node: "node",
      boot: "boot",
      outcome: "succeeded",
      exitCode: 0,
      output: "out",
      error: null,
      actor: "node/boot",
      bytes: 3,
      values: '{"version":"1.2.3"}',
      // The domain's answers (finishAnswers) for a success: the same end in every case, no wait.
      left: "succeeded",
      spent: "succeeded",
      canceling: "succeeded",
      waitMs: null,
    });
    const statement = (
      s: Parameters<typeof queryOf>[0],
      values: Record<string, unknown>,
    ): [string, unknown[]] => {
      const q = queryOf(s, values);
      return [q.sql, q.values];
    };
    const [claim, finishClaim, finish] = await explainWrites([
      statement(CLAIM, claimValues),
      // Finishes t20001 (claimed above) and claims t20002 in the same statement.
      statement(FINISH_CLAIM, { ...finishValues("t20001"), ...claimValues }),
      statement(FINISH, finishValues("t20002")),
    ]);
    console.info(`claim statement plan with 20 000 finished tasks:\n${claim!.join("\n")}`);
    console.info(`finish-and-claim statement plan:\n${finishClaim!.join("\n")}`);
    console.info(`finish statement plan:\n${finish!.join("\n")}`);
    // The pick is claim_pick's (its plan is the test above); the claimed row is reached by its key.
    for (const plan of [claim!, finishClaim!]) {
      expect(plan.join("\n")).toMatch(/Function Scan on claim_pick \(actual rows=1/);
      expect(plan.join("\n")).toMatch(/Index Scan using tasks_pkey on tasks t \(actual rows=1/);
    }
    // The finishes found their rows (the claims before made them running) through an index.
    for (const plan of [finishClaim!, finish!]) {
      expect(plan.join("\n")).toMatch(/Update on tasks \(actual rows=1/);
      expect(plan.join("\n")).toMatch(/Index Scan using tasks_pkey on tasks/);
    }
    for (const plan of [claim!, finishClaim!, finish!])
      expect(plan.filter((l) => /Seq Scan on tasks/.test(l))).toEqual([]);
  } catch (e) {
    failed = true;
    throw e;
  }
});

it("with statistics taken before 2,000 tasks were queued, the pick and the check for more still walk tasks_claim from its head", async () => {
  try {
    // Statistics that say no task is queued (what the planner had before a burst), then the burst.
    await fill(20_000, 0);
    await db.query("VACUUM ANALYZE tasks");
    await db.query(
      `INSERT INTO tasks (run_id, task_id, room_id, status, version, attempt, max_attempts, action, args, needs,
                          labels, priority, retry_backoff_ms)
       SELECT 'r1', 'q' || g, '!room', 'queued', 1, 1, 1, 'echo', '{}', '{}', '{linux}', 0, 1000
         FROM generate_series(1, 2000) g`,
    );
    const stats = await db.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM pg_stats WHERE tablename = 'tasks' AND attname = 'status' AND 'queued' = ANY(most_common_vals::text::text[])",
    );
    expect(stats[0]!.n).toBe(0);
    const plans = await explainClaimPick(db, 4);
    console.info(`claim pick plans under stale statistics, 2,000 queued:\n${plans.text.join("\n")}`);
    const pick = flatten(plans.pick).filter((n) => n["Relation Name"] === "tasks");
    expect(pick.map((n) => [n["Node Type"], n["Index Name"]])).toEqual([["Index Scan", "tasks_claim"]]);
    expect(pick[0]!["Actual Rows"]).toBe(4);
    expect(flatten(plans.pick).some((n) => n["Node Type"] === "Sort")).toBe(false);
    // The batch was filled, so the check for more ran, on the same index, stopping at the 5th row.
    expect(plans.more).not.toBeNull();
    const more = flatten(plans.more!).filter((n) => n["Relation Name"] === "tasks");
    expect(more.map((n) => [n["Node Type"], n["Index Name"]])).toEqual([["Index Scan", "tasks_claim"]]);
    // A sort of the queue would read its 2,000 rows (dozens of heap pages).
    expect(pagesOn(flatten(plans.pick))).toBeLessThanOrEqual(8);
    expect(pagesOn(flatten(plans.more!))).toBeLessThanOrEqual(8);
    const batch = await store.claimTasks(
      {
        session: { nodeId: "node", bootId: "b" },
        roomIds: ["!room"],
        labels: ["linux"],
        actions: ["echo"],
        leaseMs: 1000,
      },
      4,
    );
    expect(batch.claimed.map((c) => c.task.taskId)).toEqual(["q1", "q2", "q3", "q4"]);
    expect(batch.more).toBe(true);
  } catch (e) {
    failed = true;
    throw e;
  }
});
