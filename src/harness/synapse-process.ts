/**
 * Runs one Synapse process: spawn with logs to a file, wait until it answers, stop it gracefully.
 * A homeserver never outlives the process that started it.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { closeSync, openSync, readFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { reapOnExit } from "./child-reaper.js";

/** Generous: a loaded CI box can take tens of seconds for a first start (recipe §1.5). */
const READY_TIMEOUT_MS = 120_000;
const STOP_GRACE_MS = 10_000;

/**
 * Runs Synapse's entry point in a Python that first asks Linux to SIGTERM it when its parent dies,
 * so a crashed or killed test worker leaves no homeserver behind.
 */
const LAUNCHER = [
  "import ctypes, runpy, signal, sys",
  "try:",
  "    ctypes.CDLL(None).prctl(1, int(signal.SIGTERM))",
  "except Exception:",
  "    pass",
  "sys.argv = ['synapse.app.homeserver'] + sys.argv[1:]",
  "runpy.run_module('synapse.app.homeserver', run_name='__main__', alter_sys=True)",
].join("\n");

export async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const addr = server.address();
      const port = typeof addr === "object" && addr ? addr.port : 0;
      server.close(() => resolvePort(port));
    });
  });
}

export function tailOf(path: string, lines: number): string {
  try {
    return readFileSync(path, "utf8").trimEnd().split("\n").slice(-lines).join("\n");
  } catch {
    return "(no log)";
  }
}

async function httpOk(url: string): Promise<boolean> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(2_000) });
    await res.arrayBuffer();
    return res.ok;
  } catch {
    return false;
  }
}

export interface Running {
  child: ChildProcess;
  exited: Promise<number | null>;
}

export function spawnSynapse(python: string, dataDir: string, logPath: string): Running {
  const logFd = openSync(logPath, "a");
  const child = spawn(python, ["-c", LAUNCHER, "-c", join(dataDir, "homeserver.yaml")], {
    cwd: dataDir,
    stdio: ["ignore", logFd, logFd],
  });
  closeSync(logFd);
  // Killed if this process exits without stopping it (once the caller installed the reaper).
  reapOnExit(child);
  const exited = new Promise<number | null>((resolveExit) => {
    child.once("exit", (code, signal) => {
      resolveExit(code ?? (signal ? -1 : null));
    });
  });
  return { child, exited };
}

export async function waitReady(run: Running, url: string, logPath: string): Promise<void> {
  let exitCode: number | null | undefined;
  void run.exited.then((c) => (exitCode = c));
  const deadline = Date.now() + READY_TIMEOUT_MS;
  const fail = (why: string) =>
    new Error(`Synapse at ${url} ${why}; log ${logPath}, last lines:\n${tailOf(logPath, 30)}`);
  while (!(await httpOk(`${url}/health`))) {
    if (exitCode !== undefined) throw fail(`exited with code ${exitCode} before it was ready`);
    if (Date.now() > deadline) throw fail(`was not healthy after ${READY_TIMEOUT_MS / 1000} s`);
    await new Promise((r) => setTimeout(r, 100));
  }
  if (!(await httpOk(`${url}/_matrix/client/versions`))) throw fail("answered /health but not /versions");
}

export async function stopProcess(run: Running): Promise<void> {
  if (run.child.exitCode !== null || run.child.signalCode !== null) return;
  run.child.kill("SIGTERM");
  const timer = setTimeout(() => run.child.kill("SIGKILL"), STOP_GRACE_MS);
  await run.exited;
  clearTimeout(timer);
}
