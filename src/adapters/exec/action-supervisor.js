// @ts-check
/**
 * The action supervisor: one small Node process per node process, the parent of every action that
 * node runs, so that no action outlives the node nor the node's claim on its task.
 * process-executor.ts starts it (plain JavaScript so that the same file runs from src/ under the
 * tests and from dist/) and holds the write end of its stdin. The supervisor starts each action in a
 * process group of its own and ends that whole group (SIGTERM, then SIGKILL after kill_grace):
 *
 * - when its stdin reaches end of file: the node is gone (kill -9, OOM, crash: the kernel closed
 *   the pipe). Every running action is stopped, then the supervisor exits;
 * - when an action's claim deadline (`stopBy`, on CLOCK_MONOTONIC, which every process of the
 *   machine shares) comes near: SIGTERM at stopBy - kill_grace, SIGKILL at stopBy. Each renewal
 *   moves it. This holds while the node is stopped (SIGSTOP): a stopped node is not a reason to
 *   stop its actions, but its claims run out, and an action must be gone before the store could
 *   hand its task to another node;
 * - on {"id", "stop": true}: a timeout, a cancel, a lost claim decided by the node.
 *
 * An action is never started once its stopBy - kill_grace has passed. Arguments go to spawn() as an
 * array, never through a shell. The supervisor keeps only the tail of each action's output.
 *
 * Protocol. stdin, JSON lines from the node: {"id", "start": {file, args, cwd, env, uid?, gid?},
 * "killGraceMs", "stopBy": ms | null, "outputLimit": bytes, "outputEveryMs"?: ms}, {"id", "stopBy": ms},
 * {"id", "stop": true}. fd 3, JSON lines to the node: {"id", "started": pid} | {"id", "failed": {code,
 * message}} | {"id", "refused": "deadline"}, then, with outputEveryMs, {"id", "output": {output (base64
 * tail), total}} at most once per outputEveryMs while it runs and only when it wrote something since
 * the last one, {"id", "deadline": true} when the deadline stopped it,
 * {"id", "exit": {code, signal}} when its main process ended, and last {"id", "done": {output
 * (base64 tail), total}} once no process of its group is left and its output is read.
 */
import { spawn } from "node:child_process";
import { readFileSync, readdirSync, writeSync } from "node:fs";
import process from "node:process";

const STATUS_FD = 3;
// How often to look whether anyone is left in a group once its main process has ended.
const GONE_POLL_MS = 20;
// A group whose members are only zombies that nobody reaps (a container without an init) never
// disappears; a zombie runs nothing, so stop waiting this long after SIGKILL.
const AFTER_KILL_MS = 2_000;
// After the group is gone, how long its output pipes may stay open: only a process that left the
// group (setsid) can hold them then, and it is not waited for.
const DRAIN_MS = 1_000;
const MAX_TIMER_MS = 2_147_483_647;

/** Milliseconds on CLOCK_MONOTONIC: the same clock as process.hrtime in the node that sent stopBy. */
const nowMs = () => Number(process.hrtime.bigint()) / 1e6;

/** @param {Record<string, unknown>} message */
function report(message) {
  try {
    writeSync(STATUS_FD, `${JSON.stringify(message)}\n`);
  } catch {
    // EPIPE: the node is gone and nobody reads; its actions are being stopped all the same.
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
      if (name.charCodeAt(0) > 57) continue; // pids are digits; named entries start with letters
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

/** The last `limit` bytes written, and how many were written in all. */
class Tail {
  /** @param {number} limit */
  constructor(limit) {
    this.limit = limit;
    this.total = 0;
    this.size = 0;
    /** @type {Buffer[]} */
    this.chunks = [];
  }

  /** @param {Buffer} chunk */
  push(chunk) {
    this.total += chunk.length;
    if (this.limit === 0) return;
    this.chunks.push(chunk);
    this.size += chunk.length;
    while (this.chunks.length > 1 && this.size - (this.chunks[0]?.length ?? 0) >= this.limit) {
      this.size -= this.chunks.shift()?.length ?? 0;
    }
  }

  text() {
    const all = Buffer.concat(this.chunks);
    return all.subarray(Math.max(0, all.length - this.limit)).toString("base64");
  }
}

/**
 * @typedef {{ file: string, args: string[], cwd: string | null, env: Record<string, string>,
 *   uid?: number, gid?: number }} SpawnSpec
 */

/** One running action. */
class Action {
  /**
   * @param {number} id
   * @param {number} killGraceMs
   * @param {number} stopBy
   * @param {number} outputLimit
   */
  constructor(id, killGraceMs, stopBy, outputLimit, outputEveryMs = 0) {
    this.id = id;
    this.outputEveryMs = outputEveryMs;
    /** @type {NodeJS.Timeout | undefined} */
    this.outputTimer = undefined;
    this.outputSent = 0;
    this.killGraceMs = Math.max(0, killGraceMs);
    this.stopBy = stopBy;
    this.tail = new Tail(outputLimit);
    /** The action's process group (its pid); 0 until it started. */
    this.pgid = 0;
    /** @type {number | null} */
    this.termSentAt = null;
    /** @type {number | null} */
    this.killSentAt = null;
    /** @type {NodeJS.Timeout | undefined} */
    this.timer = undefined;
    this.mainExited = false;
    this.groupGone = false;
    this.openStreams = 2;
    this.finished = false;
  }

  /** @param {SpawnSpec} spec */
  start(spec) {
    if (nowMs() >= this.stopBy - this.killGraceMs) return this.end({ refused: "deadline" });
    /** @type {import("node:child_process").ChildProcess} */
    let child;
    try {
      child = spawn(spec.file, spec.args, {
        shell: false,
        // A session and process group of its own: a signal to the group reaches all it started.
        detached: true,
        cwd: spec.cwd ?? undefined,
        env: spec.env,
        stdio: ["ignore", "pipe", "pipe"],
        ...(spec.uid === undefined ? {} : { uid: spec.uid }),
        ...(spec.gid === undefined ? {} : { gid: spec.gid }),
      });
    } catch (err) {
      const e = /** @type {NodeJS.ErrnoException} */ (err);
      return this.end({ failed: { code: e.code ?? null, message: e.message } });
    }
    child.on("error", (err) => {
      // After a successful spawn, errors come only from kill(); the exit event still follows.
      if (child.pid !== undefined) return;
      const e = /** @type {NodeJS.ErrnoException} */ (err);
      this.end({ failed: { code: e.code ?? null, message: e.message } });
    });
    if (child.pid === undefined) return; // the error event follows
    this.pgid = child.pid;
    report({ id: this.id, started: this.pgid });
    if (this.outputEveryMs > 0) this.outputTimer = setInterval(() => this.reportOutput(), this.outputEveryMs);
    for (const stream of [child.stdout, child.stderr]) {
      stream?.on("data", (/** @type {Buffer} */ chunk) => this.tail.push(chunk));
      stream?.on("close", () => {
        this.openStreams -= 1;
        this.maybeDone();
      });
    }
    child.on("exit", (code, signal) => {
      this.mainExited = true;
      report({ id: this.id, exit: { code, signal } });
      // The action ends with its main process: whatever it left behind in its group is stopped too.
      if (groupAlive(this.pgid)) this.stop();
      this.watchGroup(child);
    });
    this.schedule();
  }

  /**
   * Polls until nobody is left in the group, then gives its pipes a moment to close.
   * @param {import("node:child_process").ChildProcess} child
   */
  watchGroup(child) {
    const gone =
      !groupAlive(this.pgid) || (this.killSentAt !== null && nowMs() - this.killSentAt > AFTER_KILL_MS);
    if (!gone) {
      setTimeout(() => this.watchGroup(child), GONE_POLL_MS);
      return;
    }
    this.groupGone = true;
    clearTimeout(this.timer);
    setTimeout(() => {
      child.stdout?.destroy();
      child.stderr?.destroy();
      this.openStreams = 0;
      this.maybeDone();
    }, DRAIN_MS).unref();
    this.maybeDone();
  }

  /** The tail so far, when it wrote something since the last report. */
  reportOutput() {
    if (this.tail.total === this.outputSent || this.finished) return;
    this.outputSent = this.tail.total;
    report({ id: this.id, output: { output: this.tail.text(), total: this.tail.total } });
  }

  maybeDone() {
    if (!this.groupGone || this.openStreams > 0) return;
    this.end({ done: { output: this.tail.text(), total: this.tail.total } });
  }

  /** @param {Record<string, unknown>} last */
  end(last) {
    if (this.finished) return;
    this.finished = true;
    clearTimeout(this.timer);
    clearInterval(this.outputTimer);
    report({ id: this.id, ...last });
    actions.delete(this.id);
    if (nodeGone && actions.size === 0) process.exit(0);
  }

  /** @param {number} stopBy */
  moveDeadline(stopBy) {
    this.stopBy = stopBy;
    this.schedule();
  }

  /** Arms the one timer: SIGTERM for the deadline, or SIGKILL once a SIGTERM's grace is over. */
  schedule() {
    clearTimeout(this.timer);
    if (this.pgid === 0 || this.killSentAt !== null || this.groupGone) return;
    const due =
      this.termSentAt === null
        ? this.stopBy - this.killGraceMs
        : Math.min(this.termSentAt + this.killGraceMs, this.stopBy);
    if (!Number.isFinite(due)) return;
    this.timer = setTimeout(() => this.onTimer(), Math.min(MAX_TIMER_MS, Math.max(0, due - nowMs())));
  }

  onTimer() {
    // Timers run on the event loop's cached time and may fire a hair early: decide on the clock.
    const now = nowMs();
    if (this.termSentAt === null && now >= this.stopBy - this.killGraceMs) {
      report({ id: this.id, deadline: true });
      this.stop();
    } else if (this.termSentAt !== null && now >= Math.min(this.termSentAt + this.killGraceMs, this.stopBy)) {
      this.killSentAt = now;
      signalGroup(this.pgid, "SIGKILL");
    } else {
      this.schedule();
    }
  }

  /** SIGTERM to the whole group now, SIGKILL after kill_grace (never after stopBy). */
  stop() {
    if (this.pgid === 0 || this.termSentAt !== null || this.groupGone) return;
    this.termSentAt = nowMs();
    signalGroup(this.pgid, "SIGTERM");
    this.schedule();
  }
}

/** @type {Map<number, Action>} */
const actions = new Map();
let nodeGone = false;

/** @param {Record<string, any>} message */
function onMessage(message) {
  const id = Number(message.id);
  if (message.start !== undefined) {
    if (actions.has(id) || nodeGone) return;
    const stopBy = typeof message.stopBy === "number" ? message.stopBy : Infinity;
    const action = new Action(
      id,
      Number(message.killGraceMs) || 0,
      stopBy,
      Number(message.outputLimit) || 0,
      Number(message.outputEveryMs) || 0,
    );
    actions.set(id, action);
    action.start(message.start);
    return;
  }
  const action = actions.get(id);
  if (action === undefined) return;
  if (typeof message.stopBy === "number") action.moveDeadline(message.stopBy);
  if (message.stop === true) action.stop();
}

/** The node is gone (end of file, a broken pipe, or a signal meant for the supervisor): stop everything. */
function onNodeGone() {
  if (nodeGone) return;
  nodeGone = true;
  if (actions.size === 0) process.exit(0);
  for (const action of actions.values()) action.stop();
}

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
process.stdin.on("end", onNodeGone);
process.stdin.on("error", onNodeGone);
for (const signal of /** @type {const} */ (["SIGTERM", "SIGINT", "SIGHUP"])) process.on(signal, onNodeGone);
