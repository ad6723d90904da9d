/**
 * Group commit on SQLite (docs/architecture.md §8, "Commits"): the writes asked for in one turn of
 * the event loop share one transaction and one commit, each in a savepoint of its own, so each
 * succeeds or fails alone as a transaction of its own would; a write's promise settles only after
 * the commit, when another connection sees it; listeners hear each change once, after the commit.
 */
import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { SqliteConnection } from "../../src/adapters/sqlite/connection.js";
import { ConflictError } from "../../src/ports/errors.js";
import type { SqliteTestDb } from "../support/sqlite-harness.js";
import { sqliteTestDb } from "../support/sqlite-harness.js";

let db: SqliteTestDb | null = null;
const opened: Array<{ close(): void }> = [];

afterEach((ctx) => {
  for (const c of opened.splice(0)) c.close();
  db?.cleanup(ctx.task.result?.state === "fail");
  db = null;
});

async function connection(heard: string[] = []): Promise<SqliteConnection> {
  db ??= sqliteTestDb("group-commit");
  const c = await SqliteConnection.open(db.path, 5_000, Date.now, (topic, roomId) =>
    heard.push(`${topic} ${roomId ?? ""}`),
  );
  opened.push(c);
  c.db.exec("CREATE TABLE IF NOT EXISTS t (k TEXT PRIMARY KEY, v INTEGER NOT NULL)");
  return c;
}

const keys = (c: SqliteConnection): string[] =>
  c.all<{ k: string }>("SELECT k FROM t ORDER BY k").map((r) => r.k);

describe("sqlite group commit", () => {
  it("writes asked for in one turn share one commit; one that throws undoes only its own changes", async () => {
    const heard: string[] = [];
    const c = await connection(heard);
    const before = { ...c.counts };
    const writes = Array.from({ length: 10 }, (_, i) =>
      c.write(`insert ${i}`, (tx) => {
        c.run("INSERT INTO t (k, v) VALUES (?, ?)", `k${i}`, i);
        tx.touch("tasks", "!room");
        if (i === 3) throw new ConflictError("insert 3", { k: "k3" }, null);
        // A constraint error half-way: its first insert is undone with it.
        if (i === 6) c.run("INSERT INTO t (k, v) VALUES (?, ?)", "k0", 0);
        return i;
      }),
    );
    const settled = await Promise.allSettled(writes);
    expect(settled.map((s) => s.status)).toEqual([
      "fulfilled",
      "fulfilled",
      "fulfilled",
      "rejected",
      "fulfilled",
      "fulfilled",
      "rejected",
      "fulfilled",
      "fulfilled",
      "fulfilled",
    ]);
    expect((settled[3] as PromiseRejectedResult).reason).toBeInstanceOf(ConflictError);
    expect(String((settled[6] as PromiseRejectedResult).reason)).toMatch(/insert 6/);
    expect(keys(c)).toEqual(["k0", "k1", "k2", "k4", "k5", "k7", "k8", "k9"]);
    expect(c.counts.commits - before.commits).toBe(1);
    expect(c.counts.writes - before.writes).toBe(10);
    // Eight writes touched the same topic and room: heard once, after the commit.
    expect(heard).toEqual(["tasks !room"]);
  });

  it("a write settles only after its commit: another connection sees it by then; awaited writes commit one by one", async () => {
    const c = await connection();
    const other = new Database(db!.path, { readonly: true });
    opened.push(other);
    const before = c.counts.commits;
    await c.write("one", () => c.run("INSERT INTO t (k, v) VALUES ('a', 1)"));
    expect(other.prepare("SELECT count(*) AS n FROM t").get()).toEqual({ n: 1 });
    await c.write("two", () => c.run("INSERT INTO t (k, v) VALUES ('b', 2)"));
    expect(other.prepare("SELECT count(*) AS n FROM t").get()).toEqual({ n: 2 });
    expect(c.counts.commits - before).toBe(2);
  });

  it("a batch that finds another connection holding the write lock retries whole, and every write lands once", async () => {
    db ??= sqliteTestDb("group-commit");
    await connection();
    // A short busy_timeout, so the wait for the lock ends in SQLITE_BUSY and the retry's backoff
    // (a timer) lets the holder's release run.
    const c = await SqliteConnection.open(db.path, 10, Date.now, () => {});
    opened.push(c);
    const blocker = new Database(db.path);
    opened.push(blocker);
    blocker.exec("BEGIN IMMEDIATE");
    setTimeout(() => blocker.exec("COMMIT"), 40);
    const before = c.counts.commits;
    const writes = [1, 2, 3].map((i) =>
      c.write(`w${i}`, () => c.run("INSERT INTO t (k, v) VALUES (?, ?)", `w${i}`, i)),
    );
    await Promise.all(writes);
    expect(keys(c)).toEqual(["w1", "w2", "w3"]);
    expect(c.counts.commits - before).toBe(1);
  });

  it("a write asked for and not yet committed when the connection closes fails with the store's error", async () => {
    const c = await connection();
    const pending = c.write("late", () => c.run("INSERT INTO t (k, v) VALUES ('late', 1)"));
    c.close();
    await expect(pending).rejects.toThrow(/late/);
  });
});
