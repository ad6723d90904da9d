/**
 * A writer process killed with SIGKILL in the middle of its write loop loses nothing it reported as
 * committed and leaves nothing half-written: every run has all its tasks and its log line, every
 * finished task is finished with its log line, and the log still takes writes in order. The child runs the built adapter
 * (dist/), so this file needs `npm run build` first and says so when dist is missing or stale.
 */
import { spawn } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterAll, beforeAll, expect, it } from "vitest";
import { openPostgresStore } from "../../src/adapters/postgres/index.js";
import type { Store } from "../../src/ports/store.js";
import type { TestDatabase } from "../support/postgres.js";
import { createTestDatabase, dropOrKeep } from "../support/postgres.js";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const SRC = join(ROOT, "src/adapters/postgres");
const DIST = join(ROOT, "dist/adapters/postgres");
const TASKS_PER_RUN = 12;
const KILL_AFTER_LINES = 40;

/** The built adapter, or a clear failure telling how to build it. */
function builtAdapter(): string {
  const entry = join(DIST, "index.js");
  if (!existsSync(entry))
    throw new Error(
      `${entry} is missing: this test runs the built adapter in a child process; run \`npm run build\``,
    );
  for (const f of readdirSync(SRC).filter((n) => n.endsWith(".ts"))) {
    const built = join(DIST, f.replace(/\.ts$/, ".js"));
    if (!existsSync(built) || statSync(built).mtimeMs < statSync(join(SRC, f)).mtimeMs)
      throw new Error(`${built} is older than src/adapters/postgres/${f}: run \`npm run build\``);
  }
  return pathToFileURL(entry).href;
}

// The child: take the room's lease, then loop forever creating runs (a multi-statement transaction),
// scheduling, and claiming and finishing one task (single-statement writes), printing each id only
// after its write returned, i.e. after COMMIT.
const CHILD = `
const { openPostgresStore } = await import(process.env.ADAPTER);
const store = await openPostgresStore(process.env.PG_URL, { poolSize: 2 });
const room = process.env.ROOM;
const me = { nodeId: "writer", bootId: "boot" };
const { expiresAt, ...fence } = await store.acquireLease(room, me, 600000);
const n = Number(process.env.TASKS);
const task = (id) => ({ id, action: "echo", args: { i: id }, needs: [], on: { labels: [], node: null }, timeoutMs: null,
  queueTimeoutMs: null, retries: 0, retryBackoffMs: 1000, concurrencyKey: null, priority: 0 });
for (let i = 0; ; i++) {
  const dag = { id: "d" + i, description: null, maxParallel: null, tasks: Array.from({ length: n }, (_, k) => task("t" + k)) };
  const r = await store.createRun({ fence }, { roomId: room, dag, hash: "h" + i, publisher: "@p:x", publishEventId: null,
    needsConfirmation: false, confirmTimeoutMs: 60000 });
  process.stdout.write("run " + r.run.runId + "\\n");
  await store.scheduleStep(fence);
  const c = await store.claimTask({ session: me, roomIds: [room], labels: [], actions: ["echo"], leaseMs: 60000 });
  if (c !== null) {
    await store.finishTask(c.token, { outcome: "succeeded", exitCode: 0, output: "ok", error: null });
    process.stdout.write("done " + c.token.runId + " " + c.token.taskId + "\\n");
  }
}
`;

let db: TestDatabase;
let store: Store;
let failed = false;

beforeAll(async () => {
  db = await createTestDatabase();
  store = await openPostgresStore(db.url, { poolSize: 2 });
});

afterAll(async () => {
  await store?.close();
  if (db !== undefined) await dropOrKeep(db, failed);
});

it("kill -9 in the middle of a write loop: everything reported committed is there and complete, nothing partial", async () => {
  try {
    const adapter = builtAdapter();
    const room = "!crash:example.org";
    const child = spawn(process.execPath, ["--input-type=module", "-e", CHILD], {
      env: { ...process.env, ADAPTER: adapter, PG_URL: db.url, ROOM: room, TASKS: String(TASKS_PER_RUN) },
      stdio: ["ignore", "pipe", "pipe"],
    });
    const lines: string[] = [];
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<NodeJS.Signals | number | null>((done) =>
      child.on("exit", (code, signal) => done(signal ?? code)),
    );
    await new Promise<void>((killed, gaveUp) => {
      let buffered = "";
      child.stdout.on("data", (d: Buffer) => {
        buffered += d.toString();
        const parts = buffered.split("\n");
        buffered = parts.pop() ?? "";
        lines.push(...parts);
        if (lines.length >= KILL_AFTER_LINES && child.exitCode === null && child.signalCode === null) {
          child.kill("SIGKILL");
          killed();
        }
      });
      void exited.then((how) =>
        gaveUp(new Error(`the writer exited on its own (${String(how)}): ${stderr}`)),
      );
    });
    expect(await exited).toBe("SIGKILL");

    const reportedRuns = lines.filter((l) => l.startsWith("run ")).map((l) => l.split(" ")[1]!);
    const reportedDone = lines.filter((l) => l.startsWith("done ")).map((l) => l.split(" ").slice(1));
    expect(reportedRuns.length).toBeGreaterThanOrEqual(KILL_AFTER_LINES / 2 - 1);

    // Every run in the store (reported or committed just before the kill) is whole.
    const runs = await db.query<{ run_id: string; tasks: number; logged: number }>(
      `SELECT r.run_id,
              (SELECT count(*) FROM tasks t WHERE t.run_id = r.run_id)::int AS tasks,
              (SELECT count(*) FROM events e WHERE e.run_id = r.run_id AND e.kind = 'run.created')::int AS logged
         FROM runs r WHERE r.room_id = $1`,
      [room],
    );
    const stored = new Map(runs.map((r) => [r.run_id, r]));
    for (const id of reportedRuns) expect(stored.has(id), `reported run ${id} is stored`).toBe(true);
    for (const r of runs)
      expect([r.tasks, r.logged], `run ${r.run_id} is complete`).toEqual([TASKS_PER_RUN, 1]);
    expect(runs.length - reportedRuns.length).toBeLessThanOrEqual(1);

    for (const [runId, taskId] of reportedDone) {
      const t = await store.getTask(runId!, taskId!);
      expect(t).toMatchObject({ status: "succeeded", output: "ok", exitCode: 0 });
    }
    // Every task is in a state a committed transaction leaves, with its log line.
    const states = await db.query<{ status: string; n: number; logged: number }>(
      `SELECT t.status, count(*)::int AS n,
              count(*) FILTER (WHERE EXISTS (SELECT 1 FROM events e WHERE e.run_id = t.run_id AND e.task_id = t.task_id
                                              AND e.kind = 'task.' || t.status))::int AS logged
         FROM tasks t WHERE t.room_id = $1 GROUP BY t.status`,
      [room],
    );
    for (const s of states) {
      expect(["blocked", "queued", "running", "succeeded"]).toContain(s.status);
      if (s.status !== "blocked") expect(s.logged, `${s.status} tasks have their log lines`).toBe(s.n);
    }

    // The dead connection's locks are gone (the server rolled its transaction back): a new write
    // to the room's log goes through and lands after everything before it.
    await store.insertInboxEvent({
      eventId: "$after-crash",
      roomId: room,
      sender: "@a:x",
      originServerTs: 1,
      content: {},
      seenBy: "test",
    });
    const log = await store.readEvents(room, 0, 100_000);
    const seqs = log.map((e) => e.seq);
    expect(new Set(seqs).size).toBe(seqs.length);
    expect([...seqs].sort((a, b) => a - b)).toEqual(seqs);
    expect(log.at(-1)?.kind).toBe("inbox.inserted");
  } catch (e) {
    failed = true;
    throw e;
  }
});
