/**
 * The moving parts of the chaos scenarios: a fleet of `dagbot node` processes that can be killed
 * with SIGKILL, paused with SIGSTOP and restarted under the same node_id (a new boot id each life),
 * and a chat stand-in that writes commands into the inbox the way Matrix intake does (a Matrix
 * sender, origin_server_ts, the event content as received, inserted by every node that "saw" it).
 */
import type { Store } from "../../src/ports/store.js";
import type { NodeProcess, StoreKind, Target } from "./engine-cluster.js";
import { ROOM, startNode, targetIn, writeNodeConfig } from "./engine-cluster.js";
import { readNodeLog } from "./chaos-checks.js";
import { freezeOutsideWrite } from "./freeze.js";
import { waitFor } from "./store-wait.js";

/** The chat user the scenarios send commands as: allowlisted, so publish, confirm and cap are allowed. */
export const CHAOS_SENDER = "@chaos:example.org";
/** A room member without rights, for commands that must be refused. */
export const STRANGER = "@stranger:example.org";

/** A target on a store URL the caller owns (the private PostgreSQL server), with a scratch folder. */
export function targetAt(kind: StoreKind, label: string, storeUrl: string | null): Target {
  return targetIn(kind, `chaos-${label}`, storeUrl, "chaos folder");
}

/** The node config's extra part: a cheap `nap` action (sleep) and the chat sender's rights. */
const CHAOS_CONFIG_EXTRA = `
[actions.nap]
argv = ["sleep", "{s}"]
args = { s = { pattern = '[0-9]{1,2}(\\.[0-9]{1,3})?' } }
timeout = "30s"
kill_grace = "300ms"

[permissions]
allow = [${JSON.stringify(CHAOS_SENDER)}]
`;

/** Waits until the room has a leader and `count` nodes have sent a heartbeat. */
export async function fleetUp(store: Store, count: number): Promise<void> {
  await waitFor(
    `a leader and ${count} nodes`,
    async () => ({ lease: await store.getLease(ROOM), nodes: await store.listNodes() }),
    (v) => v.lease?.holder != null && v.nodes.length === count,
    { timeoutMs: 30_000, intervalMs: 50 },
  );
}

export interface FleetOptions {
  capacity: number;
  /** More of the node config (actions, limits), appended to the scenarios' own part. */
  extra?: string;
  ttl: string;
  renewEvery: string;
  acquireEvery: string;
  labels?: string[];
}

interface Member {
  nodeId: string;
  config: string;
  current: NodeProcess;
  /** Set just before we kill it: an exit without it is a crash of the node itself. */
  expectingExit: boolean;
  lives: number;
}

/** Unexpected exits: a node that died without being killed by the scenario. */
export interface Crash {
  nodeId: string;
  code: number | null;
  signal: NodeJS.Signals | null;
  /** The end of what the process wrote to stderr. */
  tail: string;
}

/**
 * `dagbot node` exits 1 when it cannot open the store at start (documented in its --help); a
 * supervisor starts it again. Only that exit is restarted; any other one is a crash.
 */
const REFUSED_START = /cannot open the store/;
const RESTART_AFTER_REFUSAL_MS = 300;

export class Fleet {
  private readonly members = new Map<string, Member>();
  readonly crashes: Crash[] = [];
  /** Starts refused because the store was unreachable (the server restarting); restarted like a supervisor would. */
  readonly refusedStarts: Crash[] = [];
  private closed = false;

  constructor(
    private readonly target: Target,
    nodeIds: readonly string[],
    options: FleetOptions,
  ) {
    for (const nodeId of nodeIds) {
      const config = writeNodeConfig(target, {
        nodeId,
        capacity: options.capacity,
        ttl: options.ttl,
        renewEvery: options.renewEvery,
        acquireEvery: options.acquireEvery,
        ...(options.labels ? { labels: options.labels } : {}),
        extra: CHAOS_CONFIG_EXTRA + (options.extra ?? ""),
      });
      const member: Member = {
        nodeId,
        config,
        current: startNode(target, config, nodeId),
        expectingExit: false,
        lives: 1,
      };
      this.members.set(nodeId, member);
      this.watch(member);
    }
  }

  get nodeIds(): string[] {
    return [...this.members.keys()];
  }

  logPath(nodeId: string): string {
    return this.member(nodeId).current.logPath;
  }

  logs(): Array<Array<Record<string, unknown>>> {
    return this.nodeIds.map((id) => readNodeLog(this.logPath(id)));
  }

  /** How many times each node was started. */
  lives(): Record<string, number> {
    return Object.fromEntries([...this.members.values()].map((m) => [m.nodeId, m.lives]));
  }

  isRunning(nodeId: string): boolean {
    const c = this.member(nodeId).current.child;
    return c.exitCode === null && c.signalCode === null;
  }

  /** The node's process id while it runs, else null. */
  pid(nodeId: string): number | null {
    return this.isRunning(nodeId) ? (this.member(nodeId).current.child.pid ?? null) : null;
  }

  /** kill -9 and wait for the exit. */
  async kill(nodeId: string): Promise<void> {
    const m = this.member(nodeId);
    if (!this.isRunning(nodeId)) return;
    m.expectingExit = true;
    m.current.kill("SIGKILL");
    await m.current.exited;
  }

  /** Starts the node again under the same node_id: a new process, so a new boot id. */
  restart(nodeId: string): void {
    const m = this.member(nodeId);
    if (this.isRunning(nodeId)) throw new Error(`${nodeId} is still running`);
    this.spawn(m);
  }

  signal(nodeId: string, signal: NodeJS.Signals): void {
    this.member(nodeId).current.kill(signal);
  }

  async killAll(): Promise<void> {
    this.closed = true;
    await Promise.all(this.nodeIds.map((id) => this.kill(id)));
  }

  private member(nodeId: string): Member {
    const m = this.members.get(nodeId);
    if (m === undefined) throw new Error(`no node ${nodeId} in the fleet`);
    return m;
  }

  private spawn(m: Member): void {
    m.expectingExit = false;
    m.lives += 1;
    m.current = startNode(this.target, m.config, m.nodeId);
    this.watch(m);
  }

  /** Tells a crash from a kill of ours, and restarts a start refused while the store was down. */
  private watch(m: Member): void {
    const proc = m.current;
    let tail = "";
    proc.child.stderr?.on("data", (chunk: Buffer) => {
      tail = (tail + chunk.toString()).slice(-2000);
    });
    // "close" comes after the output streams ended, so the tail is complete.
    proc.child.once("close", (code: number | null, signal: NodeJS.Signals | null) => {
      if (m.expectingExit || m.current !== proc) return;
      const exit = { nodeId: m.nodeId, code, signal, tail };
      if (code === 1 && REFUSED_START.test(tail)) {
        this.refusedStarts.push(exit);
        setTimeout(() => {
          if (!this.closed && m.current === proc) this.spawn(m);
        }, RESTART_AFTER_REFUSAL_MS);
      } else {
        this.crashes.push(exit);
      }
    });
  }
}

/** A command as the chat sees it: the event id and what the message said. */
export interface SentCommand {
  eventId: string;
  body: string;
  sender: string;
}

/**
 * Writes chat commands into the inbox like Matrix intake on every node does: each node that sees
 * the event inserts it (insert-or-ignore on the event id), so each command is inserted `seenBy`
 * times and exactly one insert wins. Store failures (a server restarting) are retried: the insert
 * is idempotent by construction.
 */
export class ChatStandIn {
  readonly sent: SentCommand[] = [];
  duplicates = 0;
  insertFailures = 0;
  private n = 0;

  constructor(
    private readonly store: Store,
    private readonly seenBy: readonly string[],
    private readonly label = "chaos",
  ) {}

  async send(body: string, sender = CHAOS_SENDER): Promise<SentCommand> {
    const eventId = `$${this.label}-${String(++this.n).padStart(5, "0")}:example.org`;
    const originServerTs = Date.now();
    for (const node of this.seenBy) {
      for (let attempt = 0; ; attempt++) {
        try {
          const r = await this.store.insertInboxEvent({
            eventId,
            roomId: ROOM,
            sender,
            originServerTs,
            content: { msgtype: "m.text", body },
            seenBy: node,
          });
          if (r === "duplicate") this.duplicates += 1;
          break;
        } catch (err) {
          this.insertFailures += 1;
          if (attempt > 200) throw err;
          await new Promise((r) => setTimeout(r, 100));
        }
      }
    }
    const cmd = { eventId, body, sender };
    this.sent.push(cmd);
    return cmd;
  }
}

/** SIGSTOP of `nodeId`, never inside a write transaction on SQLite (see ./freeze.ts). */
export function freezeOutsideWriteTransaction(f: Fleet, nodeId: string, target: Target): Promise<number> {
  return freezeOutsideWrite((signal) => f.signal(nodeId, signal), target);
}
