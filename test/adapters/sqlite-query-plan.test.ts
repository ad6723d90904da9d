/**
 * The SQLite claim query keeps its cost flat as the queue's history grows: with 20 000 finished
 * tasks and a handful queued, the plan walks the partial index of queued tasks in claim order (no
 * table scan, no sort), and that index holds the queued rows only. The plans are recorded in
 * docs/query-plans.md. No statement binds a bare `LIMIT ?` (see LIMIT in connection.ts).
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { LIMIT } from "../../src/adapters/sqlite/connection.js";
import { CLAIM } from "../../src/adapters/store-common/ops/claims.js";
import { NEXT_INBOX_SQL } from "../../src/adapters/sqlite/inbox.js";
import { REAP_OPEN } from "../../src/adapters/store-common/ops/reap.js";
import { ROOM_LOAD } from "../../src/adapters/store-common/ops/caps.js";
import { STEP_LOOK, STEP_MOVE } from "../../src/adapters/store-common/ops/schedule-step.js";
import { compile, sql } from "../../src/adapters/store-common/script.js";
import type { Store } from "../../src/ports/store.js";
import { session } from "../support/store-fixtures.js";
import { sqliteCapabilities, sqliteTestDb } from "../support/sqlite-harness.js";

const FINISHED = 20_000;
const QUEUED_EVERY = 5_000;
const ROOM = "!plan";

const db = sqliteTestDb("sqlite-query-plan");
const caps = sqliteCapabilities(() => db);
let store: Store;
let failed = false;

beforeAll(async () => {
  store = await db.open();
  const raw = db.raw();
  raw.exec(`INSERT INTO runs (run_id, room_id, dag_id, hash, status, publisher, created_at, updated_at, dag)
            VALUES ('r', '${ROOM}', 'big', 'h', 'running', '@p:x', 0, 0, '{}')`);
  // Every QUEUED_EVERY-th task is queued, the rest finished long ago; priorities spread 0..6.
  raw.exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${FINISHED})
    INSERT INTO tasks (run_id, task_id, room_id, status, version, attempt, max_attempts, action, args, needs, labels,
                       priority, retry_backoff_ms)
    SELECT 'r', 't' || i, '${ROOM}', CASE WHEN i % ${QUEUED_EVERY} = 0 THEN 'queued' ELSE 'succeeded' END,
           1, 1, 1, 'echo', '{}', '[]', '[]', i % 7, 1000 FROM n`);
  raw.exec("ANALYZE");
});
beforeEach(({ onTestFailed }) =>
  onTestFailed(() => {
    failed = true;
  }),
);
afterAll(async () => {
  await store?.close();
  db.cleanup(failed);
});

describe(`SQLite query plans with ${FINISHED} tasks, ${FINISHED / QUEUED_EVERY} queued`, () => {
  it("the claim walks the partial index of queued tasks in claim order: no table scan, no sort", async () => {
    const plan = await caps.explainClaim();
    expect(plan[0]).toBe("SCAN tasks USING INDEX tasks_claim");
    expect(plan.filter((l) => /^(SCAN|SEARCH) tasks\b/.test(l))).toEqual([
      "SCAN tasks USING INDEX tasks_claim",
    ]);
    expect(plan.some((l) => l.includes("TEMP B-TREE"))).toBe(false);
  });

  it("the reaper's look for anything that could expire reads the open tasks through indexes, not every task", () => {
    const open = compile(sql("the reaper's look for open work")`SELECT ${REAP_OPEN} AS open`, "sqlite");
    const plan = (
      db
        .raw()
        .prepare(`EXPLAIN QUERY PLAN ${open.text}`)
        .all(...open.order.map(() => ROOM)) as { detail: string }[]
    ).map((r) => r.detail);
    const tasks = plan.filter((l) => /^(SCAN|SEARCH) tasks\b/.test(l));
    expect(tasks, plan.join("\n")).toHaveLength(3);
    expect(
      tasks.every(
        (l) =>
          l.includes("INDEX tasks_claim") ||
          l.includes("INDEX tasks_executor") ||
          l.includes("INDEX tasks_gates_open"),
      ),
      plan.join("\n"),
    ).toBe(true);
  });

  it("roomLoad (why a task waits) reads the room's active tasks through the partial indexes, not every task", () => {
    // One statement: the active tasks are read once (materialized, as two halves), then counted
    // and searched for held keys.
    const load = compile(ROOM_LOAD, "sqlite");
    const plan = (
      db
        .raw()
        .prepare(`EXPLAIN QUERY PLAN ${load.text}`)
        .all(...load.order.map(() => ROOM)) as { detail: string }[]
    ).map((r) => r.detail);
    const tasks = plan.filter((l) => /^(SCAN|SEARCH) (t|tasks)\b/.test(l));
    expect(tasks, plan.join("\n")).toHaveLength(2);
    expect(
      tasks.every((l) => l.includes("INDEX tasks_claim") || l.includes("INDEX tasks_executor")),
      plan.join("\n"),
    ).toBe(true);
  });

  it("an incremental scheduling step reads the room's active tasks through the partial indexes, not every task", () => {
    const look = compile(STEP_LOOK, "sqlite");
    const values: Record<string, unknown> = { roomId: ROOM, defaultCap: 10 };
    const plan = (
      db
        .raw()
        .prepare(`EXPLAIN QUERY PLAN ${look.text}`)
        .all(...look.order.map((o) => (o.kind === "param" ? values[o.name] : 0))) as { detail: string }[]
    ).map((r) => r.detail);
    const tasks = plan.filter((l) => /^(SCAN|SEARCH) (t|tasks)\b/.test(l));
    expect(tasks, plan.join("\n")).toHaveLength(2);
    expect(
      tasks.every((l) => l.includes("INDEX tasks_claim") || l.includes("INDEX tasks_executor")),
      plan.join("\n"),
    ).toBe(true);
  });

  it("a scheduling step moves the tasks it decided on by primary key, one statement for all of them", () => {
    const move = compile(STEP_MOVE, "sqlite");
    const values: Record<string, unknown> = {
      to: "queued",
      refs: JSON.stringify([{ run_id: "r", task_id: "t1" }]),
    };
    const plan = (
      db
        .raw()
        .prepare(`EXPLAIN QUERY PLAN ${move.text}`)
        .all(...move.order.map((o) => (o.kind === "param" ? values[o.name] : 0))) as { detail: string }[]
    ).map((r) => r.detail);
    const tasks = plan.filter((l) => /^(SCAN|SEARCH) (t|tasks)\b/.test(l));
    expect(tasks, plan.join("\n")).toEqual([
      expect.stringMatching(/^SEARCH tasks USING INDEX \S+ \(run_id=\? AND task_id=\?\)$/),
    ]);
  });

  it("the claim index holds only the queued rows", () => {
    const pages = Object.fromEntries(
      (
        db
          .raw()
          .prepare(
            "SELECT name, COUNT(*) AS pages FROM dbstat WHERE name IN ('tasks', 'tasks_claim') GROUP BY name",
          )
          .all() as Array<{ name: string; pages: number }>
      ).map((r) => [r.name, r.pages]),
    );
    expect(pages.tasks).toBeGreaterThan(100);
    expect(pages.tasks_claim).toBe(1);
  });

  it("the task table has no index that no read uses: every claim and finish writes each one", () => {
    // tasks_open (migration 8 dropped it) could not be planned for any open-task read, yet cost
    // every claim+finish pair three WAL pages.
    const names = (
      db
        .raw()
        .prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'tasks' ORDER BY name")
        .all() as Array<{ name: string }>
    ).map((r) => r.name);
    // tasks_gates_open holds open approval gates only (blocked rows with a gate state): the reaper's
    // look reads it, and a claim or finish never writes it.
    expect(names).toEqual(["sqlite_autoindex_tasks_1", "tasks_claim", "tasks_executor", "tasks_gates_open"]);
  });

  it("claims the queued tasks in priority then FIFO order among the finished ones", async () => {
    const queued = Array.from({ length: FINISHED / QUEUED_EVERY }, (_, k) => (k + 1) * QUEUED_EVERY)
      .map((i) => ({ id: `t${i}`, priority: i % 7, seq: i }))
      .sort((a, b) => b.priority - a.priority || a.seq - b.seq)
      .map((t) => t.id);
    const got: string[] = [];
    const offer = { session: session("n"), roomIds: [ROOM], labels: [], actions: ["echo"], leaseMs: 60_000 };
    for (let c = await store.claimTask(offer); c !== null; c = await store.claimTask(offer))
      got.push(c.task.taskId);
    expect(got).toEqual(queued);
  });

  it("the leader's inbox take searches the partial index of unhandled rows", () => {
    const plan = (
      db.raw().prepare(`EXPLAIN QUERY PLAN ${NEXT_INBOX_SQL}`).all(ROOM) as Array<{ detail: string }>
    ).map((r) => r.detail);
    expect(plan).toEqual(["SEARCH processed_events USING INDEX processed_events_open (room_id=?)"]);
  });
});

describe("SQLite inbox take on a store that never ran ANALYZE", () => {
  const fresh = sqliteTestDb("sqlite-inbox-plan");
  let s: Store;
  afterAll(async () => {
    await s?.close();
    fresh.cleanup(failed);
  });

  it("takes the next unhandled row through the partial index, not a walk over every handled row", async () => {
    s = await fresh.open();
    const leader = session("leader");
    const lease = await s.acquireLease(ROOM, leader, 60_000);
    const fence = { roomId: ROOM, session: leader, term: lease.term };
    // A long history of replied commands, some of them huge, then one new command at the end.
    for (let i = 0; i < 200; i++) {
      const body = i % 20 === 0 ? "x".repeat(200_000) : `!dag status ${i}`;
      await s.insertInboxEvent({
        eventId: `$old${i}`,
        roomId: ROOM,
        sender: "@a:x",
        originServerTs: i,
        content: { body },
        seenBy: "n",
      });
      await s.markInboxHandled(fence, `$old${i}`, {});
      await s.markInboxReplied(fence, `$old${i}`, []);
    }
    await s.insertInboxEvent({
      eventId: "$new",
      roomId: ROOM,
      sender: "@a:x",
      originServerTs: 1_000,
      content: { body: "!dag list" },
      seenBy: "n",
    });
    const plan = (
      fresh.raw().prepare(`EXPLAIN QUERY PLAN ${NEXT_INBOX_SQL}`).all(ROOM) as Array<{ detail: string }>
    ).map((r) => r.detail);
    expect(plan).toEqual(["SEARCH processed_events USING INDEX processed_events_open (room_id=?)"]);
    expect((await s.nextInboxEvent(fence))?.eventId).toBe("$new");
  });
});

describe("SQLite statements and their row limits", () => {
  it("no statement binds a bare `LIMIT ?`: the planner would look at the value and plan again at every execution", () => {
    const dir = join(dirname(fileURLToPath(import.meta.url)), "../../src/adapters/sqlite");
    const bare = readdirSync(dir)
      .filter((f) => f.endsWith(".ts"))
      .flatMap((f) =>
        readFileSync(join(dir, f), "utf8")
          .split("\n")
          .map((line, i) => ({ at: `${f}:${i + 1}`, line }))
          .filter(({ line }) => /LIMIT\s+\?(?!\s*\+)/.test(line) && !line.trim().startsWith("*")),
      );
    expect(bare.map((b) => b.at)).toEqual([]);
    expect(LIMIT).toBe("LIMIT ? + 0");
    expect(compile(CLAIM, "sqlite").text).toContain(LIMIT);
  });
});
