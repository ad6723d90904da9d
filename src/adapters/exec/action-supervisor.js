// @ts-check
/**
 * The supervisor of one action: a small Node process between a node and one action, so that the
 * action never outlives the node nor the node's claim on the task (issue 9). process-executor.ts
 * starts it (plain JavaScript so that the same file runs from src/ under the tests and from dist/),
 * holding the write end of its stdin; the supervisor starts the action in a process group of its
 * own and ends that whole group (SIGTERM, then SIGKILL after kill_grace):
 *
 * - when its stdin reaches end of file: the node is gone (kill -9, OOM, crash; the kernel closed the
 *   pipe), or asked it to stop;
 * - when the claim's deadline (`stopBy`, on the machine's monotonic clock, which every process
 *   shares) comes near: SIGTERM at stopBy - kill_grace, SIGKILL at stopBy. A renewal of the claim
 *   moves the deadline. This holds while the node is stopped (SIGSTOP): a stopped node is not killed
 *   for being stopped, but its claim runs out, and the action must be gone before the store could
 *   hand the task to another node;
 * - on {"stop": true}: a timeout, a cancel, a lost claim decided by the node.
 *
 * It never starts the action once stopBy - kill_grace has passed. It exits when no process of the
 * group is left. Arguments go to spawn() as an array, never through a shell.
 *
 * Protocol. stdin, JSON lines from the node: first {"start": {file, args, cwd, env, uid?, gid?},
 * "killGraceMs", "stopBy": ms | null}, then any of {"stopBy": ms} and {"stop": true}. fd 3, JSON lines
 * to the node: {"started": pid} | {"failed": {code, message}} | {"refused": "deadline"}, then
 * {"deadline": true} when the deadline stopped it, and {"exit": {code, signal}} when the action's main
 * process ended. Nothing is ever written to fds 1 and 2: they are the action's output pipes.
 */
import { spawn } from "node:child_process";
import { readFileSync, readdirSync, writeSync } from "node:fs";
import process from "node:process";

const STATUS_FD = 3;
// How often to look whether anyone is left in the group once the main process has ended.
const GONE_POLL_MS = 20;
// A group whose members are only zombies (no init reaping them, e.g. a container without one) never
// disappears; a zombie runs nothing, so give up waiting this long after SIGKILL.
const AFTER_KILL_MS = 2_000;
const MAX_TIMER_MS = 2_147_483_647;

/** Milliseconds on CLOCK_MONOTONIC: the same clock as process.hrtime in the node that sent stopBy. */
const nowMs = () => Number(process.hrtime.bigint()) / 1e6;

/** @param {Record<string, unknown>} message */
function report(message) {
  try {
    writeSync(STATUS_FD, `${JSON.stringify(message)}\n`);
  } catch {
    // EPIPE: the node is gone and nobody reads; the group is stopped all the same.
  }
}

/** @param {number} pgid @param {NodeJS.Signals | 0} signal */
function signalGroup(pgid, signal) {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch {
    return false;
  }
}

/**
 * True while a process of the group is alive. kill(-pgid, 0) also counts zombies, and an orphan's
 * zombie waits for init to reap it (1.4 s on some VMs); on Linux /proc tells the living apart.
 * @param {number} pgid
 */
function groupAlive(pgid) {
  if (!signalGroup(pgid, 0)) return false;
  if (process.platform !== "linux") return true;
  try {
    for (const name of readdirSync("/proc")) {
      if (name.charCodeAt(0) > 57) continue; // not a pid: pids are digits, named entries start with letters
      let stat;
      try {
        stat = readFileSync(`/proc/${name}/stat`, "utf8");
      } catch {
        continue; // it ended while we looked
      }
      // After the command name (which may hold spaces and parentheses): state, ppid, pgrp, ...
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(fields[2]) === pgid && fields[0] !== "Z") return true;
    }
    return false;
  } catch {
    return true;
  }
}

let started = false;
/** The action's process group (its pid), 0 before it started. */
let pgid = 0;
let stopBy = Infinity;
let killGraceMs = 0;
/** @type {number | null} */
let termSentAt = null;
/** @type {number | null} */
let killSentAt = null;
/** @type {NodeJS.Timeout | undefined} */
let timer;

function exitNow() {
  clearTimeout(timer);
  process.exit(0);
}

/** Arms the one timer: SIGTERM for the deadline, or SIGKILL once a SIGTERM's grace is over. */
function schedule() {
  clearTimeout(timer);
  if (pgid === 0 || killSentAt !== null) return;
  const due = termSentAt === null ? stopBy - killGraceMs : Math.min(termSentAt + killGraceMs, stopBy);
  if (!Number.isFinite(due)) return;
  timer = setTimeout(onTimer, Math.min(MAX_TIMER_MS, Math.max(0, due - nowMs())));
}

function onTimer() {
  // Timers run on the event loop's cached time and may fire a hair early: decide on the clock.
  const now = nowMs();
  if (termSentAt === null && now >= stopBy - killGraceMs) {
    report({ deadline: true });
    stop();
  } else if (termSentAt !== null && now >= Math.min(termSentAt + killGraceMs, stopBy)) {
    killSentAt = now;
    signalGroup(pgid, "SIGKILL");
  } else {
    schedule();
  }
}

/** SIGTERM to the whole group now, SIGKILL after kill_grace (never after stopBy). */
function stop() {
  if (!started) exitNow();
  if (pgid === 0 || termSentAt !== null) return;
  termSentAt = nowMs();
  signalGroup(pgid, "SIGTERM");
  schedule();
}

/** Exits once nobody is left in the group. */
function exitWhenGroupGone() {
  if (!groupAlive(pgid) || (killSentAt !== null && nowMs() - killSentAt > AFTER_KILL_MS)) return exitNow();
  setTimeout(exitWhenGroupGone, GONE_POLL_MS);
}

/**
 * @param {{ file: string, args: string[], cwd: string | null, env: Record<string, string>,
 *   uid?: number, gid?: number }} spec
 */
function start(spec) {
  started = true;
  if (nowMs() >= stopBy - killGraceMs) {
    report({ refused: "deadline" });
    exitNow();
  }
  /** @type {import("node:child_process").ChildProcess} */
  let child;
  try {
    child = spawn(spec.file, spec.args, {
      shell: false,
      // A session and process group of its own: a signal to the group reaches everything it started.
      detached: true,
      cwd: spec.cwd ?? undefined,
      env: spec.env,
      stdio: ["ignore", "inherit", "inherit"],
      ...(spec.uid === undefined ? {} : { uid: spec.uid }),
      ...(spec.gid === undefined ? {} : { gid: spec.gid }),
    });
  } catch (err) {
    const e = /** @type {NodeJS.ErrnoException} */ (err);
    report({ failed: { code: e.code ?? null, message: e.message } });
    return exitNow();
  }
  child.on("error", (err) => {
    // After a successful spawn, errors come only from kill(); the exit event still follows.
    if (child.pid !== undefined) return;
    const e = /** @type {NodeJS.ErrnoException} */ (err);
    report({ failed: { code: e.code ?? null, message: e.message } });
    exitNow();
  });
  child.on("exit", (code, signal) => {
    report({ exit: { code, signal } });
    // The action ends with its main process: whatever it left behind in its group is stopped too.
    if (groupAlive(pgid)) stop();
    exitWhenGroupGone();
  });
  if (child.pid !== undefined) {
    pgid = child.pid;
    report({ started: pgid });
    schedule();
  }
}

/** @param {Record<string, any>} message */
function onMessage(message) {
  if (typeof message.killGraceMs === "number") killGraceMs = Math.max(0, message.killGraceMs);
  if (typeof message.stopBy === "number") stopBy = message.stopBy;
  if (message.start !== undefined && !started) return start(message.start);
  if (message.stop === true) return stop();
  schedule();
}

// The node going away in any way ends the action: end of file, a broken pipe, or a signal meant for
// the supervisor itself.
let pending = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (/** @type {string} */ chunk) => {
  pending += chunk;
  for (let nl = pending.indexOf("\n"); nl >= 0; nl = pending.indexOf("\n")) {
    const line = pending.slice(0, nl);
    pending = pending.slice(nl + 1);
    if (line.trim() !== "") onMessage(JSON.parse(line));
  }
});
process.stdin.on("end", stop);
process.stdin.on("error", stop);
for (const signal of /** @type {const} */ (["SIGTERM", "SIGINT", "SIGHUP"])) process.on(signal, stop);
