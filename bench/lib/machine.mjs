/** The machine and versions a bench run happened on, for the results table. */
import { readFileSync } from "node:fs";
import { cpus, loadavg, totalmem } from "node:os";
import { join } from "node:path";
import process from "node:process";
import Database from "better-sqlite3";
import { dagbotCommit, ROOT } from "./dist.mjs";
import { postgresVersion } from "./scratch.mjs";

function packageVersion(name) {
  try {
    return JSON.parse(readFileSync(join(ROOT, "node_modules", name, "package.json"), "utf8")).version;
  } catch {
    return "missing";
  }
}

export async function machineInfo() {
  const db = new Database(":memory:");
  const sqlite = db.prepare("SELECT sqlite_version() AS v").get().v;
  db.close();
  return {
    date: new Date().toISOString(),
    nproc: cpus().length,
    memoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    cpuModel: cpus()[0]?.model ?? "unknown",
    loadAverageAtStart: loadavg().map((x) => Math.round(x * 100) / 100),
    versions: {
      node: process.version,
      postgres: await postgresVersion().catch((e) => `unreachable (${e.message})`),
      sqlite,
      betterSqlite3: packageVersion("better-sqlite3"),
      pg: packageVersion("pg"),
      graphileWorker: packageVersion("graphile-worker"),
      dagbot: dagbotCommit(),
    },
  };
}
