/**
 * SIGSTOP of a node process that never leaves it frozen inside a write transaction on SQLite.
 *
 * On SQLite a process stopped inside a write transaction keeps the file's write lock, and every
 * other writer on that file (other nodes, the CLI, a test's own store) waits until it resumes or dies
 * — a known limit of one SQLite file shared by processes; PostgreSQL ends such a session after 2 s,
 * see test/chaos/pg-frozen-transaction.test.ts. That case is detected (the lock stays taken for a
 * whole second, far longer than any live transaction) and the freeze is retried a moment later.
 */
import Database from "better-sqlite3";
import type { Target } from "./engine-cluster.js";

/** Stops the process through `signal`; returns how many times it had to be resumed and stopped again. */
export async function freezeOutsideWrite(
  signal: (signal: "SIGSTOP" | "SIGCONT") => void,
  target: Pick<Target, "kind" | "store">,
): Promise<number> {
  for (let retries = 0; ; retries++) {
    signal("SIGSTOP");
    if (target.kind !== "sqlite" || !(await writeLockHeldFor(target.store.replace(/^sqlite:/, ""), 1_000)))
      return retries;
    signal("SIGCONT");
    if (retries >= 20) throw new Error(`the node stopped inside a write transaction 20 times in a row`);
    await new Promise((r) => setTimeout(r, 20 + retries * 7));
  }
}

/** True when no write transaction could start on the SQLite file for `ms` (probing every 20 ms). */
async function writeLockHeldFor(path: string, ms: number): Promise<boolean> {
  const db = new Database(path, { timeout: 0 });
  try {
    const deadline = Date.now() + ms;
    while (Date.now() < deadline) {
      try {
        db.exec("BEGIN IMMEDIATE");
        db.exec("ROLLBACK");
        return false;
      } catch (err) {
        if (!String((err as { code?: string }).code).startsWith("SQLITE_BUSY")) throw err;
      }
      await new Promise((r) => setTimeout(r, 20));
    }
    return true;
  } finally {
    db.close();
  }
}
