/**
 * The action executor: runs a configured action's argv (never through a shell) in its own process
 * group under a supervisor process (action-supervisor.js) that ends the whole group when this node
 * dies or the claim's deadline passes; bounds it in time (SIGTERM, then SIGKILL after a grace period,
 * to the whole group) and keeps only the tail of its output.
 */
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { statSync } from "node:fs";
import { performance } from "node:perf_hooks";
import type { Readable } from "node:stream";
import { fileURLToPath } from "node:url";
import { renderArgv } from "../../domain/action-argv.js";
import { formatDuration } from "../../domain/duration.js";
import type { ExecOutcome, ExecRequest, ExecResult, Executor } from "../../ports/executor.js";
import { TailBuffer } from "./tail-buffer.js";

export interface ProcessExecutorOptions {
  /**
   * The environment every action starts from, before its own `env` and the DAGBOT_* variables. The
   * node's composition root passes `pickBaseEnv(process.env)`; the node's secrets are never inherited.
   */
  baseEnv?: Record<string, string>;
}

/** Variables an ordinary program expects; everything else in the node's environment stays private. */
export const BASE_ENV_KEYS = ["PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TZ", "TMPDIR"] as const;

const DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// setTimeout fires at once for delays above 2^31-1 ms; a longer timeout would otherwise kill at start.
const MAX_TIMER_MS = 2_147_483_647;

/** Picks the minimal safe base environment for actions out of a full environment. */
export function pickBaseEnv(env: Readonly<Record<string, string | undefined>>): Record<string, string> {
  const base: Record<string, string> = {};
  for (const key of BASE_ENV_KEYS) {
    const value = env[key];
    if (value !== undefined && value !== "") base[key] = value;
  }
  return base;
}

/** The supervisor script: plain JavaScript, so this path is right from src/ (tests) and from dist/. */
const SUPERVISOR = fileURLToPath(new URL("./action-supervisor.js", import.meta.url));

// After the supervisor exits (the group is gone), how long output pipes may stay open: only a process
// that left the group (setsid) holds them then, and it is not waited for.
const DRAIN_MS = 1_000;

export function createProcessExecutor(options: ProcessExecutorOptions = {}): Executor {
  const baseEnv = { PATH: DEFAULT_PATH, ...options.baseEnv };
  return { run: (request) => runAction(request, baseEnv) };
}

/**
 * What the supervisor starts: the program, its arguments (each one argv entry), its working
 * directory and its whole environment. Options of the process itself (a uid and gid to run as)
 * belong here; the supervisor passes them to spawn().
 */
export interface SpawnSpec {
  file: string;
  args: string[];
  cwd: string | null;
  env: Record<string, string>;
}

/** Milliseconds on CLOCK_MONOTONIC, the clock every process of the machine shares (hrtime). */
function sharedMonotonicMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

function failedBeforeStart(outcome: ExecOutcome, error: string, startedAt: number): ExecResult {
  return {
    outcome,
    exitCode: null,
    signal: null,
    output: "",
    outputTruncated: false,
    totalOutputBytes: 0,
    durationMs: Math.round(performance.now() - startedAt),
    error,
  };
}

function abortReason(signal: AbortSignal): string {
  const reason: unknown = signal.reason;
  if (typeof reason === "string") return reason;
  if (reason instanceof Error && reason.name !== "AbortError") return reason.message;
  return "aborted";
}

/** Sends a signal to every process of the group led by `pid`; false when the group is already gone. */
function signalGroup(pid: number, signal: NodeJS.Signals | 0): boolean {
  try {
    process.kill(-pid, signal);
    return true;
  } catch {
    // ESRCH: nobody left in the group. EPERM cannot happen for our own children; treat it as gone too.
    return false;
  }
}

function spawnErrorMessage(executable: string, err: { code?: string | null; message: string }): string {
  if (err.code === "ENOENT") return `executable "${executable}" not found`;
  if (err.code === "EACCES") return `executable "${executable}" is not executable (permission denied)`;
  return `could not start "${executable}": ${err.message}`;
}

function checkCwd(cwd: string | null): string | null {
  if (cwd === null) return null;
  try {
    return statSync(cwd).isDirectory() ? null : `working directory "${cwd}" is not a directory`;
  } catch {
    return `working directory "${cwd}" does not exist`;
  }
}

async function runAction(request: ExecRequest, baseEnv: Record<string, string>): Promise<ExecResult> {
  const startedAt = performance.now();
  const { action, signal, claim } = request;

  const rendered = renderArgv(action, request.args);
  if (!rendered.ok) return failedBeforeStart("failed", rendered.message, startedAt);
  if (signal?.aborted)
    return failedBeforeStart("killed", `killed before start: ${abortReason(signal)}`, startedAt);
  if (claim !== undefined && claim.msLeft() <= action.killGraceMs)
    return failedBeforeStart("expired", NOT_STARTED_EXPIRED, startedAt);
  const cwdProblem = checkCwd(action.cwd);
  if (cwdProblem !== null) return failedBeforeStart("failed", cwdProblem, startedAt);

  const [file = "", ...args] = rendered.argv;
  const spec: SpawnSpec = {
    file,
    args,
    cwd: action.cwd,
    env: {
      ...baseEnv,
      ...action.env,
      DAGBOT_RUN_ID: request.env.DAGBOT_RUN_ID,
      DAGBOT_TASK_ID: request.env.DAGBOT_TASK_ID,
      DAGBOT_ATTEMPT: String(request.env.DAGBOT_ATTEMPT),
    },
  };
  return supervise(spec, request, startedAt);
}

const NOT_STARTED_EXPIRED = "not started: the claim's deadline had passed";

/** What the supervisor reported on its status pipe. */
interface SupervisorReport {
  started?: number;
  failed?: { code: string | null; message: string };
  refused?: string;
  deadline?: boolean;
  exit?: { code: number | null; signal: string | null };
}

function supervise(spec: SpawnSpec, request: ExecRequest, startedAt: number): Promise<ExecResult> {
  const { action, signal, claim } = request;
  let sup: ChildProcess;
  try {
    sup = spawn(process.execPath, [SUPERVISOR], {
      shell: false,
      // Its own session: a terminal's Ctrl-C or a signal to the node's process group does not reach it;
      // the node's drain decides what happens to running actions.
      detached: true,
      // Nothing of the node's environment (NODE_OPTIONS included) reaches the supervisor.
      env: {},
      stdio: ["pipe", "pipe", "pipe", "pipe"],
    });
  } catch (err) {
    return Promise.resolve(
      failedBeforeStart("failed", `could not start the action's supervisor: ${String(err)}`, startedAt),
    );
  }

  return new Promise<ExecResult>((resolve) => {
    const tail = new TailBuffer(action.outputLimitBytes);
    const timeoutMs = Math.min(Math.max(0, request.timeoutMs ?? action.timeoutMs), MAX_TIMER_MS);
    let reason: "timeout" | "abort" | null = null;
    let pid: number | null = null;
    let exit: { code: number | null; signal: string | null } | null = null;
    let spawnError: string | null = null;
    let expired: string | null = null;
    let supervisorDied: string | null = null;
    let drainTimer: NodeJS.Timeout | undefined;
    let settled = false;

    const send = (message: Record<string, unknown>): void => {
      if (sup.stdin?.writable === true) sup.stdin.write(`${JSON.stringify(message)}\n`);
    };
    const stopBy = (): number | null => (claim === undefined ? null : sharedMonotonicMs() + claim.msLeft());

    const stop = (why: "timeout" | "abort"): void => {
      if (exit !== null) return; // it already finished on its own
      reason ??= why;
      send({ stop: true });
    };
    const onAbort = (): void => stop("abort");
    const deadline = setTimeout(() => stop("timeout"), timeoutMs);
    signal?.addEventListener("abort", onAbort, { once: true });
    const unsubscribeClaim = claim?.onMove(() => send({ stopBy: stopBy() }));

    const finish = (): void => {
      if (settled) return;
      settled = true;
      clearTimeout(deadline);
      clearTimeout(drainTimer);
      signal?.removeEventListener("abort", onAbort);
      unsubscribeClaim?.();
      sup.stdin?.destroy();
      resolve(buildResult());
    };

    const buildResult = (): ExecResult => {
      const base = {
        exitCode: exit?.code ?? null,
        signal: exit?.signal ?? null,
        output: tail.text(),
        outputTruncated: tail.truncated,
        totalOutputBytes: tail.totalBytes,
        durationMs: Math.round(performance.now() - startedAt),
      };
      if (spawnError !== null) return { ...base, outcome: "failed", error: spawnError };
      if (expired !== null) return { ...base, outcome: "expired", error: expired };
      if (reason === "timeout") {
        return { ...base, outcome: "timed_out", error: `timed out after ${formatDuration(timeoutMs)}` };
      }
      if (reason === "abort" && signal !== undefined) {
        return { ...base, outcome: "killed", error: `killed: ${abortReason(signal)}` };
      }
      if (supervisorDied !== null) return { ...base, outcome: "failed", error: supervisorDied };
      if (base.exitCode === 0) return { ...base, outcome: "succeeded" };
      const error =
        base.exitCode !== null
          ? `exited with status ${base.exitCode}`
          : `killed by signal ${base.signal ?? "?"}`;
      return { ...base, outcome: "failed", error };
    };

    const onReport = (r: SupervisorReport): void => {
      if (r.started !== undefined) pid = r.started;
      if (r.failed !== undefined) spawnError = spawnErrorMessage(spec.file, r.failed);
      if (r.refused !== undefined) expired = NOT_STARTED_EXPIRED;
      if (r.deadline === true) expired = "stopped: the claim's deadline passed before it ended";
      if (r.exit !== undefined) {
        exit = r.exit;
        clearTimeout(deadline);
      }
    };

    let pending = "";
    const status = sup.stdio[3] as Readable | null;
    status?.setEncoding("utf8");
    status?.on("data", (chunk: string) => {
      pending += chunk;
      for (let nl = pending.indexOf("\n"); nl >= 0; nl = pending.indexOf("\n")) {
        const line = pending.slice(0, nl);
        pending = pending.slice(nl + 1);
        if (line.trim() !== "") onReport(JSON.parse(line) as SupervisorReport);
      }
    });
    sup.stdout?.on("data", (chunk: Buffer) => tail.push(chunk));
    sup.stderr?.on("data", (chunk: Buffer) => tail.push(chunk));
    // A supervisor that died leaves its pipe closed: writes fail with EPIPE, which is no news.
    sup.stdin?.on("error", () => {});

    sup.on("error", (err: NodeJS.ErrnoException) => {
      if (sup.pid !== undefined) return;
      spawnError = `could not start the action's supervisor: ${err.message}`;
      finish();
    });

    sup.on("exit", (code, supSignal) => {
      clearTimeout(deadline);
      if (exit === null && spawnError === null && expired === null) {
        // Killed from outside (or a bug): nobody watches the group any more, so end it here.
        supervisorDied = `the action's supervisor died (${supSignal ?? `status ${code ?? "?"}`})`;
        if (pid !== null) signalGroup(pid, "SIGKILL");
      }
      // A process that escaped the group (setsid) could hold our pipes open forever.
      drainTimer = setTimeout(() => {
        sup.stdout?.destroy();
        sup.stderr?.destroy();
        status?.destroy();
        finish();
      }, DRAIN_MS);
    });

    sup.on("close", finish);
    send({ start: spec, killGraceMs: action.killGraceMs, stopBy: stopBy() });
  });
}
