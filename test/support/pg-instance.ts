/**
 * A private PostgreSQL server for the chaos tests: initdb in a temp folder, started with pg_ctl on a
 * free port of 127.0.0.1 (trust auth, socket in that folder), stopped with `-m immediate` and started
 * again to simulate a crash-restart, removed afterwards. The machine's shared server (5432) is never
 * touched: other tests use it while this one kills its own. As root, every server command runs as
 * the `postgres` OS user (PostgreSQL refuses to run as root).
 */
import { execFile } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import pg from "pg";

const run = promisify(execFile);

/** Where Debian/Ubuntu put the server binaries; DAGBOT_PG_BIN overrides it. */
const PG_ROOT = "/usr/lib/postgresql";

export interface PgInstance {
  readonly port: number;
  readonly dir: string;
  /** URL of a database on the private server (postgres by default). */
  url(database?: string): string;
  createDatabase(name: string): Promise<string>;
  /** Crash-stop (`pg_ctl stop -m immediate`): connections drop at once, nothing is flushed politely. */
  crash(): Promise<void>;
  start(): Promise<void>;
  /** Stops the server and removes its folder, or keeps the folder and says where it is. */
  destroy(keep?: boolean): Promise<void>;
}

/** The folder holding initdb and pg_ctl, or an error that says what is missing and how to point at it. */
export function findPgBin(): string {
  const fromEnv = process.env.DAGBOT_PG_BIN;
  const candidates: string[] = [];
  if (fromEnv !== undefined && fromEnv !== "") candidates.push(fromEnv);
  if (existsSync(PG_ROOT)) {
    const versions = readdirSync(PG_ROOT)
      .filter((v) => /^\d+$/.test(v))
      .sort((a, b) => Number(b) - Number(a));
    for (const v of versions) candidates.push(join(PG_ROOT, v, "bin"));
  }
  for (const dir of candidates) {
    if (existsSync(join(dir, "initdb")) && existsSync(join(dir, "pg_ctl"))) return dir;
  }
  throw new Error(
    `the chaos test needs its own PostgreSQL server, but initdb and pg_ctl were not found ` +
      `(looked in ${candidates.length > 0 ? candidates.join(", ") : `${PG_ROOT}/<version>/bin`}); ` +
      `install the PostgreSQL server package or set DAGBOT_PG_BIN to the folder holding them`,
  );
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

const isRoot = (): boolean => typeof process.getuid === "function" && process.getuid() === 0;

/** Runs a server binary, as the postgres OS user when we are root. */
async function pgCommand(bin: string, program: string, args: string[]): Promise<string> {
  const path = join(bin, program);
  const [file, argv] = isRoot() ? ["runuser", ["-u", "postgres", "--", path, ...args]] : [path, args];
  try {
    const { stdout, stderr } = await run(file, argv, { timeout: 60_000 });
    return stdout + stderr;
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message?: string };
    throw new Error(
      `${program} ${args.join(" ")} failed: ${e.message ?? String(err)}\n${e.stdout ?? ""}${e.stderr ?? ""}`,
    );
  }
}

export async function startPgInstance(label = "chaos"): Promise<PgInstance> {
  const bin = findPgBin();
  const dir = mkdtempSync(join(tmpdir(), `dagbot-pg-${label}-`));
  const data = join(dir, "data");
  const logFile = join(dir, "server.log");
  if (isRoot()) {
    const { stdout } = await run("id", ["-u", "postgres"]).catch(() => {
      throw new Error("running as root, but there is no `postgres` OS user to run the private server as");
    });
    const { stdout: gid } = await run("id", ["-g", "postgres"]);
    chownSync(dir, Number(stdout.trim()), Number(gid.trim()));
  }
  await pgCommand(bin, "initdb", ["-D", data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync"]);
  const port = await freePort();
  // fsync off: a crash here is a killed server, not a lost OS page cache, so nothing committed is
  // lost and the chaos run is not slowed by a disk it does not test. Commits stay synchronous.
  const options = [
    `-p ${port}`,
    "-c listen_addresses=127.0.0.1",
    `-c unix_socket_directories=${dir}`,
    "-c fsync=off",
    "-c full_page_writes=off",
    "-c max_connections=200",
  ].join(" ");
  const url = (database = "postgres"): string => `postgres://postgres@127.0.0.1:${port}/${database}`;
  const start = async (): Promise<void> => {
    await pgCommand(bin, "pg_ctl", ["-D", data, "-l", logFile, "-o", options, "-w", "-t", "60", "start"]);
  };
  const stop = async (mode: "immediate" | "fast"): Promise<void> => {
    await pgCommand(bin, "pg_ctl", ["-D", data, "-m", mode, "-w", "-t", "60", "stop"]);
  };
  try {
    await start();
  } catch (err) {
    const log = existsSync(logFile) ? readFileSync(logFile, "utf8").slice(-2000) : "";
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`${String(err)}\n${log}`);
  }
  let running = true;
  return {
    port,
    dir,
    url,
    async createDatabase(name) {
      const client = new pg.Client({ connectionString: url() });
      await client.connect();
      try {
        await client.query(`CREATE DATABASE ${name}`);
      } finally {
        await client.end().catch(() => {});
      }
      return url(name);
    },
    async crash() {
      await stop("immediate");
      running = false;
    },
    async start() {
      await start();
      running = true;
    },
    async destroy(keep = false) {
      if (running) await stop("immediate").catch(() => {});
      running = false;
      if (keep) console.warn(`kept the private PostgreSQL folder ${dir} (data, server.log)`);
      else rmSync(dir, { recursive: true, force: true });
    },
  };
}
