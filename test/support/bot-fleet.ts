/**
 * A fleet of real `dagbot start` processes (node dist/cli.js) in one Matrix room of a test Synapse,
 * sharing one SQLite store: writes their configs, starts, stops, kill -9s and restarts them, waits
 * for their readiness line, and keeps each node's log for failure messages. Build first (npm run
 * build); the fleet refuses to start without dist/cli.js.
 */
import { spawn, type ChildProcess } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
  openSync,
  closeSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, afterEach } from "vitest";
import type { RegisteredUser, SynapseHandle } from "./synapse.js";

const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
export const CLI = join(REPO_ROOT, "dist/cli.js");

/** Fast leadership for tests: a killed leader is replaced about 2 s later. */
export const FAST_LEASE = { ttl: "2s", task_ttl: "2s", renew_every: "500ms", acquire_every: "250ms" };

// kill_grace fits FAST_LEASE: renew_every + margin + kill_grace < ttl (500ms + 200ms + 300ms < 2s).
export const TEST_ACTIONS = {
  echo: {
    argv: ["echo", "{message}"],
    args: { message: { pattern: "[^\\r\\n]{0,200}" } },
    timeout: "1m",
    kill_grace: "300ms",
  },
  sleep: {
    argv: ["sleep", "{seconds}"],
    args: { seconds: { pattern: "[0-9]{1,3}(\\.[0-9]{1,3})?" } },
    timeout: "5m",
    kill_grace: "300ms",
  },
  true: { argv: ["true"], timeout: "1m", kill_grace: "300ms" },
  fail: { argv: ["false"], timeout: "1m", kill_grace: "300ms" },
};

export interface FleetOptions {
  hs: SynapseHandle;
  /** Bot accounts are registered as `<prefix>1..N`. */
  prefix?: string;
  size?: number;
  /** Rooms every node is configured with; the first is "the" room. */
  rooms: string[];
  bots: RegisteredUser[];
  /** Extra top-level config keys (permissions, limits, lease...), merged over the defaults. */
  config?: Record<string, unknown>;
  /** Extra keys of the [matrix] section (e.g. encryption), merged over the defaults. */
  matrix?: Record<string, unknown>;
  /** Extra keys of node i's [matrix] section only, merged over `matrix`. */
  nodeMatrix?: (i: number) => Record<string, unknown>;
  /**
   * Give each node its token as an owner-only file named by `matrix.access_token_file` (written at
   * each start from `bot.accessToken`), as the set-up of docs/encryption.md does, instead of DAGBOT_ACCESS_TOKEN.
   */
  tokenFiles?: boolean;
  /** Extra top-level keys of node i's config only (e.g. [http]), merged over `config`. */
  nodeConfig?: (i: number) => Record<string, unknown>;
  /** Files of the DAG library folder: name → text. */
  library?: Record<string, string>;
  /** Node flags before dist/cli.js (e.g. `--import` of test/support/module-trace.mjs). */
  nodeArgs?: string[];
  /** Extra environment of every node. */
  env?: Record<string, string>;
  /**
   * The `dagbot` command to run (an installed package's bin), instead of `node dist/cli.js` of this
   * checkout; `nodeArgs` do not apply to it.
   */
  command?: string;
}

export interface FleetNode {
  readonly index: number;
  readonly nodeId: string;
  readonly bot: RegisteredUser;
  readonly configPath: string;
  readonly logPath: string;
  process: ChildProcess | null;
  exited: Promise<number | null> | null;
}

/** Children killed if the test process exits without stopping them. */
const live = new Set<ChildProcess>();
process.once("exit", () => {
  for (const child of live) child.kill("SIGKILL");
});

export class BotFleet {
  readonly dir: string;
  readonly storePath: string;
  readonly nodes: FleetNode[];
  /** Kept on dispose() when a test failed, or when DAGBOT_KEEP_FLEET is set (to read the node logs). */
  private keep = false;

  constructor(private readonly o: FleetOptions) {
    if (o.command === undefined && !existsSync(CLI))
      throw new Error(`${CLI} is missing: run \`npm run build\` before the Matrix e2e tests`);
    this.dir = mkdtempSync(join(tmpdir(), "dagbot-fleet-"));
    this.storePath = join(this.dir, "dagbot.db");
    const library = join(this.dir, "library");
    mkdirSync(library);
    for (const [name, text] of Object.entries(o.library ?? {})) writeFileSync(join(library, name), text);
    this.nodes = o.bots.map((bot, i) => {
      const nodeId = `node${i + 1}`;
      const configPath = join(this.dir, `${nodeId}.json`);
      const config = {
        node_id: nodeId,
        labels: ["linux"],
        capacity: 2,
        store: `sqlite:${this.storePath}`,
        dag_library: library,
        matrix: {
          homeserver_url: o.hs.url,
          user_id: bot.userId,
          rooms: o.rooms,
          command_window: "1h",
          // Every node's account: only these count as bots (and prove a send when leadership moves).
          // One account with a device per node lists that account once.
          fleet: [...new Set(o.bots.map((b) => b.userId))],
          ...(o.tokenFiles === true ? { access_token_file: this.tokenFile(`node${i + 1}`) } : {}),
          ...o.matrix,
          ...o.nodeMatrix?.(i),
        },
        actions: TEST_ACTIONS,
        lease: FAST_LEASE,
        log_level: "info",
        ...o.config,
        ...o.nodeConfig?.(i),
      };
      writeFileSync(configPath, JSON.stringify(config, null, 2));
      return {
        index: i,
        nodeId,
        bot,
        configPath,
        logPath: join(this.dir, `${nodeId}.log`),
        process: null,
        exited: null,
      };
    });
  }

  /** Starts node i and resolves once it logged `matrix intake ready`. */
  async start(i: number, timeoutMs = 60_000): Promise<void> {
    const node = this.node(i);
    if (node.process !== null) throw new Error(`${node.nodeId} is already running`);
    if (this.o.tokenFiles === true) {
      writeFileSync(this.tokenFile(node.nodeId), `${node.bot.accessToken}\n`, { mode: 0o600 });
    }
    const logFd = openSync(node.logPath, "a");
    const args = ["start", "--config", node.configPath, "--state-dir", join(this.dir, "state")];
    const child = spawn(
      this.o.command ?? process.execPath,
      this.o.command !== undefined ? args : [...(this.o.nodeArgs ?? []), CLI, ...args],
      {
        env: {
          ...process.env,
          ...(this.o.tokenFiles === true ? {} : { DAGBOT_ACCESS_TOKEN: node.bot.accessToken }),
          DAGBOT_LOG_LEVEL: "debug",
          ...this.o.env,
        },
        stdio: ["ignore", logFd, logFd],
      },
    );
    closeSync(logFd);
    live.add(child);
    node.process = child;
    node.exited = new Promise((resolveExit) =>
      child.once("exit", (code, signal) => {
        live.delete(child);
        resolveExit(code ?? (signal ? -1 : null));
      }),
    );
    const startOffset = this.logText(i).length;
    await this.waitForLog(
      i,
      (text) => text.slice(startOffset).includes('"msg":"matrix intake ready"'),
      timeoutMs,
      "ready",
    );
  }

  async startAll(): Promise<void> {
    await Promise.all(this.nodes.map((n) => this.start(n.index)));
  }

  /** SIGTERM (graceful) and wait for the exit; returns the exit code. */
  async stop(i: number): Promise<number | null> {
    const node = this.node(i);
    if (node.process === null) return null;
    node.process.kill("SIGTERM");
    const timer = setTimeout(() => node.process?.kill("SIGKILL"), 20_000);
    const code = await node.exited;
    clearTimeout(timer);
    node.process = null;
    return code;
  }

  /** kill -9: no goodbye, leases and tasks held are left to expire. */
  async kill(i: number): Promise<void> {
    const node = this.node(i);
    if (node.process === null) return;
    node.process.kill("SIGKILL");
    await node.exited;
    node.process = null;
  }

  /** Where node `nodeId`'s token file is (with `tokenFiles`). */
  tokenFile(nodeId: string): string {
    return join(this.dir, `${nodeId}.token`);
  }

  running(i: number): boolean {
    return this.node(i).process !== null;
  }

  logText(i: number): string {
    try {
      return readFileSync(this.node(i).logPath, "utf8");
    } catch {
      return "";
    }
  }

  /** Structured log lines of node i whose msg matches. */
  logLines(i: number, msg: string): Record<string, unknown>[] {
    return this.logText(i)
      .split("\n")
      .filter((l) => l.includes(`"msg":"${msg}"`))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  }

  async waitForLog(
    i: number,
    test: (text: string) => boolean,
    timeoutMs: number,
    what: string,
  ): Promise<void> {
    const node = this.node(i);
    const deadline = Date.now() + timeoutMs;
    let exited = false;
    void node.exited?.then(() => (exited = true));
    for (;;) {
      if (test(this.logText(i))) return;
      if (exited) throw new Error(`${node.nodeId} exited before ${what}; log tail:\n${this.tail(i)}`);
      if (Date.now() > deadline)
        throw new Error(`${node.nodeId}: no ${what} after ${timeoutMs} ms; log tail:\n${this.tail(i)}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  tail(i: number, lines = 30): string {
    return this.logText(i).trimEnd().split("\n").slice(-lines).join("\n");
  }

  /** Every node's log tail, for a failure message. */
  tails(lines = 15): string {
    return this.nodes.map((n) => `--- ${n.nodeId}\n${this.tail(n.index, lines)}`).join("\n");
  }

  keepDir(): void {
    this.keep = true;
  }

  async dispose(): Promise<void> {
    await Promise.all(this.nodes.map((n) => this.stop(n.index)));
    if (this.keep || process.env["DAGBOT_KEEP_FLEET"]) console.error(`[bot-fleet] kept ${this.dir}`);
    else rmSync(this.dir, { recursive: true, force: true });
  }

  private node(i: number): FleetNode {
    const node = this.nodes[i];
    if (node === undefined) throw new Error(`no node ${i}`);
    return node;
  }
}

/**
 * The hooks a chat test file's fleet needs: a failed test keeps the fleet's folder and prints the
 * tails of its logs; after the file, the person stops syncing, the store closes and the fleet goes.
 * `parts` is read when a hook runs (the file's beforeAll sets them).
 */
export function fleetHooks(
  parts: () => {
    fleet: BotFleet | undefined;
    person: { stopSync(): Promise<void> } | undefined;
    store: { close(): Promise<void> } | undefined;
  },
): void {
  afterEach((ctx) => {
    if (ctx.task.result?.state === "fail") {
      const { fleet } = parts();
      fleet?.keepDir();
      console.error(fleet?.tails());
    }
  });
  afterAll(async () => {
    const { fleet, person, store } = parts();
    await person?.stopSync();
    await store?.close();
    await fleet?.dispose();
  });
}
