/**
 * Real OS processes on one SQLite file, for the concurrency and crash tests: spawn
 * test/support/sqlite-worker.mjs (which imports the built adapter from dist/), talk JSON lines.
 */
import { spawn } from "node:child_process";
import type { ChildProcessWithoutNullStreams } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
export const WORKER = join(root, "test/support/sqlite-worker.mjs");
export const DIST_ADAPTER = join(root, "dist/adapters/sqlite/index.js");

/** The worker runs dist/: refuse to test a missing or stale build rather than old code. */
export function assertFreshBuild(): void {
  if (!existsSync(DIST_ADAPTER))
    throw new Error(`${DIST_ADAPTER} is missing: run \`npm run build\` before the SQLite process tests`);
  const stale: string[] = [];
  for (const dir of ["src/adapters/sqlite", "src/ports", "src/domain"]) {
    for (const f of readdirSync(join(root, dir))) {
      if (!f.endsWith(".ts")) continue;
      const built = join(root, "dist", dir.slice("src/".length), f.replace(/\.ts$/, ".js"));
      if (!existsSync(built) || statSync(built).mtimeMs < statSync(join(root, dir, f)).mtimeMs)
        stale.push(`${dir}/${f}`);
    }
  }
  if (stale.length > 0)
    throw new Error(
      `dist/ is older than ${stale.join(", ")}: run \`npm run build\` before the SQLite process tests`,
    );
}

export interface Worker {
  readonly pid: number;
  readonly child: ChildProcessWithoutNullStreams;
  /** The next JSON line the worker prints (rejects if it exits first). */
  next(): Promise<Record<string, unknown>>;
  send(message: Record<string, unknown>): void;
  /** Resolves with the exit code or signal once the process is gone. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stderr(): string;
}

export async function spawnWorker(
  dbPath: string,
  nodeId: string,
  mode: string,
  ...args: string[]
): Promise<Worker> {
  const child = spawn(process.execPath, [WORKER, DIST_ADAPTER, dbPath, nodeId, mode, ...args], {
    stdio: ["pipe", "pipe", "pipe"],
  });
  let err = "";
  child.stderr.on("data", (d: Buffer) => (err += d.toString()));
  const lines: string[] = [];
  const waiting: Array<{ resolve: (l: string) => void; reject: (e: Error) => void }> = [];
  let gone = false;
  createInterface({ input: child.stdout }).on("line", (line) => {
    const w = waiting.shift();
    if (w !== undefined) w.resolve(line);
    else lines.push(line);
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((res) =>
    child.on("exit", (code, signal) => {
      gone = true;
      for (const w of waiting.splice(0))
        w.reject(new Error(`worker ${nodeId} exited (${code ?? signal}): ${err}`));
      res({ code, signal });
    }),
  );
  const worker: Worker = {
    pid: child.pid!,
    child,
    next: () =>
      new Promise((res, rej) => {
        const l = lines.shift();
        if (l !== undefined) res(JSON.parse(l) as Record<string, unknown>);
        else if (gone) rej(new Error(`worker ${nodeId} has exited: ${err}`));
        else waiting.push({ resolve: (x) => res(JSON.parse(x) as Record<string, unknown>), reject: rej });
      }),
    send: (m) => child.stdin.write(`${JSON.stringify(m)}\n`),
    exited,
    stderr: () => err,
  };
  const ready = await worker.next();
  if (ready.ready !== true)
    throw new Error(`worker ${nodeId} did not start: ${JSON.stringify(ready)} ${err}`);
  return worker;
}
