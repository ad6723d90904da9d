/**
 * SQLite under kill -9: a child process creates runs (20 tasks each) in a loop and prints each
 * committed run; killed mid-loop, it must have lost nothing it reported and left nothing half
 * written. Also: an onChange subscription never keeps a process alive. Needs `npm run build`.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { Store } from "../../src/ports/store.js";
import { assertFreshBuild, spawnWorker } from "../support/sqlite-processes.js";
import { sqliteTestDb } from "../support/sqlite-harness.js";
import type { SqliteTestDb } from "../support/sqlite-harness.js";

const TASKS_PER_RUN = 20;
const KILLS = 3;

let db: SqliteTestDb;
let failed = false;

beforeAll(() => {
  assertFreshBuild();
  db = sqliteTestDb("sqlite-crash");
});
beforeEach(({ onTestFailed }) =>
  onTestFailed(() => {
    failed = true;
  }),
);
afterAll(() => db?.cleanup(failed));

describe("SQLite: a process killed with SIGKILL in the middle of a write loop", () => {
  it(`loses no reported commit and leaves no partial run (${KILLS} kills)`, async () => {
    const room = "!crash";
    const reported = new Set<string>();
    for (let k = 0; k < KILLS; k++) {
      // A new life (and room) each time, as a restarted node would be.
      const w = await spawnWorker(db.path, `crash${k}`, "create-loop", `${room}-${k}`, String(TASKS_PER_RUN));
      // Kill at a different depth each time: after 5, 11, 17 commits, while the next is being written.
      for (let i = 0; i < 5 + 6 * k; i++) {
        const line = await w.next();
        reported.add(line.committed as string);
      }
      w.child.kill("SIGKILL");
      const exit = await w.exited;
      expect(exit.signal).toBe("SIGKILL");
    }

    const raw = db.raw();
    expect(raw.pragma("integrity_check", { simple: true })).toBe("ok");
    const store: Store = await db.open();
    try {
      const present = new Set<string>();
      for (let k = 0; k < KILLS; k++) {
        for (const run of await store.listRuns(`${room}-${k}`, { limit: 1000 })) {
          present.add(run.dagId);
          const tasks = await store.listTasks(run.runId);
          expect(
            tasks.map((t) => t.taskId),
            run.dagId,
          ).toEqual(Array.from({ length: TASKS_PER_RUN }, (_, i) => `t${i}`));
        }
      }
      for (const dagId of reported) expect(present.has(dagId), `${dagId} was reported committed`).toBe(true);
      // At most one run per life may be committed without having been printed yet.
      expect(present.size - reported.size).toBeLessThanOrEqual(KILLS);
      // No task row without its run, no run without its full task set (checked above).
      const orphans = raw
        .prepare("SELECT COUNT(*) AS n FROM tasks WHERE run_id NOT IN (SELECT run_id FROM runs)")
        .get();
      expect(orphans).toEqual({ n: 0 });
    } finally {
      await store.close();
    }
  });

  it("a process that subscribed to onChange and never closed still exits on its own (the poll timer is unref'd)", async () => {
    const w = await spawnWorker(db.path, "listener", "listen");
    const exit = await w.exited;
    expect(exit).toEqual({ code: 0, signal: null });
  });
});
