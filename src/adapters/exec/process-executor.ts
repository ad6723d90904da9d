/**
 * The action executor: runs a configured action's argv (never through a shell) in its own process
 * group under a supervisor process (action-supervisor.js) that ends the whole group when this node
 * dies or the claim's deadline passes; bounds it in time (SIGTERM, then SIGKILL after a grace period,
 * to the whole group) and keeps only the tail of its output.
 */
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { constants, statSync } from "node:fs";
import { chown, mkdtemp, open, rm } from "node:fs/promises";
import type { FileHandle } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import type { Readable } from "node:stream";
import { fileURLToPath } from "node:url";
import { renderArgv } from "../../domain/action-argv.js";
import { formatDuration } from "../../domain/duration.js";
import { OUTPUT_LIMITS, type OversizeOutputFile } from "../../domain/outputs.js";
import type {
  ExecOutcome,
  ExecRequest,
  ExecResult,
  Executor,
  OutputSoFar,
  PublishedFile,
} from "../../ports/executor.js";
import { TailBuffer } from "./tail-buffer.js";
import { treeUrl } from "../../package-files.js";

export interface ProcessExecutorOptions {
  /**
   * The environment every action starts from, before its own `env` and the DAGBOT_* variables. The
   * node's composition root passes `pickBaseEnv(process.env)`; the node's secrets are never inherited.
   */
  baseEnv?: Record<string, string>;
  /**
   * Where each attempt's DAGBOT_OUTPUT file is made, in a directory of its own (mode 0700, the
   * action's user's when it runs as another); default the node's temporary directory.
   */
  outputDir?: string;
  /**
   * How long the action supervisor stays once no action runs; it is started again for the next
   * action (~50 ms). Default 10 s: an idle node does not keep a second Node process (~40 MB).
   */
  supervisorIdleMs?: number;
}

const DEFAULT_SUPERVISOR_IDLE_MS = 10_000;

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
const SUPERVISOR = fileURLToPath(treeUrl("adapters/exec/action-supervisor.js"));
/**
 * The supervisor's Node flags. It does little but start processes, and a start (fork, then waiting
 * for the child's exec) is cheaper from a process whose V8 posts no background work and keeps a
 * small young generation: about 6 % less CPU and wall time for 1,000 `true` actions on 2 cores
 * (bench/README.md, "Eighth stop").
 */
const SUPERVISOR_FLAGS = ["--single-threaded", "--max-semi-space-size=1"];

export function createProcessExecutor(options: ProcessExecutorOptions = {}): Executor {
  const baseEnv = { PATH: DEFAULT_PATH, ...options.baseEnv };
  const supervisor = new SupervisorLink(options.supervisorIdleMs ?? DEFAULT_SUPERVISOR_IDLE_MS);
  const outputDir = options.outputDir ?? tmpdir();
  return {
    run: (request) => runAction(request, baseEnv, supervisor, outputDir),
    prepare: () => supervisor.prepare(),
  };
}

/**
 * A fresh file for one attempt's outputs: its own directory (mkdtemp, 0700), an empty file in it
 * (0600), both given to the action's user when it runs as another. `remove` deletes them both.
 */
async function outputFile(
  parent: string,
  runAs: { uid: number; gid: number } | null | undefined,
): Promise<{ path: string; remove: () => Promise<void> }> {
  const dir = await mkdtemp(join(parent, "dagbot-output-"));
  const remove = (): Promise<void> => rm(dir, { recursive: true, force: true }).catch(() => {});
  try {
    const path = join(dir, "outputs");
    await (await open(path, "wx", 0o600)).close();
    if (runAs !== undefined && runAs !== null) {
      await chown(dir, runAs.uid, runAs.gid);
      await chown(path, runAs.uid, runAs.gid);
    }
    return { path, remove };
  } catch (err) {
    await remove();
    throw err;
  }
}

/** Bytes of an oversize DAGBOT_OUTPUT file read to count its lines by name; past it the counts are lower bounds. */
export const OVERSIZE_COUNT_BYTES = 64 * 1024 * 1024;

/**
 * What the action left in its DAGBOT_OUTPUT file, read within OUTPUT_LIMITS.maxFileBytes. The action
 * owns the directory, so the path is opened without following a link and without waiting on a pipe,
 * and must be a regular file; a file it removed published nothing. A larger file is not parsed: its
 * `NAME=` lines are counted by name (at most OVERSIZE_COUNT_BYTES read), so a list output written
 * with too many items is refused naming its count (domain/outputs.ts oversizeProblem).
 */
export async function readPublished(path: string): Promise<PublishedFile> {
  const max = OUTPUT_LIMITS.maxFileBytes;
  let handle;
  try {
    handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === "ENOENT") return { text: "" };
    if (code === "ELOOP") return { problem: "$DAGBOT_OUTPUT was replaced by a symbolic link" };
    return { problem: `$DAGBOT_OUTPUT could not be read (${code ?? String(err)})` };
  }
  try {
    const info = await handle.stat();
    if (!info.isFile()) return { problem: "$DAGBOT_OUTPUT is no longer a regular file" };
    if (info.size > max) return { oversize: await countLines(handle, info.size) };
    const buffer = Buffer.alloc(max + 1);
    const { bytesRead } = await handle.read(buffer, 0, max + 1, 0);
    if (bytesRead > max) return { oversize: await countLines(handle, bytesRead) };
    try {
      return { text: new TextDecoder("utf-8", { fatal: true }).decode(buffer.subarray(0, bytesRead)) };
    } catch {
      return { problem: "$DAGBOT_OUTPUT is not UTF-8 text" };
    }
  } finally {
    await handle.close();
  }
}

const COUNTED_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;

/**
 * The `NAME=` lines of an oversize file counted by name, reading at most OVERSIZE_COUNT_BYTES in
 * 64 KiB chunks; only names are kept (at most 64 distinct), never values.
 */
async function countLines(handle: FileHandle, bytes: number): Promise<OversizeOutputFile> {
  const lines: Record<string, number> = {};
  let distinct = 0;
  const chunk = Buffer.alloc(64 * 1024);
  let position = 0;
  let head = ""; // the start of the current line, up to its first "=" (or 65 bytes)
  let inValue = false;
  const endHead = (): void => {
    if (COUNTED_NAME.test(head) && (Object.hasOwn(lines, head) || distinct < 64)) {
      if (!Object.hasOwn(lines, head)) {
        distinct++;
        Object.defineProperty(lines, head, {
          value: 0,
          enumerable: true,
          writable: true,
          configurable: true,
        });
      }
      lines[head]!++;
    }
  };
  while (position < OVERSIZE_COUNT_BYTES) {
    const { bytesRead } = await handle.read(chunk, 0, chunk.length, position);
    if (bytesRead === 0) return { bytes: Math.max(bytes, position), lines, complete: true };
    position += bytesRead;
    for (let i = 0; i < bytesRead; i++) {
      const c = chunk[i]!;
      if (c === 0x0a) {
        head = "";
        inValue = false;
      } else if (inValue) continue;
      else if (c === 0x3d) {
        endHead();
        inValue = true;
      } else if (head.length <= 64) head += String.fromCharCode(c);
    }
  }
  return { bytes: Math.max(bytes, position), lines, complete: false };
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
  /** Run as this user and group (action.runAs); absent runs as the node's own. */
  uid?: number;
  gid?: number;
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

async function runAction(
  request: ExecRequest,
  baseEnv: Record<string, string>,
  supervisor: SupervisorLink,
  outputDir: string,
): Promise<ExecResult> {
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

  let published: { path: string; remove: () => Promise<void> } | null = null;
  try {
    if (request.publishes !== false) published = await outputFile(outputDir, action.runAs);
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    return failedBeforeStart(
      "failed",
      `could not make the action's DAGBOT_OUTPUT file: ${message}`,
      startedAt,
    );
  }
  try {
    // Making the file took a moment: a deadline that passed meanwhile still counts (an abort that
    // came meanwhile stops the action as soon as it starts, see supervise).
    if (claim !== undefined && claim.msLeft() <= action.killGraceMs)
      return failedBeforeStart("expired", NOT_STARTED_EXPIRED, startedAt);
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
        ...(published === null ? {} : { DAGBOT_OUTPUT: published.path }),
      },
      ...(action.runAs === undefined || action.runAs === null
        ? {}
        : { uid: action.runAs.uid, gid: action.runAs.gid }),
    };
    const result = await supervise(supervisor, spec, request, startedAt);
    if (result.outcome !== "succeeded" || published === null) return result;
    return { ...result, published: await readPublished(published.path) };
  } finally {
    await published?.remove();
  }
}

const NOT_STARTED_EXPIRED = "not started: the claim's deadline had passed";

const DEFAULT_OUTPUT_EVERY_MS = 1_000;

/**
 * A running action's tail as whole UTF-8 characters: a character cut at the start (the tail began
 * inside it) is dropped, and one not yet completely written at the end is left for the next report,
 * so `totalBytes` is exactly where the text ends.
 */
export function outputSoFar(base64: string, total: number): OutputSoFar {
  const bytes = Buffer.from(base64, "base64");
  let start = 0;
  if (total > bytes.length)
    while (start < 3 && start < bytes.length && ((bytes[start] ?? 0) & 0xc0) === 0x80) start += 1;
  let end = bytes.length;
  for (let back = 1; back <= Math.min(4, bytes.length - start); back += 1) {
    const b = bytes[bytes.length - back] ?? 0;
    if ((b & 0xc0) === 0x80) continue; // a continuation byte: look further back for its lead
    const need = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1;
    if (need > back) end = bytes.length - back;
    break;
  }
  return { output: bytes.subarray(start, end).toString("utf8"), totalBytes: total - (bytes.length - end) };
}

/** What the supervisor reported about one action on its status pipe. */
interface SupervisorReport {
  id: number;
  started?: number;
  failed?: { code: string | null; message: string };
  refused?: string;
  deadline?: boolean;
  exit?: { code: number | null; signal: string | null };
  output?: { output: string; total: number };
  done?: { output: string; total: number };
  /** Not from the supervisor: it died, and this is why. */
  died?: string;
}

/**
 * The node's end of its supervisor process (action-supervisor.js): started on the first action,
 * kept while actions run and for `idleMs` after the last one ended (without keeping the node's
 * event loop alive), then let go: its stdin closes and, with nothing to stop, it exits. Started
 * again for the next action, or if it ever dies. One per executor, so one per node process.
 */
class SupervisorLink {
  constructor(private readonly idleMs: number) {}
  private child: ChildProcess | null = null;
  private idle: NodeJS.Timeout | null = null;
  private readonly listeners = new Map<number, (report: SupervisorReport) => void>();
  /** Each action's process group, so that a supervisor's death does not leave actions behind. */
  private readonly groups = new Map<number, number>();
  private nextId = 1;

  /** Starts an action; `onReport` hears everything about it until its `done`, `failed`, `refused` or `died`. */
  start(
    message: Record<string, unknown>,
    onReport: (report: SupervisorReport) => void,
  ): {
    send: (message: Record<string, unknown>) => void;
  } {
    if (this.idle !== null) clearTimeout(this.idle);
    this.idle = null;
    const child = this.ensure();
    const id = this.nextId++;
    this.listeners.set(id, (report) => {
      if (report.started !== undefined) this.groups.set(id, report.started);
      if (report.done !== undefined || report.failed !== undefined || report.refused !== undefined) {
        this.forget(id);
      }
      onReport(report);
    });
    this.setRef(true);
    const send = (m: Record<string, unknown>): void => {
      if (this.child === child && child.stdin?.writable === true)
        child.stdin.write(`${JSON.stringify({ id, ...m })}\n`);
    };
    send(message);
    return { send };
  }

  /**
   * Starts the supervisor ahead of the first action, off the critical path of its start (a Node
   * process's own start: 30–40 ms on a quiet machine, several times that on a loaded one). It is let
   * go after idleMs if no action comes, and keeps the node's event loop alive no more than an idle one.
   */
  prepare(): void {
    if (this.child !== null) return;
    this.ensure();
    this.setRef(false);
    if (this.listeners.size === 0) this.retireWhenIdle();
  }

  private forget(id: number): void {
    this.listeners.delete(id);
    this.groups.delete(id);
    if (this.listeners.size > 0) return;
    this.setRef(false);
    this.retireWhenIdle();
  }

  private retireWhenIdle(): void {
    if (this.idle !== null) clearTimeout(this.idle);
    this.idle = setTimeout(() => this.retire(), this.idleMs);
    this.idle.unref();
  }

  /** No action for idleMs: close the supervisor's stdin; with no action to stop, it exits. */
  private retire(): void {
    this.idle = null;
    const child = this.child;
    if (child === null || this.listeners.size > 0) return;
    this.child = null;
    child.stdin?.end();
  }

  /** Keeps the node's event loop alive only while actions run. */
  private setRef(active: boolean): void {
    const c = this.child;
    if (c === null) return;
    for (const handle of [c, c.stdin, c.stdio[3]] as Array<{ ref?: () => void; unref?: () => void } | null>) {
      if (active) handle?.ref?.();
      else handle?.unref?.();
    }
  }

  private ensure(): ChildProcess {
    if (this.child !== null) return this.child;
    const child = spawn(process.execPath, [...SUPERVISOR_FLAGS, SUPERVISOR], {
      shell: false,
      // Its own session: a terminal's Ctrl-C or a signal to the node's process group does not reach
      // it; the node's drain decides what happens to running actions.
      detached: true,
      // Nothing of the node's environment (NODE_OPTIONS included) reaches the supervisor.
      env: {},
      stdio: ["pipe", "ignore", "inherit", "pipe"],
    });
    this.child = child;
    let pending = "";
    const status = child.stdio[3] as Readable | null;
    status?.setEncoding("utf8");
    status?.on("data", (chunk: string) => {
      pending += chunk;
      for (let nl = pending.indexOf("\n"); nl >= 0; nl = pending.indexOf("\n")) {
        const line = pending.slice(0, nl);
        pending = pending.slice(nl + 1);
        if (line.trim() === "") continue;
        const report = JSON.parse(line) as SupervisorReport;
        this.listeners.get(report.id)?.(report);
      }
    });
    // A supervisor that died leaves its pipe closed: writes fail with EPIPE, which is no news.
    child.stdin?.on("error", () => {});
    const died = (why: string): void => {
      if (this.child !== child) return;
      this.child = null;
      // Nobody watches these groups any more: end them here, and tell each waiting action.
      for (const pgid of this.groups.values()) signalGroup(pgid, "SIGKILL");
      const waiting = [...this.listeners.entries()];
      this.listeners.clear();
      this.groups.clear();
      for (const [id, listener] of waiting) listener({ id, died: why });
    };
    child.on("error", (err) => died(`the action supervisor could not run: ${err.message}`));
    child.on("exit", (code, signal) =>
      died(`the action's supervisor died (${signal ?? `status ${code ?? "?"}`})`),
    );
    return child;
  }
}

function supervise(
  supervisor: SupervisorLink,
  spec: SpawnSpec,
  request: ExecRequest,
  startedAt: number,
): Promise<ExecResult> {
  const { action, signal, claim } = request;
  return new Promise<ExecResult>((resolve) => {
    const tail = new TailBuffer(action.outputLimitBytes);
    const timeoutMs = Math.min(Math.max(0, request.timeoutMs ?? action.timeoutMs), MAX_TIMER_MS);
    let reason: "timeout" | "abort" | null = null;
    let exit: { code: number | null; signal: string | null } | null = null;
    let spawnError: string | null = null;
    let expired: string | null = null;
    let supervisorDied: string | null = null;
    let settled = false;

    const stopBy = (): number | null => (claim === undefined ? null : sharedMonotonicMs() + claim.msLeft());
    const stop = (why: "timeout" | "abort"): void => {
      if (exit !== null) return; // it already finished on its own
      reason ??= why;
      link.send({ stop: true });
    };
    const onAbort = (): void => stop("abort");

    const finish = (): void => {
      if (settled) return;
      settled = true;
      clearTimeout(deadline);
      signal?.removeEventListener("abort", onAbort);
      unsubscribeClaim?.();
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
      if (r.failed !== undefined) {
        spawnError =
          r.failed.code === "EPERM" && spec.uid !== undefined
            ? `cannot run "${spec.file}" as uid ${spec.uid} gid ${spec.gid ?? "?"}: this node lacks the right (run it as root or give it CAP_SETUID and CAP_SETGID)`
            : spawnErrorMessage(spec.file, r.failed);
        return finish();
      }
      if (r.refused !== undefined) {
        expired = NOT_STARTED_EXPIRED;
        return finish();
      }
      if (r.output !== undefined) {
        if (!settled) request.onOutput?.(outputSoFar(r.output.output, r.output.total));
        return;
      }
      if (r.deadline === true) expired = "stopped: the claim's deadline passed before it ended";
      if (r.exit !== undefined) {
        exit = r.exit;
        clearTimeout(deadline);
      }
      if (r.died !== undefined) {
        supervisorDied = r.died;
        return finish();
      }
      if (r.done !== undefined) {
        tail.push(Buffer.from(r.done.output, "base64"));
        tail.totalBytes = r.done.total;
        finish();
      }
    };

    const link = supervisor.start(
      {
        start: spec,
        killGraceMs: action.killGraceMs,
        stopBy: stopBy(),
        outputLimit: action.outputLimitBytes,
        ...(request.onOutput === undefined
          ? {}
          : { outputEveryMs: Math.max(1, request.outputEveryMs ?? DEFAULT_OUTPUT_EVERY_MS) }),
      },
      onReport,
    );
    const deadline = setTimeout(() => stop("timeout"), timeoutMs);
    signal?.addEventListener("abort", onAbort, { once: true });
    if (signal?.aborted === true) onAbort();
    const unsubscribeClaim = claim?.onMove(() => link.send({ stopBy: stopBy() }));
  });
}
