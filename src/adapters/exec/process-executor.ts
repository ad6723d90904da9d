/**
 * The action executor: spawns a configured action's argv (never through a shell) in its own process
 * group, bounds it in time (SIGTERM, then SIGKILL after a grace period, to the whole group) and keeps
 * only the tail of its output.
 */
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { statSync } from "node:fs";
import { performance } from "node:perf_hooks";
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

export function createProcessExecutor(options: ProcessExecutorOptions = {}): Executor {
  const baseEnv = { PATH: DEFAULT_PATH, ...options.baseEnv };
  return { run: (request) => runAction(request, baseEnv) };
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

function spawnErrorMessage(executable: string, err: NodeJS.ErrnoException): string {
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
  const { action, signal } = request;

  const rendered = renderArgv(action, request.args);
  if (!rendered.ok) return failedBeforeStart("failed", rendered.message, startedAt);
  if (signal?.aborted)
    return failedBeforeStart("killed", `killed before start: ${abortReason(signal)}`, startedAt);
  const cwdProblem = checkCwd(action.cwd);
  if (cwdProblem !== null) return failedBeforeStart("failed", cwdProblem, startedAt);

  const [executable = "", ...rest] = rendered.argv;
  const env: Record<string, string> = {
    ...baseEnv,
    ...action.env,
    DAGBOT_RUN_ID: request.env.DAGBOT_RUN_ID,
    DAGBOT_TASK_ID: request.env.DAGBOT_TASK_ID,
    DAGBOT_ATTEMPT: String(request.env.DAGBOT_ATTEMPT),
  };

  let child: ChildProcess;
  try {
    child = spawn(executable, rest, {
      shell: false,
      // Its own process group, so a timeout or a cancel reaches every process the action started.
      detached: true,
      cwd: action.cwd ?? undefined,
      env,
      stdio: ["ignore", "pipe", "pipe"],
    });
  } catch (err) {
    // Synchronous throws are bad spawn arguments (e.g. a NUL byte in an environment value).
    return failedBeforeStart(
      "failed",
      spawnErrorMessage(executable, err as NodeJS.ErrnoException),
      startedAt,
    );
  }

  return new Promise<ExecResult>((resolve) => {
    const tail = new TailBuffer(action.outputLimitBytes);
    const timeoutMs = Math.min(Math.max(0, request.timeoutMs ?? action.timeoutMs), MAX_TIMER_MS);
    let reason: "timeout" | "abort" | null = null;
    let exit: { code: number | null; signal: string | null } | null = null;
    let spawnError: string | null = null;
    let killTimer: NodeJS.Timeout | undefined;
    let drainTimer: NodeJS.Timeout | undefined;
    let settled = false;

    const terminate = (): void => {
      if (killTimer !== undefined || child.pid === undefined) return;
      const pid = child.pid;
      signalGroup(pid, "SIGTERM");
      killTimer = setTimeout(() => signalGroup(pid, "SIGKILL"), action.killGraceMs);
    };

    const onAbort = (): void => {
      if (exit !== null) return; // it already finished on its own
      reason ??= "abort";
      terminate();
    };

    const deadline = setTimeout(() => {
      reason ??= "timeout";
      terminate();
    }, timeoutMs);
    signal?.addEventListener("abort", onAbort, { once: true });

    const finish = (): void => {
      if (settled) return;
      settled = true;
      clearTimeout(deadline);
      clearTimeout(drainTimer);
      signal?.removeEventListener("abort", onAbort);
      // Keep the SIGKILL pending only while someone in the group is still alive.
      if (killTimer !== undefined && (child.pid === undefined || !signalGroup(child.pid, 0))) {
        clearTimeout(killTimer);
      }
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
      if (reason === "timeout") {
        return { ...base, outcome: "timed_out", error: `timed out after ${formatDuration(timeoutMs)}` };
      }
      if (reason === "abort" && signal !== undefined) {
        return { ...base, outcome: "killed", error: `killed: ${abortReason(signal)}` };
      }
      if (base.exitCode === 0) return { ...base, outcome: "succeeded" };
      const error =
        base.exitCode !== null
          ? `exited with status ${base.exitCode}`
          : `killed by signal ${base.signal ?? "?"}`;
      return { ...base, outcome: "failed", error };
    };

    child.stdout?.on("data", (chunk: Buffer) => tail.push(chunk));
    child.stderr?.on("data", (chunk: Buffer) => tail.push(chunk));

    child.on("error", (err: NodeJS.ErrnoException) => {
      // After a successful spawn, errors come only from kill(); the exit and close events still follow.
      if (child.pid !== undefined) return;
      spawnError = spawnErrorMessage(executable, err);
      finish();
    });

    child.on("exit", (code, exitSignal) => {
      exit = { code, signal: exitSignal };
      clearTimeout(deadline);
      // The run ends with its main process; anything it left behind in its group would outlive the
      // task's lease, so it is stopped the same way a timeout stops it.
      if (child.pid !== undefined && signalGroup(child.pid, 0)) terminate();
      // A process that escaped the group (setsid) could hold our pipes open forever.
      drainTimer = setTimeout(
        () => {
          child.stdout?.destroy();
          child.stderr?.destroy();
          finish();
        },
        action.killGraceMs * 2 + 1_000,
      );
    });

    child.on("close", finish);
  });
}
