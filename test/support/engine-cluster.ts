/**
 * Engine end-to-end helpers: a store target (a SQLite file or a fresh PostgreSQL database), node
 * configs with short leases, `node dist/cli.js node` processes that can be killed with SIGKILL, CLI
 * invocations, and readers of the store that wait for states instead of sleeping.
 */
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import {
  createWriteStream,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { openStore } from "../../src/adapters/store-factory.js";
import { parseStoreLocation } from "../../src/config/store-location.js";
import type { CommandPolicy } from "../../src/app/commands/context.js";
import type { LogEvent, Store, TaskRecord } from "../../src/ports/store.js";
import { createTestDatabase, dropOrKeep } from "./postgres.js";
import { waitFor } from "./store-wait.js";

export const REPO = resolve(fileURLToPath(new URL("../..", import.meta.url)));
export const CLI = join(REPO, "dist", "cli.js");
const FIXTURES = join(REPO, "test", "support", "engine-fixtures");
export const ROOM = "local";

export function requireBuild(): void {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run \`npm run build\` first (npm test does)`);
}

export type StoreKind = "sqlite" | "postgres";

/** Where a test's nodes meet: the store string for their configs, and a Store for the test itself. */
export interface Target {
  kind: StoreKind;
  /** A scratch folder for configs, logs and marker files. */
  dir: string;
  store: string;
  open(): Promise<Store>;
  cleanup(failed: boolean): Promise<void>;
}

export async function createTarget(kind: StoreKind, label: string): Promise<Target> {
  const db = kind === "postgres" ? await createTestDatabase() : null;
  return targetIn(kind, `engine-${label}`, db?.url ?? null, "engine test folder", async (failed) => {
    if (db !== null) await dropOrKeep(db, failed);
  });
}

/**
 * A target in a new scratch folder `dagbot-<prefix>-*`: on `storeUrl`, or on a SQLite file in the
 * folder when it is null. The folder is kept (and said so, as `what`) when the test failed.
 */
export function targetIn(
  kind: StoreKind,
  prefix: string,
  storeUrl: string | null,
  what: string,
  dispose: (failed: boolean) => Promise<void> = async () => {},
): Target {
  const dir = mkdtempSync(join(tmpdir(), `dagbot-${prefix}-`));
  const store = storeUrl ?? `sqlite:${join(dir, "store.db")}`;
  const location = parseStoreLocation(store);
  if (!location.ok) throw new Error(location.message);
  return {
    kind,
    dir,
    store,
    open: () => openStore(location.store),
    async cleanup(failed) {
      await dispose(failed);
      if (failed) console.warn(`kept ${what} ${dir} (configs, node logs, markers)`);
      else rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface NodeConfigOptions {
  nodeId: string;
  labels?: string[];
  capacity?: number;
  ttl?: string;
  renewEvery?: string;
  acquireEvery?: string;
  /** The task lease; default the room lease's ttl, so a killed worker's task is retried as soon. */
  taskTtl?: string;
  /** lease.task_margin; default a tenth of the task lease. */
  taskMargin?: string;
  extra?: string;
}

/** The room policy a test's local command (sendLocalCommand) is judged by: power 50 to write, no two-person rule. */
export const LOCAL_POLICY: CommandPolicy = {
  requiredPowerLevel: 50,
  allowlist: [],
  twoPersonRule: false,
  autoConfirm: [],
  confirmTimeoutMs: 3_600_000,
  nodeStaleAfterMs: 30_000,
};

/** A node config (TOML) for a test node: short leases and the test actions; returns its path. */
export function writeNodeConfig(target: Target, o: NodeConfigOptions): string {
  const marks = join(target.dir, "marks");
  mkdirSync(marks, { recursive: true });
  const node = JSON.stringify(process.execPath);
  const toml = `
node_id = "${o.nodeId}"
labels = ${JSON.stringify(o.labels ?? ["linux"])}
capacity = ${o.capacity ?? 4}
store = ${JSON.stringify(target.store)}
log_level = "debug"

[lease]
ttl = "${o.ttl ?? "2s"}"
task_ttl = "${o.taskTtl ?? o.ttl ?? "2s"}"
${o.taskMargin === undefined ? "" : `task_margin = "${o.taskMargin}"`}
renew_every = "${o.renewEvery ?? "500ms"}"
acquire_every = "${o.acquireEvery ?? "1s"}"

[actions.echo]
argv = ["echo", "{message}"]
args = { message = { pattern = '[A-Za-z0-9 _.-]{0,100}' } }
timeout = "30s"
kill_grace = "300ms"

[actions.work]
argv = [${node}, ${JSON.stringify(join(FIXTURES, "work.mjs"))}, "{ms}", ${JSON.stringify(marks)}]
args = { ms = { pattern = '[0-9]{1,6}' } }
timeout = "60s"
kill_grace = "300ms"

[actions.stubborn]
argv = [${node}, ${JSON.stringify(join(FIXTURES, "stubborn.mjs"))}, ${JSON.stringify(marks)}]
timeout = "1s"
kill_grace = "300ms"
${o.extra ?? ""}
`;
  const path = join(target.dir, `${o.nodeId}.toml`);
  writeFileSync(path, toml);
  return path;
}

export function marksDir(target: Target): string {
  return join(target.dir, "marks");
}

/** Marker files an attempt of `work` wrote: `<run>.<task>.<attempt>.start|end`. */
export function markerExists(
  target: Target,
  runId: string,
  taskId: string,
  attempt: number,
  what: "start" | "end",
): boolean {
  return existsSync(join(marksDir(target), `${runId}.${taskId}.${attempt}.${what}`));
}

export function readPid(path: string): number {
  return Number(readFileSync(path, "utf8").trim());
}

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export interface NodeProcess {
  nodeId: string;
  child: ChildProcess;
  /** Resolves with the exit code (null when killed by a signal) and the signal. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  kill(signal: NodeJS.Signals): void;
  logPath: string;
}

/** Starts `node dist/cli.js node --config FILE`; its stderr (JSON logs) goes to a file in the target's folder. */
export function startNode(target: Target, configPath: string, nodeId: string): NodeProcess {
  const logPath = join(target.dir, `${nodeId}.log`);
  const log = createWriteStream(logPath, { flags: "a" });
  const child = spawn(process.execPath, [CLI, "node", "--config", configPath], {
    cwd: target.dir,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, DAGBOT_LOG_LEVEL: "debug" },
  });
  child.stdout?.pipe(log);
  child.stderr?.pipe(log);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) => {
    child.once("exit", (code, signal) => done({ code, signal }));
  });
  return { nodeId, child, exited, kill: (signal) => child.kill(signal), logPath };
}

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `node dist/cli.js ARGS` to its end. */
export function cli(
  args: string[],
  options: { cwd?: string; env?: Record<string, string>; timeoutMs?: number } = {},
): Promise<CliResult> {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      cwd: options.cwd ?? REPO,
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, DAGBOT_LOG_LEVEL: "warn", ...options.env },
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      fail(
        new Error(
          `dagbot ${args.join(" ")} did not end within ${options.timeoutMs ?? 60_000} ms\n${stdout}\n${stderr}`,
        ),
      );
    }, options.timeoutMs ?? 60_000);
    child.on("exit", (code) => {
      clearTimeout(timer);
      done({ code, stdout, stderr });
    });
  });
}

/** Every event of the room, in sequence order. */
export async function allEvents(store: Store, roomId = ROOM): Promise<LogEvent[]> {
  const out: LogEvent[] = [];
  for (let since = 0; ;) {
    const page = await store.readEvents(roomId, since, 1000);
    out.push(...page);
    const last = page[page.length - 1];
    if (last === undefined || page.length < 1000) return out;
    since = last.seq;
  }
}

export async function waitForRunStatus(
  store: Store,
  dagId: string,
  accept: (status: string) => boolean,
  timeoutMs = 60_000,
): Promise<string> {
  const run = await waitFor(
    `run ${dagId}`,
    () => store.getRun(ROOM, dagId),
    (r) => r !== null && accept(r.status),
    { timeoutMs, intervalMs: 50 },
  );
  return run!.status;
}

export async function waitForTasks(
  store: Store,
  runId: string,
  what: string,
  accept: (tasks: TaskRecord[]) => boolean,
  timeoutMs = 30_000,
): Promise<TaskRecord[]> {
  return waitFor(what, () => store.listTasks(runId), accept, { timeoutMs, intervalMs: 25 });
}

/** A DAG document (JSON) written to the target's folder; returns its path. */
export function writeDag(target: Target, dag: Record<string, unknown>): string {
  const path = join(target.dir, `${String(dag["id"])}.json`);
  writeFileSync(path, JSON.stringify(dag, null, 1));
  return path;
}

/** Stops every node still running: SIGKILL, and waits for the exits. */
export async function killAll(nodes: readonly NodeProcess[]): Promise<void> {
  for (const n of nodes) if (n.child.exitCode === null && n.child.signalCode === null) n.kill("SIGKILL");
  await Promise.all(nodes.map((n) => n.exited));
}

/**
 * Replays the room's event log and checks the caps after every event: active (queued, running,
 * canceling) tasks in the room ≤ the cap in force, per run ≤ its max_parallel, per concurrency key ≤ 1.
 * Returns the largest counts seen, and the largest room count after each cap change.
 */
export function replayCaps(
  events: readonly LogEvent[],
  tasks: ReadonlyMap<string, { runId: string; concurrencyKey: string | null }>,
  maxParallel: ReadonlyMap<string, number | null>,
  initialCap: number,
): {
  violations: string[];
  maxRoom: number;
  maxPerKey: Map<string, number>;
  maxAfterCap: Map<number, number>;
} {
  const ACTIVE = new Set(["queued", "running", "canceling"]);
  const status = new Map<string, string>();
  let cap = initialCap;
  let maxRoom = 0;
  const maxPerKey = new Map<string, number>();
  const maxAfterCap = new Map<number, number>();
  const violations: string[] = [];
  for (const e of events) {
    if (e.kind === "cap.set") {
      cap = Number(e.data["cap"]);
      maxAfterCap.set(cap, 0);
      continue;
    }
    if (!e.kind.startsWith("task.") || e.runId === null || e.taskId === null) continue;
    status.set(`${e.runId}/${e.taskId}`, e.kind.slice("task.".length));
    let room = 0;
    const perRun = new Map<string, number>();
    const perKey = new Map<string, number>();
    for (const [key, s] of status) {
      if (!ACTIVE.has(s)) continue;
      const t = tasks.get(key);
      if (t === undefined) continue;
      room += 1;
      perRun.set(t.runId, (perRun.get(t.runId) ?? 0) + 1);
      if (t.concurrencyKey !== null) perKey.set(t.concurrencyKey, (perKey.get(t.concurrencyKey) ?? 0) + 1);
    }
    maxRoom = Math.max(maxRoom, room);
    if (maxAfterCap.has(cap)) maxAfterCap.set(cap, Math.max(maxAfterCap.get(cap) ?? 0, room));
    if (room > cap) violations.push(`seq ${e.seq} ${e.kind} ${e.taskId}: ${room} active > cap ${cap}`);
    for (const [runId, n] of perRun) {
      const limit = maxParallel.get(runId) ?? null;
      if (limit !== null && n > limit)
        violations.push(`seq ${e.seq}: run ${runId} has ${n} active > max_parallel ${limit}`);
    }
    for (const [k, n] of perKey) {
      maxPerKey.set(k, Math.max(maxPerKey.get(k) ?? 0, n));
      if (n > 1) violations.push(`seq ${e.seq}: key ${k} has ${n} active tasks`);
    }
  }
  return { violations, maxRoom, maxPerKey, maxAfterCap };
}

/** Leader-written events must never go back in term: a deposed leader's write would show as a lower term. */
export function termRegressions(events: readonly LogEvent[]): string[] {
  const out: string[] = [];
  let highest = 0;
  for (const e of events) {
    if (e.term === null) continue;
    if (e.term < highest) out.push(`seq ${e.seq} ${e.kind} has term ${e.term} after term ${highest}`);
    highest = Math.max(highest, e.term);
  }
  return out;
}

/** How many task.succeeded events each task of the run has. */
export function successCounts(events: readonly LogEvent[], runId: string): Map<string, number> {
  const counts = new Map<string, number>();
  for (const e of events) {
    if (e.kind === "task.succeeded" && e.runId === runId && e.taskId !== null) {
      counts.set(e.taskId, (counts.get(e.taskId) ?? 0) + 1);
    }
  }
  return counts;
}
