/**
 * A private PgBouncer in transaction mode for the tests of a store behind a pooler (docs/operations.md,
 * "Behind a connection pooler"): its own process on a free port, its own folder (config, user list,
 * pid file, log), pointing at the test PostgreSQL server, stopped by `stop()`. It sets no
 * `ignore_startup_parameters`, so a connection that sends startup options (`-c ...`) is refused, as
 * PgBouncer 1.18 refuses it by default.
 */
import { execFileSync, spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { adminUrl } from "./postgres.js";

const INSTALL_HINT =
  "install it with: apt-get update && apt-get install -y pgbouncer (Debian/Ubuntu; .ci/run does this), " +
  "or put a pgbouncer binary on the PATH or in DAGBOT_TEST_PGBOUNCER";

export interface PgBouncer {
  readonly port: number;
  /** The pooler's URL for database `name` on the test server (as the server's user, no startup options). */
  url(name: string): string;
  /** The pooler's log so far (for a failing test's message). */
  log(): string;
  stop(): Promise<void>;
}

/** The pgbouncer binary: DAGBOT_TEST_PGBOUNCER, else on the PATH or in /usr/sbin; a clear error when missing. */
export function pgbouncerBinary(): string {
  const fromEnv = process.env.DAGBOT_TEST_PGBOUNCER;
  if (fromEnv !== undefined && fromEnv !== "") {
    if (!existsSync(fromEnv)) throw new Error(`DAGBOT_TEST_PGBOUNCER names ${fromEnv}, which does not exist`);
    return fromEnv;
  }
  for (const dir of [...(process.env.PATH ?? "").split(":"), "/usr/sbin", "/usr/local/sbin"]) {
    if (dir !== "" && existsSync(join(dir, "pgbouncer"))) return join(dir, "pgbouncer");
  }
  throw new Error(`the pgbouncer binary is missing (the pooler tests run a real one); ${INSTALL_HINT}`);
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

const accepts = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });

/** A user PgBouncer can switch to when started as root (it refuses to run as root). */
function unprivilegedUser(): { name: string; uid: number; gid: number } | null {
  if (process.getuid?.() !== 0) return null;
  for (const name of ["postgres", "nobody"]) {
    try {
      const uid = Number(execFileSync("id", ["-u", name], { encoding: "utf8" }).trim());
      const gid = Number(execFileSync("id", ["-g", name], { encoding: "utf8" }).trim());
      return { name, uid, gid };
    } catch {
      // no such user: try the next
    }
  }
  throw new Error("pgbouncer refuses to run as root, and neither a postgres nor a nobody user exists");
}

/** Starts a transaction-mode PgBouncer in front of the test server (DAGBOT_TEST_PG_URL's host and port). */
export async function startPgBouncer(): Promise<PgBouncer> {
  const binary = pgbouncerBinary();
  const server = new URL(adminUrl());
  const user = decodeURIComponent(server.username || "postgres");
  const dir = mkdtempSync(join(tmpdir(), "dagbot-pgbouncer-"));
  const port = await freePort();
  const runAs = unprivilegedUser();
  const logfile = join(dir, "pgbouncer.log");
  writeFileSync(
    join(dir, "pgbouncer.ini"),
    [
      "[databases]",
      `* = host=${server.hostname} port=${server.port || "5432"}`,
      "[pgbouncer]",
      "listen_addr = 127.0.0.1",
      `listen_port = ${port}`,
      "unix_socket_dir =",
      "auth_type = trust",
      `auth_file = ${join(dir, "userlist.txt")}`,
      "pool_mode = transaction",
      "max_client_conn = 500",
      "default_pool_size = 40",
      `pidfile = ${join(dir, "pgbouncer.pid")}`,
      `logfile = ${logfile}`,
      ...(runAs === null ? [] : [`user = ${runAs.name}`]),
      "",
    ].join("\n"),
  );
  writeFileSync(join(dir, "userlist.txt"), `"${user}" ""\n`);
  if (runAs !== null) {
    chownSync(dir, runAs.uid, runAs.gid);
    for (const f of ["pgbouncer.ini", "userlist.txt"]) chownSync(join(dir, f), runAs.uid, runAs.gid);
  }
  const child: ChildProcess = spawn(binary, [join(dir, "pgbouncer.ini")], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout?.on("data", (d: Buffer) => (output += d.toString()));
  child.stderr?.on("data", (d: Buffer) => (output += d.toString()));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const log = (): string => {
    try {
      return readFileSync(logfile, "utf8");
    } catch {
      return output;
    }
  };
  for (let i = 0; i < 100 && !(await accepts(port)); i++) {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(`pgbouncer exited at start (${child.exitCode ?? child.signalCode}): ${output}${log()}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  if (!(await accepts(port))) {
    child.kill("SIGKILL");
    throw new Error(`pgbouncer did not listen on 127.0.0.1:${port} within 5 s: ${output}${log()}`);
  }
  return {
    port,
    url: (name) => `postgres://${encodeURIComponent(user)}@127.0.0.1:${port}/${encodeURIComponent(name)}`,
    log,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        // SIGTERM: PgBouncer closes every connection and exits at once.
        child.kill("SIGTERM");
        const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
        await exited;
        clearTimeout(timer);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
