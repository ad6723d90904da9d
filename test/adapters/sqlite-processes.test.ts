/**
 * SQLite across real OS processes on one file: leases, inbox inserts and claims raced by separate
 * processes (exactly one winner, counted), and several processes opening a new file at once.
 * The workers run the built adapter (dist/): `npm run build` first; the test says so if it is stale.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { Store } from "../../src/ports/store.js";
import { becomeLeader, dag, publishRunning, task } from "../support/store-fixtures.js";
import { assertFreshBuild, spawnWorker } from "../support/sqlite-processes.js";
import type { Worker } from "../support/sqlite-processes.js";
import { migrations } from "../../src/adapters/sqlite/migrations.js";
import { sqliteTestDb } from "../support/sqlite-harness.js";
import type { SqliteTestDb } from "../support/sqlite-harness.js";

const PROCESSES = 6;
const ROUNDS = 8;

let db: SqliteTestDb;
let store: Store;
let workers: Worker[] = [];
let failed = false;
let nextId = 0;

beforeAll(async () => {
  assertFreshBuild();
  db = sqliteTestDb("sqlite-processes");
  store = await db.open();
  workers = await Promise.all(
    Array.from({ length: PROCESSES }, (_, i) => spawnWorker(db.path, `p${i}`, "racer")),
  );
  expect(new Set(workers.map((w) => w.pid)).size).toBe(PROCESSES);
});

beforeEach(({ onTestFailed }) =>
  onTestFailed(() => {
    failed = true;
  }),
);

afterAll(async () => {
  for (const w of workers) w.send({ op: "exit" });
  await Promise.all(workers.map((w) => w.exited));
  await store?.close();
  db?.cleanup(failed);
});

/** Send one op to every process, all starting at the same wall-clock instant; collect every answer. */
async function round(op: Record<string, unknown>): Promise<Array<Record<string, unknown>>> {
  const id = ++nextId;
  const at = Date.now() + 40;
  for (const w of workers) w.send({ ...op, id, at });
  const answers = await Promise.all(workers.map((w) => w.next()));
  for (const a of answers) expect(a.id).toBe(id);
  return answers;
}

describe(`SQLite: ${PROCESSES} OS processes on one file`, () => {
  it(`race for a room lease: exactly one winner in each of ${ROUNDS} rounds`, async () => {
    for (let r = 0; r < ROUNDS; r++) {
      const answers = await round({ op: "acquire", room: `!procs-lease-${r}`, ttlMs: 60_000 });
      const winners = answers.filter((a) => a.ok === true);
      expect(winners, JSON.stringify(answers)).toHaveLength(1);
      expect(winners[0]!.result).toEqual({ term: 1 });
      expect(answers.filter((a) => a.error === "ConflictError")).toHaveLength(PROCESSES - 1);
    }
  });

  it(`race to insert one inbox event: exactly one "inserted" in each of ${ROUNDS} rounds`, async () => {
    for (let r = 0; r < ROUNDS; r++) {
      const event = {
        eventId: `$procs-${r}`,
        roomId: "!procs-inbox",
        sender: "@a:x",
        originServerTs: r,
        content: { body: "!dag help" },
      };
      const answers = await round({ op: "insert", event });
      expect(
        answers.every((a) => a.ok === true),
        JSON.stringify(answers),
      ).toBe(true);
      expect(answers.filter((a) => a.result === "inserted")).toHaveLength(1);
      expect(answers.filter((a) => a.result === "duplicate")).toHaveLength(PROCESSES - 1);
    }
  });

  it(`race to claim one queued task: exactly one winner in each of ${ROUNDS} rounds`, async () => {
    for (let r = 0; r < ROUNDS; r++) {
      const room = `!procs-claim-${r}`;
      const fence = await becomeLeader(store, room);
      const run = await publishRunning(store, fence, dag(`one_${r}`, [task("only")]));
      const answers = await round({ op: "claim", roomIds: [room] });
      expect(
        answers.every((a) => a.ok === true),
        JSON.stringify(answers),
      ).toBe(true);
      expect(answers.filter((a) => a.result === "only")).toHaveLength(1);
      expect(answers.filter((a) => a.result === null)).toHaveLength(PROCESSES - 1);
      const t = await store.getTask(run.runId, "only");
      expect(t?.status).toBe("running");
    }
  });

  it("drain a queue of 48 tasks together: every task claimed exactly once", async () => {
    const room = "!procs-drain";
    const fence = await becomeLeader(store, room);
    await store.setRoomCap(room, 100, { fence: fence });
    const ids: string[] = [];
    for (let r = 0; r < 4; r++) {
      const run = await publishRunning(
        store,
        fence,
        dag(
          `drain_${r}`,
          Array.from({ length: 12 }, (_, k) => task(`t${k}`)),
        ),
      );
      ids.push(...run.dag.tasks.map((t) => `${run.runId}/${t.id}`));
    }
    const answers = await round({ op: "drain", roomIds: [room] });
    expect(
      answers.every((a) => a.ok === true),
      JSON.stringify(answers),
    ).toBe(true);
    const claimed = answers.flatMap((a) => a.result as string[]);
    expect(claimed).toHaveLength(ids.length);
    expect([...claimed].sort()).toEqual([...ids].sort());
  });

  it(`${PROCESSES} processes opening a brand-new file at once apply the migrations exactly once`, async () => {
    const fresh = sqliteTestDb("sqlite-processes-open");
    let ok = false;
    try {
      const openers = await Promise.all(
        Array.from({ length: PROCESSES }, (_, i) => spawnWorker(fresh.path, `o${i}`, "racer")),
      );
      for (const w of openers) w.send({ op: "exit" });
      const exits = await Promise.all(openers.map((w) => w.exited));
      expect(exits.map((e) => e.code)).toEqual(Array(PROCESSES).fill(0));
      const rows = fresh.raw().prepare("SELECT version FROM schema_version ORDER BY version").all();
      // Every migration exactly once: one row per version, none repeated or missing.
      expect(rows).toEqual(migrations().map((m) => ({ version: m.version })));
      ok = true;
    } finally {
      fresh.cleanup(!ok);
    }
  });
});
