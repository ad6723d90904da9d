/**
 * Group commit on SQLite (docs/architecture.md §8, "Commits"): the writes asked for in one turn of
 * the event loop share one transaction and one commit, each in a savepoint of its own, so each
 * succeeds or fails alone as a transaction of its own would; a write's promise settles only after
 * the commit, when another connection sees it; listeners hear each change once, after the commit.
 */
import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { MAX_JOIN_ROUNDS, SqliteConnection } from "../../src/adapters/sqlite/connection.js";
import type { CommittedWrite } from "../../src/ports/store.js";
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

  it("writes a joiner asks for inside a commit join it: they see its changes, fail alone and are heard in the next round", async () => {
    const heard: string[] = [];
    const c = await connection(heard);
    const rounds: string[][] = [];
    const joined: Array<Promise<unknown>> = [];
    const leave = c.joinCommits(
      (writes: readonly CommittedWrite[]) => {
        rounds.push(writes.map((w) => `${w.operation}:${w.touched.map(([t, r]) => `${t} ${r}`).join(",")}`));
        if (!writes.some((w) => w.operation === "finish")) return;
        // What the finish wrote is there to read for a write that joins.
        joined.push(
          c.write("step", (tx) => {
            const v = c.get<{ v: number }>("SELECT v FROM t WHERE k = 'a'")!.v;
            c.run("INSERT INTO t (k, v) VALUES ('b', ?)", v + 1);
            tx.touch("tasks", "!room");
            return v + 1;
          }),
          c.write("refused", () => {
            c.run("INSERT INTO t (k, v) VALUES ('c', 1)");
            throw new ConflictError("refused", { k: "c" }, null);
          }),
        );
      },
      () => {},
    );
    const before = c.counts.commits;
    const finish = c.write("finish", (tx) => {
      c.run("INSERT INTO t (k, v) VALUES ('a', 41)");
      tx.touch("done", "!room");
    });
    await finish;
    const [step, refused] = await Promise.allSettled(joined);
    expect(step).toEqual({ status: "fulfilled", value: 42 });
    expect((refused as PromiseRejectedResult).reason).toBeInstanceOf(ConflictError);
    expect(keys(c)).toEqual(["a", "b"]);
    expect(c.counts.commits - before).toBe(1);
    // The joiner heard the finish, then the step that joined it (not the write that failed).
    expect(rounds).toEqual([["finish:done !room"], ["step:tasks !room"]]);
    expect(heard).toEqual(["done !room", "tasks !room"]);
    leave();
    await c.write("after", () => c.run("INSERT INTO t (k, v) VALUES ('z', 0)"));
    expect(rounds).toHaveLength(2);
  });

  it("a joiner that keeps asking adds at most MAX_JOIN_ROUNDS rounds to one commit", async () => {
    const c = await connection();
    let n = 0;
    const asked: Array<Promise<unknown>> = [];
    c.joinCommits(
      () => {
        n += 1;
        asked.push(c.write(`again ${n}`, () => c.run("INSERT INTO t (k, v) VALUES (?, ?)", `j${n}`, n)));
      },
      () => {},
    );
    const before = c.counts.commits;
    await c.write("first", () => c.run("INSERT INTO t (k, v) VALUES ('first', 0)"));
    await Promise.all(asked);
    expect(n).toBe(MAX_JOIN_ROUNDS);
    expect(c.counts.commits - before).toBe(1);
    expect(keys(c)).toHaveLength(MAX_JOIN_ROUNDS + 1);
  });

  it("a joiner may not read, and one that throws is reported while the commit goes on", async () => {
    const c = await connection();
    const reported: unknown[] = [];
    let read: Promise<unknown> | null = null;
    c.joinCommits(
      () => {
        read ??= c.read("a look", () => c.all("SELECT k FROM t"));
      },
      () => {},
    );
    c.joinCommits(
      () => {
        throw new Error("joiner broke");
      },
      (err) => reported.push(err),
    );
    await c.write("w", () => c.run("INSERT INTO t (k, v) VALUES ('w', 1)"));
    expect(keys(c)).toEqual(["w"]);
    await expect(read).rejects.toThrow(/a look: a read inside a commit/);
    expect(String(reported[0])).toMatch(/joiner broke/);
  });
});
