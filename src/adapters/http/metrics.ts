/**
 * Prometheus metrics of one node (/metrics). Counters of what this node did are read from the room's
 * event log as it is written (lines whose actor is this node's session), so the engine's loops carry
 * no metrics code; gauges (queue depth, leadership, outbox) are read from the store at scrape time.
 * Every label has a small fixed set of values: verbs, outcome kinds, task states, route patterns,
 * and the node's configured rooms.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { EngineObserver } from "../../app/engine-observer.js";
import { RUN_DECISIONS } from "../../domain/run-states.js";
import type { LogEvent } from "../../ports/store.js";
import type { EventListener } from "./event-hub.js";

/** Which verb an outcome answers: most kinds belong to one verb. */
const VERB_OF_KIND: Record<string, string> = {
  published: "publish",
  exists: "publish",
  conflict: "publish",
  "invalid-dag": "publish",
  "library-error": "publish",
  status: "status",
  overview: "status",
  list: "list",
  logs: "logs",
  graph: "graph",
  retried: "retry",
  "nothing-to-retry": "retry",
  nodes: "nodes",
  cap: "cap",
  policy: "policy",
  "policy-proposed": "policy",
  help: "help",
};

const FINAL_TASK_STATES = new Set(["succeeded", "failed", "timed_out", "canceled", "skipped"]);

/** How many queued tasks' queue times are remembered for the claim-latency histogram. */
const MAX_TRACKED = 10_000;

export interface ScrapeSources {
  rooms: readonly string[];
  /** Queued tasks of the room's active runs. */
  queueDepth(roomId: string): Promise<number>;
  /** This node's term while it leads the room, else null. */
  leaderTerm(roomId: string): number | null;
  /** Unsent outbox messages of a room this node leads (null when it does not lead it). */
  outboxPending(roomId: string): Promise<number | null>;
  storeErrors(): number;
  streamClients(): number;
  streamDrops(): number;
}

export class NodeMetrics {
  readonly registry = new Registry();
  private readonly queuedAt = new Map<string, number>();
  private readonly enqueuedAt = new Map<string, number>();
  readonly commands: Counter<"verb" | "outcome">;
  readonly tasks: Counter<"state">;
  readonly claimLatency: Histogram;
  readonly leadershipChanges: Counter<"room">;
  readonly outboxLatency: Histogram;
  readonly httpRequests: Counter<"route" | "method" | "status">;
  readonly httpDuration: Histogram<"route" | "method">;
  readonly leaseRenewFailures: Counter<"room" | "reason">;
  readonly loopStoreErrors: Counter<"loop">;
  readonly webhookDeliveries: Counter<"hook" | "result">;
  readonly webhookRefusals: Counter<"hook" | "reason">;
  readonly edgeClaims: Counter<"answer">;

  constructor(
    private readonly session: string,
    sources: ScrapeSources,
  ) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry, prefix: "dagbot_" });
    this.commands = new Counter({
      name: "dagbot_commands_total",
      help: "Commands this node handled as its room's leader, by verb and outcome kind",
      labelNames: ["verb", "outcome"],
      registers,
    });
    this.tasks = new Counter({
      name: "dagbot_tasks_finished_total",
      help: "Tasks this node moved to a final state (as worker or leader), by state",
      labelNames: ["state"],
      registers,
    });
    this.claimLatency = new Histogram({
      name: "dagbot_task_claim_latency_seconds",
      help: "From a task becoming queued to this node claiming it",
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers,
    });
    this.leadershipChanges = new Counter({
      name: "dagbot_leadership_changes_total",
      help: "Leases acquired in the room (by any node): each is a new leader term",
      labelNames: ["room"],
      registers,
    });
    this.outboxLatency = new Histogram({
      name: "dagbot_outbox_send_latency_seconds",
      help: "From a message entering this node's outbox to its send",
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    });
    this.httpRequests = new Counter({
      name: "dagbot_http_requests_total",
      help: "HTTP API requests by route pattern, method and status",
      labelNames: ["route", "method", "status"],
      registers,
    });
    this.httpDuration = new Histogram({
      name: "dagbot_http_request_duration_seconds",
      help: "HTTP API request duration by route pattern (event streams excluded)",
      labelNames: ["route", "method"],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5, 30],
      registers,
    });
    this.leaseRenewFailures = new Counter({
      name: "dagbot_lease_renew_failures_total",
      help: "Renewals of this node's room lease that failed: reason conflict (another holder, or expired) or error (the store)",
      labelNames: ["room", "reason"],
      registers,
    });
    this.loopStoreErrors = new Counter({
      name: "dagbot_loop_store_errors_total",
      help: "Failed store calls of this node's engine loops (lease, leader, worker, heartbeat, outbox), retried with backoff; conflicts not counted",
      labelNames: ["loop"],
      registers,
    });
    this.webhookDeliveries = new Counter({
      name: "dagbot_webhook_deliveries_total",
      help: "Verified webhook deliveries this node took, by hook and result (accepted, ignored, refused, timeout)",
      labelNames: ["hook", "result"],
      registers,
    });
    this.edgeClaims = new Counter({
      name: "dagbot_edge_claims_total",
      help: "Edge nodes' claims this core answered, by how (src/app/claim-gate.ts): looked (nothing fits, from its read of the queue, no claim transaction), store (a claim transaction), busy (refused for load, 503 with Retry-After)",
      labelNames: ["answer"],
      registers,
    });
    this.webhookRefusals = new Counter({
      name: "dagbot_webhook_refused_total",
      help: "Webhook deliveries this node refused before reading them, by hook and reason (bad-signature, stale-timestamp, too-large, ...)",
      labelNames: ["hook", "reason"],
      registers,
    });
    new Gauge({
      name: "dagbot_queue_depth",
      help: "Queued tasks of the room's active runs",
      labelNames: ["room"],
      registers,
      async collect() {
        for (const room of sources.rooms) this.set({ room }, await sources.queueDepth(room));
      },
    });
    new Gauge({
      name: "dagbot_leader",
      help: "1 while this node leads the room",
      labelNames: ["room"],
      registers,
      collect() {
        for (const room of sources.rooms) this.set({ room }, sources.leaderTerm(room) === null ? 0 : 1);
      },
    });
    new Gauge({
      name: "dagbot_leader_term",
      help: "The lease term this node leads the room under (0 when it does not lead)",
      labelNames: ["room"],
      registers,
      collect() {
        for (const room of sources.rooms) this.set({ room }, sources.leaderTerm(room) ?? 0);
      },
    });
    new Gauge({
      name: "dagbot_outbox_pending",
      help: "Unsent outbox messages of a room this node leads",
      labelNames: ["room"],
      registers,
      async collect() {
        for (const room of sources.rooms) {
          const n = await sources.outboxPending(room);
          if (n === null) this.remove({ room });
          else this.set({ room }, n);
        }
      },
    });
    new Gauge({
      name: "dagbot_store_errors",
      help: "Store calls of the HTTP API and its log reader that failed (a counter read at scrape time)",
      registers,
      collect() {
        this.set(sources.storeErrors());
      },
    });
    new Gauge({
      name: "dagbot_event_stream_clients",
      help: "Open /v1/events streams",
      registers,
      collect() {
        this.set(sources.streamClients());
      },
    });
    new Gauge({
      name: "dagbot_event_stream_dropped",
      help: "Event-stream clients dropped for reading too slowly (a counter read at scrape time)",
      registers,
      collect() {
        this.set(sources.streamDrops());
      },
    });
  }

  /** Counts what the engine's loops report (see EngineObserver). */
  observer(): Required<EngineObserver> {
    return {
      leaseRenewFailed: (room, why) => this.leaseRenewFailures.inc({ room, reason: why }),
      storeError: (loop) => this.loopStoreErrors.inc({ loop }),
    };
  }

  /** A listener for the event hub of each room. */
  listener(): EventListener {
    return { onEvents: (events) => events.forEach((e) => this.observe(e)) };
  }

  observe(e: LogEvent): void {
    const mine = e.actor === this.session;
    if (e.kind === "task.queued" && e.taskId !== null) {
      remember(this.queuedAt, `${e.runId}/${e.taskId}`, e.at);
    } else if (e.kind === "task.running" && e.taskId !== null) {
      const key = `${e.runId}/${e.taskId}`;
      const since = this.queuedAt.get(key);
      this.queuedAt.delete(key);
      if (mine && since !== undefined) this.claimLatency.observe(Math.max(0, e.at - since) / 1000);
    } else if (e.kind.startsWith("task.") && mine && FINAL_TASK_STATES.has(e.kind.slice(5))) {
      this.tasks.inc({ state: e.kind.slice(5) });
    } else if (e.kind === "inbox.handled" && mine) {
      this.commands.inc(commandLabels(e.data["result"]));
    } else if (e.kind === "lease.acquired") {
      this.leadershipChanges.inc({ room: e.roomId });
    } else if (e.kind === "outbox.enqueued" && mine && typeof e.data["txnId"] === "string") {
      remember(this.enqueuedAt, e.data["txnId"], e.at);
    } else if (e.kind === "outbox.sent" && typeof e.data["txnId"] === "string") {
      const since = this.enqueuedAt.get(e.data["txnId"]);
      this.enqueuedAt.delete(e.data["txnId"]);
      if (since !== undefined) this.outboxLatency.observe(Math.max(0, e.at - since) / 1000);
    }
  }
}

/** Store-recorded results (publish, decisions, cap, policy, schedule) name their op and kind; ours carry the outcome. */
const STORE_KIND: Record<string, string> = { created: "published", set: "cap" };
const STORE_OPS = new Set<string>(["publish", ...RUN_DECISIONS, "cap", "policy", "schedule"]);
const CREATING_VERBS = new Set(["publish", "run", "retry"]);

/** The labels of a handled command's stored result (exported for its unit test). */
export function commandLabels(result: unknown): { verb: string; outcome: string } {
  const r = (typeof result === "object" && result !== null ? result : {}) as Record<string, unknown>;
  const outcome = r["dagbotOutcome"] as Record<string, unknown> | undefined;
  if (outcome !== undefined && typeof outcome["kind"] === "string") {
    const kind = outcome["kind"];
    const verb = typeof outcome["verb"] === "string" ? outcome["verb"] : (VERB_OF_KIND[kind] ?? "none");
    return storeLabels(kind, outcome) ?? { verb, outcome: kind };
  }
  // A gate decision the store recorded itself is counted under its verb: approve or deny.
  if (r["op"] === "gate" && (r["decision"] === "approve" || r["decision"] === "deny")) {
    const kind = typeof r["kind"] === "string" ? r["kind"] : "other";
    return { verb: r["decision"], outcome: `gate-${kind}`.slice(0, 32) };
  }
  const op = typeof r["op"] === "string" && STORE_OPS.has(r["op"]) ? r["op"] : "other";
  // A run created by `run` or `retry` is recorded with op "publish" and its verb.
  if (op === "publish" && typeof r["verb"] === "string" && CREATING_VERBS.has(r["verb"])) {
    const kind = typeof r["kind"] === "string" ? r["kind"] : "other";
    return { verb: r["verb"], outcome: STORE_KIND[kind] ?? kind.slice(0, 32) };
  }
  const kind = typeof r["kind"] === "string" ? r["kind"] : "other";
  // A schedule change is counted by its action: schedule-pause-done, schedule-delete-already, ...
  if (op === "schedule" && typeof r["action"] === "string")
    return { verb: op, outcome: `schedule-${r["action"]}-${kind}`.slice(0, 32) };
  const decision = ["done", "already", "wrong-status"].includes(kind);
  // A policy result's kind is "set" like a cap's, or "proposed": named as the app's outcomes are.
  if (op === "policy") return { verb: op, outcome: kind === "proposed" ? "policy-proposed" : "policy" };
  return { verb: op, outcome: STORE_KIND[kind] ?? (decision ? `decision-${kind}` : kind.slice(0, 32)) };
}

/**
 * The labels of the outcomes a store once kept in its own shape (0.3.1 and earlier; the row now
 * keeps the app's outcome): the same as before, so a series does not change its name on upgrade.
 */
function storeLabels(kind: string, o: Record<string, unknown>): { verb: string; outcome: string } | null {
  const result = typeof o["result"] === "string" ? o["result"] : "other";
  const verb = typeof o["verb"] === "string" ? o["verb"] : null;
  if (kind === "decision" && verb !== null) return { verb, outcome: `decision-${result}`.slice(0, 32) };
  if (kind === "gate" && verb !== null) return { verb, outcome: `gate-${result}`.slice(0, 32) };
  if (kind === "schedule-changed" && typeof o["action"] === "string")
    return { verb: "schedule", outcome: `schedule-${o["action"]}-${result}`.slice(0, 32) };
  const run = o["run"] as { definition?: unknown } | undefined;
  // A new run of a published DAG (`run`), and a retry's new run, were counted as published.
  if (kind === "published" && typeof run?.definition === "string") return { verb: "run", outcome: kind };
  if (kind === "retried") return { verb: "retry", outcome: "published" };
  return null;
}

function remember(map: Map<string, number>, key: string, at: number): void {
  if (map.size >= MAX_TRACKED) {
    const oldest = map.keys().next();
    if (oldest.done !== true) map.delete(oldest.value);
  }
  map.set(key, at);
}
