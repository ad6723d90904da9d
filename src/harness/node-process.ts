/**
 * Runs `dagbot start` as a child process (for `dagbot demo`): this same CLI under the same Node,
 * its log lines to a file, readiness read from the log (`matrix intake ready`), and a stop that
 * sends SIGTERM and escalates to SIGKILL. Children are killed if this process exits first, once
 * the caller installed the child reaper (child-reaper.ts).
 */
import { spawn } from "node:child_process";
import { reapOnExit } from "./child-reaper.js";
import { closeSync, openSync, readFileSync } from "node:fs";

const STOP_GRACE_MS = 15_000;
const READY_LINE = '"msg":"matrix intake ready"';

export interface NodeProcess {
  readonly pid: number | undefined;
  readonly logPath: string;
  /** Resolves once the node logged that its first sync is in the inbox; rejects if it exits first. */
  ready(timeoutMs: number): Promise<void>;
  /** SIGTERM, SIGKILL after a grace period; resolves with the exit code. */
  stop(): Promise<number | null>;
}

export interface NodeProcessOptions {
  /** The CLI entry (dist/cli.js). */
  cli: string;
  args: string[];
  /** Added to this process's environment (e.g. DAGBOT_ACCESS_TOKEN). */
  env: Record<string, string>;
  logPath: string;
}

export function startNodeProcess(o: NodeProcessOptions): NodeProcess {
  const logFd = openSync(o.logPath, "a");
  const child = spawn(process.execPath, [o.cli, ...o.args], {
    env: { ...process.env, ...o.env },
    stdio: ["ignore", logFd, logFd],
  });
  closeSync(logFd);
  reapOnExit(child);
  let code: number | null | undefined;
  const exited = new Promise<number | null>((resolve) =>
    child.once("exit", (c, signal) => {
      code = c ?? (signal ? -1 : null);
      resolve(code);
    }),
  );
  const log = (): string => {
    try {
      return readFileSync(o.logPath, "utf8");
    } catch {
      return "";
    }
  };
  return {
    pid: child.pid,
    logPath: o.logPath,
    async ready(timeoutMs) {
      const deadline = Date.now() + timeoutMs;
      while (!log().includes(READY_LINE)) {
        if (code !== undefined) throw new Error(`the node exited (code ${code}); see ${o.logPath}`);
        if (Date.now() > deadline)
          throw new Error(`the node was not ready after ${timeoutMs} ms; see ${o.logPath}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    },
    async stop() {
      if (code !== undefined) return code;
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), STOP_GRACE_MS);
      const result = await exited;
      clearTimeout(timer);
      return result;
    },
  };
}
