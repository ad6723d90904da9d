/**
 * Section 1, SQLite: claim + complete per second through dagbot's store with 1, 2 and 4 OS
 * processes on one file (one Store per process, as one node per process has), as a node runs it now
 * (finishAndClaim while ready tasks are left) and with the finish and the next claim apart (as
 * before it), next to the raw BEGIN IMMEDIATE loop on a partial index in the same file with the
 * adapter's pragmas (WAL, synchronous=FULL), and all again with synchronous=NORMAL (the node
 * config's sqlite_synchronous).
 */
import { fork } from "node:child_process";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath, URL } from "node:url";
import Database from "better-sqlite3";
import { track } from "./lib/children.mjs";
import { load } from "./lib/dist.mjs";
import { hasFinishAndClaim, leadRoom, queueTasks } from "./lib/queue.mjs";

const CHILD = fileURLToPath(new URL("./sqlite-claim-child.mjs", import.meta.url));
const ROOM = "bench-claim";
const CHILD_TIMEOUT_MS = 120_000;

/** Starts `count` processes, waits until each has opened the file, then lets them go at once. */
async function race(mode, path, count) {
  const children = Array.from({ length: count }, (_, i) =>
    track(fork(CHILD, [mode, path, `${mode}-p${i}`], { stdio: ["ignore", "inherit", "inherit", "ipc"] })),
  );
  const timer = setTimeout(() => children.forEach((c) => c.kill("SIGKILL")), CHILD_TIMEOUT_MS);
  try {
    const message = (c, key) =>
      new Promise((resolve, reject) => {
        const onMessage = (m) => {
          if (m[key] !== undefined) {
            c.off("message", onMessage);
            resolve(m[key]);
          }
        };
        c.on("message", onMessage);
        c.once("exit", (code) => reject(new Error(`bench ${mode} process exited with ${code}`)));
      });
    await Promise.all(children.map((c) => message(c, "ready")));
    const results = children.map((c) => message(c, "result"));
    const t0 = performance.now();
    for (const c of children) c.send({ go: true });
    const done = await Promise.all(results);
    const seconds = (performance.now() - t0) / 1000;
    return {
      done: done.reduce((a, r) => a + r.done, 0),
      errors: done.reduce((a, r) => a + r.errors, 0),
      firstError: done.find((r) => r.firstError !== null)?.firstError ?? null,
      seconds,
      cpuUsPerPair:
        done.reduce((a, r) => a + r.cpuUs, 0) /
        Math.max(
          1,
          done.reduce((a, r) => a + r.done, 0),
        ),
    };
  } finally {
    clearTimeout(timer);
    await Promise.all(
      children.map((c) => (c.exitCode !== null ? null : new Promise((resolve) => c.once("exit", resolve)))),
    );
  }
}

export async function benchClaimSqlite(scratch, { rounds, jobs, processCounts, log }) {
  const path = join(scratch.dir("claim-sqlite"), "claim.db");
  const { openSqliteStore } = await load("adapters/sqlite/index.js");
  const store = await openSqliteStore(path);
  const raw = new Database(path);
  raw.pragma("busy_timeout = 5000");
  raw.exec(`CREATE TABLE raw_jobs (id INTEGER PRIMARY KEY, status TEXT NOT NULL, priority INTEGER NOT NULL DEFAULT 0, locked_by TEXT);
    CREATE INDEX raw_jobs_queued ON raw_jobs (priority DESC, id) WHERE status = 'queued';`);
  const addRaw = raw.prepare(
    `INSERT INTO raw_jobs (status) SELECT 'queued' FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ?) SELECT x FROM c)`,
  );
  const out = {
    finishAndClaim: hasFinishAndClaim(store),
    dagbot: {},
    dagbotNormal: {},
    apart: {},
    apartNormal: {},
    raw: {},
    rawNormal: {},
    cpu: { dagbot: {}, dagbotNormal: {}, apart: {}, apartNormal: {}, raw: {}, rawNormal: {} },
    errors: 0,
    firstError: null,
    rawErrors: 0,
  };
  try {
    const fence = await leadRoom(store, ROOM);
    for (let round = 0; round < rounds; round++) {
      for (const p of processCounts) {
        // dagbot's four variants; the loop and its "apart" twin swap places every round.
        const variants = [
          ["dagbot", "dagbot", ""],
          ["apart", "dagbot-apart", "_apart"],
          ["dagbotNormal", "dagbot-normal", "_normal"],
          ["apartNormal", "dagbot-apart-normal", "_apart_normal"],
        ];
        const order = round % 2 === 0 ? variants : [1, 0, 3, 2].map((i) => variants[i]);
        const v = {};
        for (const [key, mode, suffix] of order) {
          await queueTasks(store, fence, `claim_r${round}_p${p}${suffix}`, jobs);
          const d = await race(mode, path, p);
          if (d.done !== jobs)
            throw new Error(`dagbot sqlite claim (${mode}): ${d.done} of ${jobs} done (${d.firstError})`);
          (out[key][p] ??= []).push(d.done / d.seconds);
          (out.cpu[key][p] ??= []).push(d.cpuUsPerPair);
          out.errors += d.errors;
          out.firstError ??= d.firstError;
          v[key] = d;
        }
        const { dagbot: d, apart: a, dagbotNormal: dn, apartNormal: an } = v;
        addRaw.run(jobs);
        const r = await race("raw", path, p);
        (out.raw[p] ??= []).push(r.done / r.seconds);
        (out.cpu.raw[p] ??= []).push(r.cpuUsPerPair);
        out.rawErrors += r.errors;
        addRaw.run(jobs);
        const rn = await race("raw-normal", path, p);
        (out.rawNormal[p] ??= []).push(rn.done / rn.seconds);
        (out.cpu.rawNormal[p] ??= []).push(rn.cpuUsPerPair);
        out.rawErrors += rn.errors;
        const fig = (x) => `${(x.done / x.seconds).toFixed(0)}/s (${Math.round(x.cpuUsPerPair)} µs)`;
        log(
          `  sqlite round ${round + 1}: ${p} processes dagbot ${fig(d)}, apart ${fig(a)}, raw ${fig(r)}; ` +
            `synchronous=NORMAL: dagbot ${fig(dn)}, apart ${fig(an)}, raw ${fig(rn)}`,
        );
      }
    }
  } finally {
    raw.close();
    await store.close();
  }
  return out;
}
