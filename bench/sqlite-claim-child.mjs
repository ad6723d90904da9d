/**
 * One OS process of the SQLite claim-path bench: opens the shared file, says ready, waits for "go",
 * then claims and completes until nothing is queued, and reports its count and errors.
 * argv: mode (dagbot | dagbot-normal | dagbot-apart | dagbot-apart-normal | raw | raw-normal), path
 * to the file, worker name. `-apart`: the finish and the next claim apart (claimLoop's `apart`).
 */
import process from "node:process";
import Database from "better-sqlite3";
import { load } from "./lib/dist.mjs";
import { claimLoop, offer } from "./lib/queue.mjs";

const [mode, path, name] = process.argv.slice(2);
export const ROOM = "bench-claim";

function send(message) {
  return new Promise((resolve) => process.send(message, () => resolve()));
}

const go = new Promise((resolve) => process.once("message", resolve));

/** The limit: the same pick and two updates in BEGIN IMMEDIATE, with the adapter's pragmas. */
function rawLoop(sync) {
  const db = new Database(path);
  db.pragma("busy_timeout = 5000");
  db.pragma("journal_mode = WAL");
  db.pragma(`synchronous = ${sync}`);
  const pick = db.prepare(
    "SELECT id FROM raw_jobs WHERE status = 'queued' ORDER BY priority DESC, id LIMIT 1",
  );
  const take = db.prepare("UPDATE raw_jobs SET status = 'running', locked_by = ? WHERE id = ?");
  const finish = db.prepare("UPDATE raw_jobs SET status = 'done' WHERE id = ? AND status = 'running'");
  const claim = db
    .transaction(() => {
      const row = pick.get();
      if (row === undefined) return null;
      take.run(name, row.id);
      return row.id;
    })
    .immediate.bind(null);
  const done = db.transaction((id) => finish.run(id)).immediate.bind(null);
  return {
    run() {
      let n = 0;
      let errors = 0;
      let firstError = null;
      for (;;) {
        let id;
        try {
          id = claim();
        } catch (e) {
          errors += 1;
          firstError ??= String(e);
          if (errors > 1000) break;
          continue;
        }
        if (id === null) break;
        try {
          done(id);
          n += 1;
        } catch (e) {
          errors += 1;
          firstError ??= String(e);
        }
      }
      return { done: n, errors, firstError };
    },
    close: () => db.close(),
  };
}

if (mode.startsWith("dagbot")) {
  const { openSqliteStore } = await load("adapters/sqlite/index.js");
  // A build from before sqlite_synchronous ignores the option (and runs FULL).
  const store = await openSqliteStore(path, mode.endsWith("-normal") ? { synchronous: "normal" } : {});
  await send({ ready: true });
  await go;
  const cpu0 = process.cpuUsage();
  const result = await claimLoop(store, offer(ROOM, name), { apart: mode.includes("-apart") });
  const cpu = process.cpuUsage(cpu0);
  result.cpuUs = cpu.user + cpu.system;
  await store.close();
  await send({ result });
} else {
  const loop = rawLoop(mode === "raw-normal" ? "NORMAL" : "FULL");
  await send({ ready: true });
  await go;
  const cpu0 = process.cpuUsage();
  const result = loop.run();
  const cpu = process.cpuUsage(cpu0);
  result.cpuUs = cpu.user + cpu.system;
  loop.close();
  await send({ result });
}
process.disconnect();
