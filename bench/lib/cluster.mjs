/**
 * Real `dagbot node` processes for the bench: a config per node (no-op `true` action, quiet logs),
 * start and wait until the node's heartbeat row is in the store, stop with a signal, RSS sampling
 * from /proc, and commands written into the inbox as `dagbot submit` writes them.
 */
import { spawn } from "node:child_process";
import { closeSync, openSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import process from "node:process";
import { clearTimeout, setTimeout } from "node:timers";
import { setTimeout as sleep } from "node:timers/promises";
import { track } from "./children.mjs";
import { CLI, cliNodeFlags, load } from "./dist.mjs";

export const ROOM = "local";

/** Polls `probe` until it returns a non-null value or `timeoutMs` passes (then throws with `what`). */
export async function waitFor(what, probe, timeoutMs = 30_000, everyMs = 20) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== null && v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`bench: timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}

/** TOML for one node; `lease` holds ttl, renew_every and acquire_every as duration strings. */
export function nodeConfig({ nodeId, store, capacity, lease }) {
  return [
    `node_id = "${nodeId}"`,
    `labels = ["linux"]`,
    `capacity = ${capacity}`,
    `store = "${store}"`,
    `log_level = "warn"`,
    ``,
    `[actions.true]`,
    `argv = ["true"]`,
    `timeout = "1m"`,
    // Fits the shortest bench lease (failover: 3s ttl): renew_every + margin + kill_grace < ttl.
    `kill_grace = "1s"`,
    ``,
    `[lease]`,
    `ttl = "${lease.ttl}"`,
    `task_ttl = "${lease.task_ttl ?? lease.ttl}"`,
    `renew_every = "${lease.renew_every}"`,
    `acquire_every = "${lease.acquire_every}"`,
    ``,
  ].join("\n");
}

/** RSS in kB of a live process, from /proc/<pid>/status; null when it is gone. */
export function rssKb(pid) {
  try {
    const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m === null ? null : Number(m[1]);
  } catch {
    return null;
  }
}

/** VmRSS (kB) of a process and every process below it (a node and its action supervisor). */
export function treeRssKb(pid) {
  const children = new Map();
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (!children.has(ppid)) children.set(ppid, []);
      children.get(ppid).push(Number(name));
    } catch {
      // it ended while we looked
    }
  }
  let total = 0;
  for (const todo = [pid]; todo.length > 0;) {
    const p = todo.pop();
    total += rssKb(p) ?? 0;
    todo.push(...(children.get(p) ?? []));
  }
  return total;
}

export class Cluster {
  /** `store` is the bench's own Store on the same location (to watch heartbeats, leases and events). */
  constructor({ dir, storeUrl, store, capacity = 4, lease, count = 3 }) {
    this.dir = dir;
    this.store = store;
    this.nodes = new Map();
    this.configs = new Map();
    for (let i = 0; i < count; i++) {
      const nodeId = `node-${String.fromCharCode(97 + i)}`;
      const path = join(dir, `${nodeId}.toml`);
      writeFileSync(path, nodeConfig({ nodeId, store: storeUrl, capacity, lease }));
      this.configs.set(nodeId, path);
    }
  }

  get nodeIds() {
    return [...this.configs.keys()];
  }

  /** Starts the node and resolves once its heartbeat row (this boot's) is in the store. */
  async start(nodeId) {
    const log = openSync(join(this.dir, `${nodeId}.log`), "a");
    const child = track(
      spawn(process.execPath, [...cliNodeFlags(), CLI, "node", "--config", this.configs.get(nodeId)], {
        stdio: ["ignore", "ignore", log],
      }),
    );
    closeSync(log);
    const exited = new Promise((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })));
    this.nodes.set(nodeId, { child, exited });
    const before = new Set(
      (await this.store.listNodes()).map((n) => `${n.session.nodeId}/${n.session.bootId}`),
    );
    await waitFor(`${nodeId} to register`, async () => {
      if (child.exitCode !== null)
        throw new Error(`${nodeId} exited with ${child.exitCode}; see ${this.dir}`);
      const rows = await this.store.listNodes();
      return rows.some(
        (n) => n.session.nodeId === nodeId && !before.has(`${n.session.nodeId}/${n.session.bootId}`),
      );
    });
    return child;
  }

  async startAll() {
    for (const id of this.nodeIds) await this.start(id);
  }

  /** Lines of every node's log (warn and above) matching `pattern`, e.g. busy errors that reached a loop. */
  logLines(pattern) {
    const out = [];
    for (const id of this.nodeIds) {
      let text = "";
      try {
        text = readFileSync(join(this.dir, `${id}.log`), "utf8");
      } catch {
        continue;
      }
      for (const line of text.split("\n")) if (pattern.test(line)) out.push(`${id}: ${line.slice(0, 300)}`);
    }
    return out;
  }

  pid(nodeId) {
    return this.nodes.get(nodeId)?.child.pid ?? null;
  }

  /** Sends `signal` and resolves when the process has exited. */
  async stop(nodeId, signal = "SIGTERM", timeoutMs = 30_000) {
    const n = this.nodes.get(nodeId);
    if (n === undefined) return;
    if (n.child.exitCode === null && n.child.signalCode === null) n.child.kill(signal);
    const timer = setTimeout(() => n.child.kill("SIGKILL"), timeoutMs);
    await n.exited;
    clearTimeout(timer);
    this.nodes.delete(nodeId);
  }

  async stopAll(signal = "SIGTERM") {
    await Promise.all([...this.nodes.keys()].map((id) => this.stop(id, signal)));
  }

  /** The node id holding the room's lease now (waits for one). */
  async leader() {
    return waitFor("a leader", async () => {
      const lease = await this.store.getLease(ROOM);
      return lease !== null && lease.holder !== null && lease.expiresAt > lease.now ? lease : null;
    });
  }
}

/** Writes a command into the room's inbox as the local operator and waits for the leader's answer. */
export async function command(store, body, timeoutMs = 60_000) {
  const { sendLocalCommand, commandPolicy } = await load("composition/command-step.js");
  const { loadConfig } = await load("config/load-config.js");
  // The default policy, as `dagbot submit` without a config has it (used to render an engine-only answer).
  const loaded = loadConfig({ env: {}, hostname: "bench-cli", needsMatrixToken: false });
  if (!loaded.ok) throw new Error("bench: the default config does not load");
  const answer = await sendLocalCommand(store, ROOM, body, timeoutMs, commandPolicy(loaded.config));
  if (answer === null) throw new Error(`bench: no leader answered ${JSON.stringify(body).slice(0, 60)}`);
  return answer;
}

/** Publishes and confirms a DAG document; returns the run id. */
export async function publishAndConfirm(store, doc) {
  const { publishCommand } = await load("cli/dag-file.js");
  const published = await command(store, publishCommand(doc));
  if (published.runId === null)
    throw new Error(`bench: publish of ${doc.id} refused: ${published.outcome?.kind ?? "no answer"}`);
  const confirmed = await command(store, { verb: "confirm", id: doc.id, hash: null });
  const run = await store.getRunById(published.runId);
  if (run?.status === "pending")
    throw new Error(`bench: confirm of ${doc.id} refused: ${confirmed.outcome?.kind ?? "no answer"}`);
  return published.runId;
}

/** Every event of the room, in seq order. */
export async function allEvents(store, sinceSeq = 0) {
  const out = [];
  for (let since = sinceSeq; ;) {
    const page = await store.readEvents(ROOM, since, 1000);
    out.push(...page);
    if (page.length < 1000) return out;
    since = page[page.length - 1].seq;
  }
}
