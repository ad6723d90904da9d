/**
 * The node config (docs/architecture.md §7): one strict zod schema for a TOML or JSON file, turned into the
 * NodeConfig every part of a node reads. Durations become milliseconds and sizes bytes here, once.
 */
import * as z from "zod";
import { compileArgPattern, placeholdersOf } from "../domain/action-argv.js";
import { claimTimingProblem, defaultMarginMs } from "../domain/claim-deadline.js";
import { parseDuration } from "../domain/duration.js";
import { compileParamPattern } from "../domain/param-pattern.js";
import type { WebhookSpec } from "../domain/webhook.js";
import { WEBHOOK_KINDS, pointerProblem } from "../domain/webhook.js";
import type { ActionDefinition } from "../ports/executor.js";
import { parseByteSize } from "./byte-size.js";
import { DEFAULT_STORE, parseStoreLocation } from "./store-location.js";
import type { StoreLocation } from "./store-location.js";

export const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** The room an engine-only node (no `[matrix]` section) leads and `dagbot run`/`submit` use by default. */
export const LOCAL_ROOM_ID = "local";

export interface MatrixConfig {
  homeserverUrl: string;
  userId: string;
  /** Secret: never log it; redactConfig() replaces it. */
  accessToken: string;
  deviceId: string | null;
  /** The only rooms this node joins and acts in. */
  rooms: string[];
  /** Commands older than this when first seen are ignored (the inbox dedup window). */
  commandWindowMs: number;
  /**
   * How long an encrypted event that could not be decrypted is retried, as its keys may still be on
   * their way, before it counts as undecryptable and its sender is asked to re-send (matrix.decrypt_grace).
   */
  decryptGraceMs: number;
  /**
   * The other bot accounts of this fleet (matrix.fleet). Only these and user_id count as bots: their
   * events are never commands, and only theirs prove that an inherited message was already sent.
   */
  fleet: string[];
  /**
   * End-to-end encryption (matrix.encryption, default true): read and answer in encrypted rooms, with
   * this device's crypto state kept in the node's state folder. False: encrypted rooms get one notice.
   */
  encryption: boolean;
  /**
   * Secret: the bot account's recovery key (matrix.recovery_key_file, DAGBOT_RECOVERY_KEY[_FILE]),
   * with which the node signs its own device at start (docs/architecture.md §12). Null: not given.
   */
  recoveryKey: string | null;
}

export interface PermissionsConfig {
  /** Room power level needed for publish, confirm, reject, cancel, retry and cap. */
  powerLevel: number;
  /** User ids allowed those commands whatever their power level. */
  allow: string[];
  /** When true, nobody may confirm a run they published. */
  twoPersonRule: boolean;
  /** Publishers whose runs start without a confirmation step. */
  autoConfirm: string[];
  /** Webhooks (hook ids) whose deliveries start runs without a confirmation step. */
  hookAutoConfirm: string[];
  /** Who may read task output with `logs`. */
  logs: "operators" | "anyone";
  /**
   * The settings the file states (keys of `[permissions]`). The room's policy in the store wins; a
   * stated setting that disagrees with it keeps this node from leading.
   */
  stated: Array<"power_level" | "allow" | "two_person_rule" | "auto_confirm" | "hook_auto_confirm" | "logs">;
}

export interface LeaseConfig {
  /** The room lease: how long a leader holds a room without renewing it. */
  ttlMs: number;
  renewEveryMs: number;
  acquireEveryMs: number;
  /** The room lease's margin (a leader's step-down). */
  marginMs: number;
  /**
   * The task lease (lease.task_ttl): how long the store keeps a worker's claim after its last
   * renewal, and so the longest a store outage may last without stopping an action (docs/architecture.md §3).
   */
  taskTtlMs: number;
  /** How long before its task lease could expire a worker's action must be gone (domain/claim-deadline.ts). */
  taskMarginMs: number;
}

export interface LimitsConfig {
  /** The room's cap on running tasks until someone changes it with `cap`. */
  globalCap: number;
  /** A pending run expires when nobody confirms it within this time. */
  confirmTimeoutMs: number;
}

/** What the leader forgets, and when (docs/configuration.md, "Retention"). */
export interface RetentionConfig {
  /**
   * Runs that ended, with their tasks and events; commands handled and answered; messages sent.
   * Kept above the command window: an inbox row is what stops a replayed event from being handled twice.
   */
  finishedMs: number;
  /** A node whose last heartbeat is older than this is shown as gone. */
  nodeGoneAfterMs: number;
  /** A node gone for this long is dropped from the node list. */
  forgetNodesAfterMs: number;
  /** An HTTP idempotency key stored this long ago is forgotten (at least finishedMs). */
  forgetKeysAfterMs: number;
}

/**
 * What an HTTP API token may do: `read` the routes that change nothing, or also `operate` (chat's
 * operators); `edge` only the /v1/edge/ routes, for the one edge node it names (docs/operations.md,
 * "Edge nodes").
 */
export type HttpTokenLevel = "read" | "operate" | "edge";

export interface HttpToken {
  /** Who holds it: recorded as the sender (`http:<name>`) of its commands and in logs, never the token. */
  name: string;
  /** SHA-256 of the bearer token, 64 lower-case hex digits: the config never holds the token itself. */
  sha256: string;
  level: HttpTokenLevel;
  /**
   * The rooms the token may read and act on (`rooms = [...]`); absent: every room of the node. Another
   * room is answered like one the node does not serve, so the token does not learn which those are.
   */
  rooms?: string[];
  /** An edge token's node id: the only node whose tasks and heartbeat it may speak for. */
  node?: string;
  /** An edge token's labels: its node's claims and heartbeat may name these only; absent: any. */
  labels?: string[];
  /** An edge token's actions: its node's claims and heartbeat may name these only; absent: any. */
  actions?: string[];
}

export interface HttpConfig {
  listen: string;
  host: string;
  port: number;
  tokens: HttpToken[];
  /** Whether /healthz and /readyz answer without a token (orchestrators' probes rarely carry one). */
  openHealth: boolean;
  /** Whether /metrics answers without a token. */
  openMetrics: boolean;
  /** The largest request body accepted; larger ones are 413 before they are parsed. */
  bodyLimitBytes: number;
  /**
   * The most output an edge's finish or output write may carry (`edge_output_limit`, default the
   * largest `output_limit` of this node's actions): the edge routes' body limit is made from it.
   */
  edgeOutputLimitBytes: number;
  /** Bytes an event-stream client may have waiting unread before it is dropped (told to resume). */
  sseBufferBytes: number;
  /** How long a write waits for the room's leader to handle it before answering 504. */
  commandTimeoutMs: number;
  /** How often an idle event stream gets a heartbeat comment. */
  heartbeatMs: number;
  /** Event streams this node serves at once; one more is a 503 (each may hold up to sseBufferBytes). */
  maxStreams: number;
  /** Open connections at once (streams included); one more is closed as soon as it is accepted. */
  maxConnections: number;
  /** How long a client may take to send a request's headers (a slow-headers client holds a connection). */
  headerTimeoutMs: number;
  /** How long a client may take to send a whole request, headers and body. */
  requestTimeoutMs: number;
  /** How long an idle keep-alive connection is kept open between requests. */
  keepAliveTimeoutMs: number;
}

/**
 * A webhook endpoint (`[[webhooks]]`, docs/architecture.md §10): POST /v1/hooks/<id> starts a run of
 * `dag` in `room` from a verified delivery. The secret is read from a file or an environment
 * variable when the config is loaded, never written in the config itself.
 */
export interface WebhookConfig extends WebhookSpec {
  /** Secret: never log it; redactConfig() replaces it. */
  secret: string;
  /** Where the secret came from (`secret_file` or `secret_env`, without the value), for messages. */
  secretFrom: { file: string } | { env: string };
}

/**
 * An edge node (docs/operations.md, "Edge nodes"): no store connection; its worker and heartbeat go
 * through the core nodes' HTTP API, one core at a time, in this order.
 */
export interface EdgeConfig {
  /** The core nodes' HTTP API base URLs, like "http://10.0.0.1:8080". */
  cores: string[];
  /** The file the edge token was read from (for messages). */
  tokenFile: string;
  /** Secret: the edge token, read by the loader from token_file; never log it (redactConfig). */
  token: string;
  /** How long one request to a core may take before the next core is tried. */
  requestTimeoutMs: number;
}

export const STORE_MIGRATE = ["when_alone", "always", "never"] as const;
export type StorePooler = "none" | "transaction";
export type StoreMigrate = (typeof STORE_MIGRATE)[number];

export interface NodeConfig {
  nodeId: string;
  labels: string[];
  /** How many tasks this node runs at once. */
  capacity: number;
  store: StoreLocation;
  /**
   * Connections in a PostgreSQL store's pool, shared by all the node's rooms and loops (plus the
   * lease lane and one LISTEN connection).
   */
  storePoolSize: number;
  /**
   * A PostgreSQL store reached through a transaction-mode pooler such as PgBouncer ("transaction"):
   * no LISTEN connection, wake-ups by polling (docs/operations.md, "Behind a connection pooler").
   */
  storePooler: StorePooler;
  /** A SQLite store's durability (docs/configuration.md); ignored for PostgreSQL. */
  sqliteSynchronous: SqliteSynchronous;
  /**
   * When a node that finds its store at an older schema migrates it (docs/operations.md, Upgrading):
   * `when_alone` (default) only if no other node has a live heartbeat; `always`; `never` (only
   * `dagbot migrate` does).
   */
  storeMigrate: StoreMigrate;
  /** Folder of DAG files for `!dag publish <name>`; null when the node has none. */
  dagLibrary: string | null;
  /** Null for an engine-only node. */
  matrix: MatrixConfig | null;
  /** The rooms this node leads and works for: matrix.rooms, or [LOCAL_ROOM_ID] without Matrix. */
  rooms: string[];
  permissions: PermissionsConfig;
  actions: Record<string, ActionDefinition>;
  lease: LeaseConfig;
  limits: LimitsConfig;
  retention: RetentionConfig;
  http: HttpConfig | null;
  /** Null for a core node (it opens the store); set for an edge node, which holds no store connection. */
  edge: EdgeConfig | null;
  /** Webhook endpoints served on the HTTP API; empty without `[[webhooks]]`. */
  webhooks: WebhookConfig[];
  logLevel: LogLevel;
  /**
   * How long a graceful stop waits for running actions before it kills them (their tasks are retried
   * elsewhere): shorter than a container's stop grace period (compose's 10 s by default), so the
   * node, not the SIGKILL that follows it, decides what is killed and says so.
   */
  stopGraceMs: number;
}

/**
 * A PostgreSQL node holds at most this many pooled connections plus its lease lane and one listening
 * connection: 4 a node by default, which the scale bench runs at capacity 4 without waiting on it.
 */
export const DEFAULT_STORE_POOL_SIZE = 2;

/**
 * `full`: a commit a caller saw survives a power cut too (one fsync per commit). `normal`: it
 * survives a killed process; a power cut or an OS crash may lose the last commits (WAL stays
 * consistent).
 */
export type SqliteSynchronous = "full" | "normal";

const ID = /^[A-Za-z0-9_.-]{1,64}$/;
const ID_HINT = 'use 1-64 letters, digits, "_", "." or "-"';
const ARG_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const USER_ID = /^@[^:\s]+:\S+$/;
const ROOM_ID = /^![^:\s]+:\S+$/;
const LISTEN = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/;
/** setTimeout cannot wait longer than 2^31-1 ms (about 24.8 days). */
const MAX_DURATION_MS = 2_147_483_647;
/** Retention is an age, not a timer: up to ten years. */
const MAX_RETENTION_MS = 10 * 365 * 86_400_000;
/**
 * How far the store's clock and a node's may disagree, plus the homeserver's: an inbox row is kept
 * this much longer than the command window (see the retention check below).
 */
export const RETENTION_WINDOW_MARGIN_MS = 3_600_000;
const MAX_OUTPUT_LIMIT = 64 * 1024 * 1024;
/** An action's `output_limit` when it names none (its prefault below). */
const DEFAULT_OUTPUT_LIMIT = 64 * 1024;

const id = z.string().regex(ID, { error: ID_HINT });
const userId = z.string().regex(USER_ID, { error: 'must be a Matrix user id like "@alice:example.org"' });
const roomId = z.string().regex(ROOM_ID, { error: 'must be a Matrix room id like "!abc123:example.org"' });

function kindOf(value: unknown): string {
  if (Array.isArray(value)) return "an array";
  if (value === null) return "null";
  return typeof value === "object" ? "a table" : `a ${typeof value}`;
}

function duration(min: number, max = MAX_DURATION_MS) {
  const hint = (iss: { input?: unknown }) =>
    iss.input === undefined ? undefined : `expected a duration string like "30s", got ${kindOf(iss.input)}`;
  return z
    .string({ error: hint })
    .transform((text, ctx) => {
      const ms = parseDuration(text);
      if (ms === null) {
        ctx.addIssue({
          code: "custom",
          message: `is not a duration; use a number and a unit like "500ms", "30s", "10m" or "1h"`,
        });
        return z.NEVER;
      }
      if (ms < min)
        ctx.addIssue({
          code: "custom",
          message: min === 1 ? "must be longer than 0" : `must be at least ${min}ms`,
        });
      if (ms > max)
        ctx.addIssue({
          code: "custom",
          message: max === MAX_DURATION_MS ? "must be at most 24 days" : "must be at most 10 years",
        });
      return ms;
    })
    .meta({ unit: "duration" });
}

const byteSize = z
  .union([z.string(), z.number()], { error: 'expected a size: bytes (65536) or a string like "64KiB"' })
  .transform((value, ctx) => {
    const bytes = parseByteSize(value);
    if (bytes === null) {
      ctx.addIssue({
        code: "custom",
        message: 'is not a size; use bytes (65536) or a unit like "64KiB" or "1MiB"',
      });
      return z.NEVER;
    }
    if (bytes > MAX_OUTPUT_LIMIT) ctx.addIssue({ code: "custom", message: "must be at most 64MiB" });
    return bytes;
  })
  .meta({ unit: "size" });

const pattern = z
  .string()
  .max(1000)
  .superRefine((text, ctx) => {
    const compiled = compileArgPattern(text);
    if (typeof compiled === "string") {
      ctx.addIssue({
        code: "custom",
        message: `is not a valid regular expression (RE2 syntax, matched in linear time: no backreferences or lookaround): ${compiled}`,
      });
    }
  });

function uniqueList<T extends z.ZodType<string>>(item: T) {
  return z.array(item).superRefine((list, ctx) => {
    const seen = new Set<string>();
    list.forEach((value, index) => {
      if (seen.has(value))
        ctx.addIssue({ code: "custom", path: [index], message: `duplicate entry "${value}"` });
      seen.add(value);
    });
  });
}

const actionSchema = z
  .strictObject({
    argv: z
      .array(z.string())
      .min(1, { error: "must name the program to run" })
      .describe(
        "The program and its arguments; `{NAME}` placeholders take the task's argument values, each into exactly one entry, with no shell.",
      ),
    args: z
      .record(
        z.string(),
        z.strictObject({
          pattern: pattern.describe(
            "The RE2 pattern the value must match as a whole (linear time: no backreferences or lookaround; at most 1000 characters).",
          ),
          allow_leading_dash: z
            .boolean()
            .prefault(false)
            .describe(
              'Accept a value starting with "-" in a placeholder that is a whole argv entry (then put "--" before it in argv).',
            ),
        }),
      )
      .prefault({})
      .describe(
        "The arguments a task may give (`args.NAME`), each with the pattern its value must match whole.",
      ),
    cwd: z.string().min(1).optional().describe("The folder the action starts in."),
    env: z
      .record(z.string(), z.string())
      .prefault({})
      .describe("Environment variables set for the action (not DAGBOT_*)."),
    timeout: duration(1)
      .prefault("10m")
      .describe("How long an attempt may run; then SIGTERM, and SIGKILL after `kill_grace`."),
    output_limit: byteSize
      .prefault("64KiB")
      .describe("How much of the action's output is kept: its last bytes (at most 64MiB)."),
    kill_grace: duration(0)
      .prefault("5s")
      .describe("How long after SIGTERM the action's process group gets SIGKILL."),
    run_as: z
      .string()
      .min(1)
      .optional()
      .describe('The user this action runs as: a user name or "UID:GID" (overrides `run_actions_as`).'),
  })
  .superRefine((action, ctx) => {
    const used = new Set<string>();
    action.argv.forEach((element, index) => {
      if (element.includes("\0"))
        ctx.addIssue({ code: "custom", path: ["argv", index], message: "contains a NUL byte" });
      const names = placeholdersOf(element);
      if (index === 0 && (element === "" || names.length > 0)) {
        ctx.addIssue({
          code: "custom",
          path: ["argv", 0],
          message: "must be the program itself: it cannot be empty or come from a placeholder",
        });
      }
      for (const name of names) {
        used.add(name);
        if (!Object.hasOwn(action.args, name)) {
          ctx.addIssue({
            code: "custom",
            path: ["argv", index],
            message: `placeholder {${name}} is not declared in args`,
          });
        }
      }
    });
    for (const name of Object.keys(action.args)) {
      if (!ARG_NAME.test(name)) {
        ctx.addIssue({
          code: "custom",
          path: ["args", name],
          message: 'argument names use letters, digits and "_", and start with a letter or "_"',
        });
      } else if (!used.has(name)) {
        ctx.addIssue({ code: "custom", path: ["args", name], message: `is not used: no {${name}} in argv` });
      }
    }
    for (const [key, value] of Object.entries(action.env)) {
      if (!ENV_NAME.test(key)) {
        ctx.addIssue({
          code: "custom",
          path: ["env", key],
          message: "is not a valid environment variable name",
        });
      } else if (key.startsWith("DAGBOT_")) {
        ctx.addIssue({
          code: "custom",
          path: ["env", key],
          message: "DAGBOT_* variables are set by dagbot itself",
        });
      }
      if (value.includes("\0"))
        ctx.addIssue({ code: "custom", path: ["env", key], message: "contains a NUL byte" });
    }
  });

const matrixSchema = section(() =>
  z.strictObject({
    homeserver_url: z
      .url({
        protocol: /^https?$/,
        // Undefined defers to the loader's messages, so a missing URL reads "required".
        error: (iss) =>
          iss.input === undefined ? undefined : 'must be an http(s) URL like "https://matrix.example.org"',
      })
      .describe("The homeserver's URL, http(s)."),
    user_id: userId.describe('The bot account, like "@dagbot:example.org".'),
    access_token: z.string().min(1, { error: "must not be empty" }).meta({
      description: "The account's access token (DAGBOT_ACCESS_TOKEN); better given as a file.",
      shownDefault: "required, or `access_token_file`",
    }),
    /** Read and removed by the loader before validation; listed here for unknown-key hints only. */
    access_token_file: z
      .string()
      .optional()
      .describe(
        "An owner-only file holding the access token (or DAGBOT_ACCESS_TOKEN_FILE); not with `access_token`.",
      ),
    device_id: z
      .string()
      .min(1)
      .optional()
      .describe(
        "Accepted and not used: the node learns its device from the homeserver (whoami) for its token.",
      ),
    /** The account's recovery key (`dagbot crypto setup` wrote it), to cross-sign this node's device. */
    recovery_key: z
      .string()
      .min(1, { error: "must not be empty" })
      .optional()
      .describe(
        "The account's recovery key, which `dagbot crypto setup` wrote, to cross-sign this node's device (DAGBOT_RECOVERY_KEY); better given as a file.",
      ),
    /** Read and removed by the loader before validation; listed here for unknown-key hints only. */
    recovery_key_file: z
      .string()
      .optional()
      .describe("An owner-only file holding the recovery key (or DAGBOT_RECOVERY_KEY_FILE)."),
    rooms: uniqueList(roomId)
      .min(1, { error: "must list at least one room id" })
      .describe('The only rooms this node joins and acts in (room ids like "!abc:example.org").'),
    command_window: duration(1)
      .prefault("1h")
      .describe(
        "Commands older than this when a node first sees them are ignored, never replayed. All nodes of a room should use the same.",
      ),
    decrypt_grace: duration(1)
      .prefault("15s")
      .describe(
        "How long an event not decrypted yet is retried before it counts as undecryptable and its sender is asked to re-send.",
      ),
    fleet: uniqueList(userId)
      .prefault([])
      .describe("The other nodes' bot accounts, when they are not one: their events are never commands."),
    encryption: z
      .boolean()
      .prefault(true)
      .describe("Read and answer in encrypted rooms; false: an encrypted room gets one notice."),
  }),
);

const permissionsSchema = z.strictObject({
  power_level: z
    .int()
    .min(0)
    .max(100)
    .prefault(50)
    .describe(
      "The room power level that makes a member an operator (publish, confirm, reject, cancel, retry, cap).",
    ),
  allow: uniqueList(userId).prefault([]).describe("Users who are operators whatever their power level."),
  two_person_rule: z
    .boolean()
    .prefault(false)
    .describe("Nobody may confirm a run they published, and an admin's policy change needs a second admin."),
  auto_confirm: uniqueList(userId)
    .prefault([])
    .describe("Publishers whose runs start without a confirmation step."),
  hook_auto_confirm: uniqueList(id)
    .prefault([])
    .describe("Webhooks (hook ids) whose deliveries start runs without a confirmation step."),
  logs: z
    .enum(["operators", "anyone"])
    .prefault("operators")
    .describe('Who may read task output with `logs`: "operators" or "anyone".'),
});

/** The default task lease: a store outage of up to 45 s stops no action at the other defaults. */
const DEFAULT_TASK_TTL = "60s";

const leaseSchema = z
  .strictObject({
    ttl: duration(1)
      .prefault("10s")
      .describe("The room lease: how long a leader holds a room without renewing it."),
    renew_every: duration(1)
      .prefault("3s")
      .describe(
        "How often a leader renews the room lease and a node beats its heartbeat and renews its task leases.",
      ),
    acquire_every: duration(1)
      .prefault("1s")
      .describe("A follower's retry period when it cannot know the holder's expiry."),
    // Default: a tenth of ttl (defaultMarginMs).
    margin: duration(0)
      .optional()
      .describe(
        "The room lease's margin: a leader steps down this long before its lease could expire (default: a tenth of `ttl`).",
      ),
    // The task lease, longer than the room's: a store outage shorter than what it leaves
    // (taskOutageBoundMs) stops no action, while a leader still steps down within ttl.
    task_ttl: duration(1)
      .prefault(DEFAULT_TASK_TTL)
      .describe(
        "The task lease: how long the store keeps a worker's claim after its last renewal, and so bounds the store outages that stop no action.",
      ),
    // Default: a tenth of task_ttl.
    task_margin: duration(0)
      .optional()
      .describe(
        "How long before its task lease could expire a worker's action must be gone (default: a tenth of `task_ttl`).",
      ),
  })
  .superRefine((lease, ctx) => {
    if (lease.renew_every >= lease.ttl) {
      ctx.addIssue({ code: "custom", path: ["renew_every"], message: "must be shorter than lease.ttl" });
    } else if (lease.renew_every + marginOf(lease) >= lease.ttl) {
      ctx.addIssue({
        code: "custom",
        path: ["margin"],
        message: "lease.renew_every + lease.margin must be shorter than lease.ttl",
      });
    } else if (lease.renew_every + taskMarginOf(lease) >= lease.task_ttl) {
      ctx.addIssue({
        code: "custom",
        path: ["task_ttl"],
        message: "lease.renew_every + lease.task_margin must be shorter than lease.task_ttl",
      });
    }
  });

function marginOf(lease: { ttl: number; margin?: number | undefined }): number {
  return lease.margin ?? defaultMarginMs(lease.ttl);
}

function taskMarginOf(lease: { task_ttl: number; task_margin?: number | undefined }): number {
  return lease.task_margin ?? defaultMarginMs(lease.task_ttl);
}

const limitsSchema = z.strictObject({
  global_cap: z
    .int()
    .min(1)
    .max(100_000)
    .prefault(16)
    .describe(
      "The room's initial cap on active (queued, running or canceling) tasks, set by the first node in the room; then `cap` changes it.",
    ),
  confirm_timeout: duration(1)
    .prefault("1h")
    .describe("A pending run expires when nobody confirms it within this time."),
});

const retentionSchema = z
  .strictObject({
    finished: duration(1, MAX_RETENTION_MS)
      .prefault("7d")
      .describe(
        "Runs that ended, with their tasks, events and messages, and commands handled and answered, are forgotten this long after; at least `matrix.command_window` plus 1h.",
      ),
    // Default: 30s, or three heartbeats (3 × lease.renew_every) when that is longer.
    node_gone_after: duration(1)
      .optional()
      .describe(
        "A node whose last heartbeat is older is shown as gone (default: 30s, or 3 \u00d7 `lease.renew_every` when longer).",
      ),
    forget_nodes_after: duration(1, MAX_RETENTION_MS)
      .prefault("1d")
      .describe("A node silent this long is dropped from the node list."),
    idempotency_keys: duration(1, MAX_RETENTION_MS)
      .prefault("30d")
      .describe(
        "HTTP Idempotency-Keys with their first answer are forgotten this long after (at least `finished`).",
      ),
  })
  .superRefine((r, ctx) => {
    if (r.node_gone_after !== undefined && r.forget_nodes_after < r.node_gone_after) {
      ctx.addIssue({
        code: "custom",
        path: ["forget_nodes_after"],
        message: "must be at least retention.node_gone_after",
      });
    }
    if (r.idempotency_keys < r.finished) {
      ctx.addIssue({
        code: "custom",
        path: ["idempotency_keys"],
        message: "must be at least retention.finished (a key must outlive the command it answered)",
      });
    }
  });

const edgeSchema = section(() =>
  z.strictObject({
    cores: z
      .array(
        z
          .url({ protocol: /^https?$/, error: 'must be an http(s) URL like "http://10.0.0.1:8080"' })
          .transform((u) => u.replace(/\/+$/, "")),
      )
      .min(1, { error: "must name at least one core node" })
      .max(100)
      .describe(
        "The core nodes' HTTP API URLs, tried in this order; the edge moves to the next when one fails.",
      ),
    token_file: z
      .string()
      .min(1)
      .describe(
        'An owner-only file holding the edge token (a core\'s `[[http.tokens]]` of level "edge" naming this node).',
      ),
    rooms: uniqueList(z.string().min(1))
      .min(1)
      .optional()
      .describe("The rooms whose tasks this edge node runs (default: the room `local`)."),
    request_timeout: duration(100)
      .prefault("10s")
      .describe("How long one request to a core may take before the next core is tried."),
  }),
);

const httpSchema = section(() =>
  z
    .strictObject({
      listen: z
        .string()
        .regex(LISTEN, { error: 'must be HOST:PORT, like "127.0.0.1:8080"' })
        .refine((text) => Number(LISTEN.exec(text)?.[2] ?? 0) <= 65_535, {
          error: "the port must be at most 65535",
        })
        .describe('HOST:PORT to listen on, like "127.0.0.1:8080"; put TLS in front of it beyond localhost.'),
      tokens: z
        .array(
          z.strictObject({
            name: z
              .string()
              .regex(ID, { error: ID_HINT })
              .describe("Who holds it: its commands are sent as `http:<name>`."),
            sha256: z
              .string()
              .regex(/^[0-9a-f]{64}$/, {
                error:
                  "must be the token's SHA-256 as 64 lower-case hex digits (printf %s TOKEN | sha256sum)",
              })
              .describe(
                "The token's SHA-256 as 64 lower-case hex digits (`printf %s TOKEN | sha256sum`); the config never holds the token.",
              ),
            level: z
              .enum(["read", "operate", "edge"], { error: 'must be "read", "operate" or "edge"' })
              .describe(
                '"read" (the GET routes and the event stream), "operate" (the writes too) or "edge" (only the /v1/edge/ routes, for the node it names).',
              ),
            node: id
              .optional()
              .describe(
                'An edge token\'s node id (required with level = "edge", refused otherwise): the only node it may claim, renew and finish tasks for.',
              ),
            // Checked against the node's rooms below (the file's top level knows them).
            rooms: uniqueList(z.string().min(1))
              .min(1, { error: "must name at least one room (leave rooms out for every room)" })
              .optional()
              .describe(
                "Only these rooms of the node (default: all of them); another room is answered as one the node does not serve.",
              ),
            labels: uniqueList(z.string().min(1))
              .optional()
              .describe(
                "An edge token's labels: a claim or heartbeat naming another label is refused (403); default: any label.",
              ),
            actions: uniqueList(z.string().min(1))
              .optional()
              .describe(
                "An edge token's actions: a claim or heartbeat naming another action is refused (403); default: any action.",
              ),
          }),
        )
        .min(1, { error: "must hold at least one token" })
        .superRefine((tokens, ctx) => {
          const seen = new Set<string>();
          tokens.forEach((t, i) => {
            if (seen.has(t.name))
              ctx.addIssue({ code: "custom", path: [i, "name"], message: "is used twice" });
            seen.add(t.name);
            if (t.level === "edge" && t.node === undefined)
              ctx.addIssue({ code: "custom", path: [i, "node"], message: 'required with level = "edge"' });
            if (t.level !== "edge" && t.node !== undefined)
              ctx.addIssue({ code: "custom", path: [i, "node"], message: "only an edge token names a node" });
            for (const key of ["labels", "actions"] as const)
              if (t.level !== "edge" && t[key] !== undefined)
                ctx.addIssue({ code: "custom", path: [i, key], message: `only an edge token names ${key}` });
          });
        })
        .describe("The bearer tokens (`[[http.tokens]]`), at least one."),
      health: z
        .enum(["open", "token"], { error: 'must be "open" or "token"' })
        .prefault("open")
        .describe('Whether /healthz and /readyz answer without a token ("open") or need one ("token").'),
      metrics: z
        .enum(["open", "token"], { error: 'must be "open" or "token"' })
        .prefault("token")
        .describe('Whether /metrics answers without a token ("open") or needs one ("token").'),
      body_limit: byteSize
        .prefault("256KiB")
        .describe("The largest request body; larger ones are 413 before they are parsed."),
      edge_output_limit: byteSize
        .optional()
        .meta({ shownDefault: "the largest `output_limit` of this node's actions , at least 64KiB" })
        .describe(
          "The most output an edge's finish may carry; its body may be 6 times that (JSON-escaped) and 1MiB more, larger ones are 413. Set it to the edges' largest `output_limit`; an edge over it keeps the tail that fits.",
        ),
      sse_buffer: byteSize
        .prefault("1MiB")
        .describe("Unread event-stream bytes before a slow client is dropped (told to resume)."),
      command_timeout: duration(1)
        .prefault("30s")
        .describe("How long a write waits for the room's leader before answering 504."),
      heartbeat: duration(100)
        .prefault("15s")
        .describe("How often an idle event stream gets a comment line."),
      max_streams: z
        .number()
        .int()
        .min(1)
        .max(10_000)
        .prefault(200)
        .describe("Event streams at once; one more is 503."),
      // Each connection costs a socket and some memory; the cap keeps a flood of idle or slow clients
      // from taking the node's descriptors (the event streams count too, hence above max_streams).
      max_connections: z
        .number()
        .int()
        .min(2)
        .max(100_000)
        .prefault(512)
        .describe(
          "Open connections at once, streams included (so more than `max_streams`); one more is closed as soon as it is accepted.",
        ),
      header_timeout: duration(100)
        .prefault("10s")
        .describe("How long a client may take to send a request's headers (then 408)."),
      request_timeout: duration(100)
        .prefault("30s")
        .describe("How long a client may take to send a whole request (at least `header_timeout`)."),
      keep_alive_timeout: duration(100)
        .prefault("5s")
        .describe(
          "How long an idle kept-alive connection stays open; behind a proxy that keeps connections, set it above the proxy's idle timeout.",
        ),
    })
    .superRefine((http, ctx) => {
      if (http.max_connections <= http.max_streams) {
        ctx.addIssue({
          code: "custom",
          path: ["max_connections"],
          message: "must be larger than http.max_streams (every event stream holds a connection)",
        });
      }
      if (http.header_timeout > http.request_timeout) {
        ctx.addIssue({
          code: "custom",
          path: ["header_timeout"],
          message: "must be at most http.request_timeout (the headers are part of the request)",
        });
      }
    }),
);

/** A header name as a hook names one (compared in lower case, as Node gives them). */
const headerName = z
  .string()
  .regex(/^[A-Za-z0-9-]{1,64}$/, { error: "must be a header name (letters, digits, -)" })
  .transform((h) => h.toLowerCase());

const jsonPointer = z.string().superRefine((text, ctx) => {
  const problem = pointerProblem(text);
  if (problem !== null) ctx.addIssue({ code: "custom", message: problem });
});

const webhookSchema = section(() =>
  z
    .strictObject({
      id: id.describe("The hook's id: POST /v1/hooks/<id>; its runs are started by `hook:<id>`."),
      /** The room it starts runs in; default: the node's only room. */
      room: z
        .string()
        .min(1)
        .optional()
        .describe("The room it starts runs in (required when the node serves several)."),
      dag: id.describe("The published DAG of the room it runs."),
      kind: z
        .enum(WEBHOOK_KINDS, { error: 'must be "github", "gitlab", "hmac" or "bearer"' })
        .describe('How a delivery proves itself: "github", "gitlab", "hmac" or "bearer".'),
      /** Read by the loader after validation (an owner-only file, like store_file). */
      secret_file: z
        .string()
        .min(1)
        .optional()
        .describe("An owner-only file holding the hook's secret (this or `secret_env`)."),
      /** The name of an environment variable holding the secret (taken out of the node's environment). */
      secret_env: z
        .string()
        .regex(ENV_NAME, { error: "must be an environment variable's name" })
        .optional()
        .describe(
          "An environment variable holding the hook's secret, taken out of the node's environment (this or `secret_file`).",
        ),
      params: z
        .record(
          z.string().regex(ARG_NAME, { error: "parameter names are letters, digits and _" }),
          jsonPointer,
        )
        .prefault({})
        .describe("Parameter name = JSON pointer into the payload (at most 32)."),
      filter: z
        .array(
          z.strictObject({
            pointer: jsonPointer.describe("A JSON pointer into the payload."),
            pattern: z
              .string()
              .max(1000)
              .superRefine((text, ctx) => {
                const compiled = compileParamPattern(text);
                if (typeof compiled === "string")
                  ctx.addIssue({ code: "custom", message: `is not a usable RE2 pattern: it ${compiled}` });
              })
              .describe("The RE2 pattern the value must match."),
          }),
        )
        .max(16)
        .prefault([])
        .describe(
          "Conditions that must all match, or the delivery is ignored (202): `{ pointer, pattern }`, at most 16.",
        ),
      events: uniqueList(z.string().min(1).max(100))
        .min(1)
        .optional()
        .describe("Event types taken (from the kind's event header); default: any."),
      link: z
        .array(jsonPointer)
        .min(1)
        .max(8)
        .optional()
        .describe(
          "JSON pointers to the link shown on the run's card, the first present wins (default: the kind's usual fields).",
        ),
      delivery_from: z
        .array(jsonPointer)
        .min(1)
        .max(8)
        .optional()
        .describe("JSON pointers that name a delivery by content when the sender sends no delivery id."),
      body_limit: byteSize.prefault("1MiB").describe("Larger deliveries are 413."),
      replay_window: duration(1_000)
        .prefault("5m")
        .describe("hmac: how far a delivery's timestamp may be from the node's clock."),
      timestamp_header: headerName
        .prefault("X-Dagbot-Timestamp")
        .describe("hmac: the header carrying the Unix timestamp."),
      signature_header: headerName
        .prefault("X-Dagbot-Signature")
        .describe("hmac: the header carrying the signature."),
      delivery_header: headerName
        .prefault("X-Dagbot-Delivery")
        .describe("hmac and bearer: the header carrying the delivery id."),
      event_header: headerName
        .optional()
        .describe("hmac and bearer: the header carrying the event type (default: none)."),
    })
    .superRefine((hook, ctx) => {
      if ((hook.secret_file === undefined) === (hook.secret_env === undefined))
        ctx.addIssue({
          code: "custom",
          path: ["secret_file"],
          message: "set secret_file or secret_env (one of them)",
        });
      if (Object.keys(hook.params).length > 32)
        ctx.addIssue({ code: "custom", path: ["params"], message: "at most 32 parameters" });
    }),
);

const storeSchema = z.string().transform((text, ctx) => {
  const parsed = parseStoreLocation(text);
  if (parsed.ok) return parsed.store;
  ctx.addIssue({ code: "custom", message: parsed.message });
  return z.NEVER;
});

/**
 * A section a file may leave out ([matrix], [http], [edge], [[webhooks]]): its schema is built at
 * its first use, so a file without it (a `dagbot run` config has none of them) never builds it —
 * zod's schemas for them were a fifth of a one-task `dagbot run`'s start (bench/README.md). `built`
 * says whether it was.
 */
function section<T>(make: () => T): { (): T; readonly built: boolean } {
  let made: T | undefined;
  const get = (): T => (made ??= make());
  return Object.defineProperty(get, "built", { get: () => made !== undefined }) as {
    (): T;
    readonly built: boolean;
  };
}

/** The sections a file may leave out, by their key in the file. */
export const OPTIONAL_SECTIONS = {
  matrix: matrixSchema,
  http: httpSchema,
  edge: edgeSchema,
  webhooks: webhookSchema,
} as const;
type OptionalSection = keyof typeof OPTIONAL_SECTIONS;
type Sections = { readonly [K in OptionalSection]: ReturnType<(typeof OPTIONAL_SECTIONS)[K]> };

/**
 * The raw file's schema (snake_case keys as written, strict at every level), made from the schemas
 * of its optional sections: the real ones, or for a section a file leaves out a stand-in that is
 * never run (nodeConfigSchemaFor).
 */
function fileSchema(sections: Sections) {
  return z
    .strictObject({
      node_id: id.meta({
        description: "This node's id, unique among the store's nodes (DAGBOT_NODE_ID).",
        shownDefault: "from the host name",
      }),
      labels: uniqueList(id)
        .prefault([])
        .describe("Labels a task may ask for (`on = { labels = [...] }` in a DAG)."),
      capacity: z.int().min(1).max(1024).prefault(2).describe("How many tasks this node runs at once."),
      store: storeSchema
        .prefault(DEFAULT_STORE)
        .describe(
          'The shared store: "sqlite:PATH" or a postgres:// URL (DAGBOT_STORE). Relative paths are relative to the folder dagbot starts in.',
        ),
      store_pool_size: z
        .int()
        .min(1)
        .max(100)
        .prefault(DEFAULT_STORE_POOL_SIZE)
        .describe(
          "Connections in a PostgreSQL store's pool, shared by the node's rooms and loops (plus one for its room leases and heartbeat, the lease lane, and one LISTEN connection: docs/operations.md, \"Running many nodes\").",
        ),
      store_pooler: z
        .enum(["none", "transaction"])
        .prefault("none")
        .describe(
          'How a PostgreSQL store is reached: "none" directly (or through a session-mode pooler), "transaction" through a transaction-mode pooler such as PgBouncer: no LISTEN connection (other nodes\' changes are seen within 0.5 s, by polling), no named prepared statements, no startup options (docs/operations.md, "Behind a connection pooler"). Ignored for SQLite.',
        ),
      sqlite_synchronous: z
        .enum(["full", "normal"])
        .prefault("full")
        .describe(
          'A SQLite store\'s durability: "full" syncs every commit (survives a power cut), "normal" only at WAL checkpoints (survives a killed process); ignored for PostgreSQL. All nodes on one file should say the same.',
        ),
      store_migrate: z
        .enum(STORE_MIGRATE)
        .prefault("when_alone")
        .describe(
          'When a node that finds its store at an older schema migrates it: "when_alone" only if no other node has a live heartbeat (else it refuses to start and names the command to run), "always", or "never" (only `dagbot migrate` does).',
        ),
      /** Read and removed by the loader before validation; listed here for unknown-key hints only. */
      store_file: z
        .string()
        .optional()
        .describe(
          "An owner-only file holding the store location (its password with it), instead of `store`.",
        ),
      dag_library: z
        .string()
        .min(1)
        .optional()
        .describe("A folder of DAG files that `!dag publish <name>` reads."),
      /** The user every action runs as unless it names its own run_as: a user name or "UID:GID". */
      run_actions_as: z
        .string()
        .min(1)
        .optional()
        .describe(
          'The user every action runs as unless it names its own `run_as`: a user name or "UID:GID".',
        ),
      matrix: sections.matrix
        .optional()
        .describe(
          "The Matrix account and rooms; without it the node is engine-only and serves the room `local`.",
        ),
      permissions: permissionsSchema
        .prefault({})
        .describe(
          "Who may do what in the node's rooms; the room's stored policy wins, and a node whose stated settings disagree with it does not lead.",
        ),
      actions: z
        .record(z.string().regex(ID, { error: `action names ${ID_HINT}` }), actionSchema)
        .prefault({})
        .describe("The only programs a task can run, by name (`[actions.NAME]`)."),
      lease: leaseSchema
        .prefault({})
        .describe("The room lease (leadership) and the task lease (a worker's claim)."),
      limits: limitsSchema.prefault({}).describe("The room's cap and how long a run waits for confirmation."),
      retention: retentionSchema.prefault({}).describe("What the leader forgets, and when."),
      http: sections.http.optional().describe("The HTTP API; off unless present."),
      edge: sections.edge
        .optional()
        .describe(
          'Makes this an edge node: no store connection; it runs tasks through the core nodes\' HTTP API (docs/operations.md, "Edge nodes").',
        ),
      webhooks: z
        .array(sections.webhooks)
        .max(100)
        .prefault([])
        .describe(
          "Endpoints on the HTTP API that start runs from signed deliveries (`[[webhooks]]`, at most 100).",
        ),
      log_level: z.enum(LOG_LEVELS).prefault("info").describe("How much the node logs (DAGBOT_LOG_LEVEL)."),
      stop_grace: duration(0)
        .prefault("8s")
        .describe(
          "How long a graceful stop waits for running actions before it kills them; keep it shorter than the supervisor's own grace period.",
        ),
    })
    .superRefine((file, ctx) => {
      // An inbox row is what makes a replayed event a duplicate; intake takes events up to the
      // command window old (by origin_server_ts, on its own clock), so a row pruned sooner could be
      // inserted and handled again.
      const window = file.matrix?.command_window;
      if (window !== undefined && file.retention.finished < window + RETENTION_WINDOW_MARGIN_MS) {
        ctx.addIssue({
          code: "custom",
          path: ["retention", "finished"],
          message: `must be at least matrix.command_window plus 1h (${Math.ceil(
            (window + RETENTION_WINDOW_MARGIN_MS) / 60_000,
          )}m here): a command forgotten sooner could be handled twice`,
        });
      }
      // An edge node is a worker and a heartbeat only: what needs the store or a homeserver is not its.
      if (file.edge !== undefined)
        for (const key of ["matrix", "http", "dag_library"] as const)
          if (file[key] !== undefined)
            ctx.addIssue({
              code: "custom",
              path: [key],
              message:
                "an edge node holds no store: it has no chat, HTTP API or DAG library (leave it out or drop [edge])",
            });
      // A token limited to rooms names rooms of this node: a typo would otherwise lock it out silently.
      const rooms = file.matrix?.rooms ?? [LOCAL_ROOM_ID];
      file.http?.tokens.forEach((token, i) => {
        token.rooms?.forEach((room, j) => {
          if (!rooms.includes(room)) {
            ctx.addIssue({
              code: "custom",
              path: ["http", "tokens", i, "rooms", j],
              message: `is not one of this node's rooms (${rooms.join(", ")})`,
            });
          }
        });
      });
      // Webhooks are served on the HTTP API, in one of the node's rooms, each under its own id.
      const hookIds = new Set<string>();
      file.webhooks.forEach((hook, i) => {
        if (file.http === undefined)
          ctx.addIssue({
            code: "custom",
            path: ["webhooks", i],
            message: "needs an [http] section: hooks are served on the HTTP API",
          });
        if (hook.room !== undefined && !rooms.includes(hook.room))
          ctx.addIssue({
            code: "custom",
            path: ["webhooks", i, "room"],
            message: `is not one of this node's rooms (${rooms.join(", ")})`,
          });
        if (hook.room === undefined && rooms.length > 1)
          ctx.addIssue({
            code: "custom",
            path: ["webhooks", i, "room"],
            message: "required: this node serves several rooms",
          });
        if (hookIds.has(hook.id))
          ctx.addIssue({ code: "custom", path: ["webhooks", i, "id"], message: "is used twice" });
        hookIds.add(hook.id);
      });
      // A node beats once per lease.renew_every: a shorter limit would show live nodes as gone.
      const gone = file.retention.node_gone_after;
      if (gone !== undefined && gone <= 2 * file.lease.renew_every) {
        ctx.addIssue({
          code: "custom",
          path: ["retention", "node_gone_after"],
          message: "must be longer than two heartbeats (2 × lease.renew_every)",
        });
      }
      // Each action must be stoppable within its claim: the worker's timing relation (claim-deadline.ts).
      const timings = {
        ttlMs: file.lease.task_ttl,
        renewEveryMs: file.lease.renew_every,
        marginMs: taskMarginOf(file.lease),
      };
      if (timings.renewEveryMs + timings.marginMs >= timings.ttlMs) return; // reported under lease
      for (const [name, action] of Object.entries(file.actions)) {
        const problem = claimTimingProblem(timings, action.kill_grace);
        if (problem !== null)
          ctx.addIssue({ code: "custom", path: ["actions", name, "kill_grace"], message: problem });
      }
    });
}

/** The schema of a file with every section: the reference's (config-reference.ts) and the hints'. */
export const nodeConfigFileSchema = section(() =>
  fileSchema({
    matrix: matrixSchema(),
    http: httpSchema(),
    edge: edgeSchema(),
    webhooks: webhookSchema(),
  }),
);

// A stand-in for a section the file leaves out: an absent key never reaches it (it is optional, or
// an empty list); the schema of a file with the section is the same as with every section.
const ABSENT = z.never();
const forFiles = new Map<string, ReturnType<typeof nodeConfigFileSchema>>();

/**
 * The schema `doc` (the file with the environment and options applied) is checked with: every
 * section's own schema where `doc` has the section, else a stand-in, so only the sections it has
 * are built. It checks and gives exactly what nodeConfigFileSchema would.
 */
export function nodeConfigSchemaFor(
  doc: Readonly<Record<string, unknown>>,
): ReturnType<typeof nodeConfigFileSchema> {
  const present = (Object.keys(OPTIONAL_SECTIONS) as OptionalSection[]).filter((k) => doc[k] !== undefined);
  if (present.length === Object.keys(OPTIONAL_SECTIONS).length) return nodeConfigFileSchema();
  const key = present.join(",");
  let schema = forFiles.get(key);
  if (schema === undefined) {
    const pick = <K extends OptionalSection>(k: K): Sections[K] =>
      (present.includes(k) ? OPTIONAL_SECTIONS[k]() : ABSENT) as Sections[K];
    schema = fileSchema({
      matrix: pick("matrix"),
      http: pick("http"),
      edge: pick("edge"),
      webhooks: pick("webhooks"),
    });
    forFiles.set(key, schema);
  }
  return schema;
}

export type NodeConfigFile = z.output<ReturnType<typeof nodeConfigFileSchema>>;

/**
 * The keys a table at `path` accepts, for "unknown key" hints; null where any key goes (maps) or the
 * path is not a table of the schema.
 */
export function knownKeysAt(path: readonly PropertyKey[]): string[] | null {
  const [first, second, third, fourth] = path;
  const sections: Record<string, () => z.ZodObject> = {
    matrix: matrixSchema,
    permissions: () => permissionsSchema,
    lease: () => leaseSchema,
    limits: () => limitsSchema,
    retention: () => retentionSchema,
    http: httpSchema,
    edge: edgeSchema,
  };
  if (path.length === 0) return Object.keys(nodeConfigFileSchema().shape);
  if (path.length === 1 && typeof first === "string" && sections[first] !== undefined) {
    return Object.keys(sections[first]().shape);
  }
  if (first === "actions" && path.length === 2) return Object.keys(actionSchema.shape);
  if (first === "http" && second === "tokens" && path.length === 3)
    return ["name", "sha256", "level", "rooms", "node"];
  if (first === "webhooks" && path.length === 2) return Object.keys(webhookSchema().shape);
  if (first === "webhooks" && third === "filter" && path.length === 4) return ["pointer", "pattern"];
  if (
    first === "actions" &&
    third === "args" &&
    path.length === 4 &&
    typeof second === "string" &&
    fourth !== undefined
  ) {
    return ["pattern", "allow_leading_dash"];
  }
  return null;
}

/** Turns a validated file into the NodeConfig the rest of the node reads. */
export function toNodeConfig(
  file: NodeConfigFile,
  statedPermissions: readonly string[] = [],
  users: ReadonlyMap<string, { uid: number; gid: number }> = new Map(),
): NodeConfig {
  const actions: Record<string, ActionDefinition> = {};
  for (const [name, action] of Object.entries(file.actions)) {
    actions[name] = {
      name,
      argv: action.argv,
      args: Object.fromEntries(
        Object.entries(action.args).map(([arg, spec]) => [
          arg,
          { pattern: spec.pattern, allowLeadingDash: spec.allow_leading_dash },
        ]),
      ),
      cwd: action.cwd ?? null,
      env: action.env,
      timeoutMs: action.timeout,
      outputLimitBytes: action.output_limit,
      killGraceMs: action.kill_grace,
      runAs: resolveRunAs(action.run_as ?? file.run_actions_as, users),
    };
  }
  const matrix: MatrixConfig | null =
    file.matrix === undefined
      ? null
      : {
          homeserverUrl: file.matrix.homeserver_url,
          userId: file.matrix.user_id,
          accessToken: file.matrix.access_token,
          deviceId: file.matrix.device_id ?? null,
          rooms: file.matrix.rooms,
          commandWindowMs: file.matrix.command_window,
          decryptGraceMs: file.matrix.decrypt_grace,
          fleet: file.matrix.fleet.filter((id) => id !== file.matrix?.user_id),
          encryption: file.matrix.encryption,
          recoveryKey: file.matrix.recovery_key ?? null,
        };
  const listen = file.http === undefined ? null : LISTEN.exec(file.http.listen);
  return {
    nodeId: file.node_id,
    labels: file.labels,
    capacity: file.capacity,
    store: file.store,
    storePoolSize: file.store_pool_size,
    storePooler: file.store_pooler,
    sqliteSynchronous: file.sqlite_synchronous,
    storeMigrate: file.store_migrate,
    dagLibrary: file.dag_library ?? null,
    matrix,
    rooms: matrix !== null ? matrix.rooms : (file.edge?.rooms ?? [LOCAL_ROOM_ID]),
    permissions: {
      powerLevel: file.permissions.power_level,
      allow: file.permissions.allow,
      twoPersonRule: file.permissions.two_person_rule,
      autoConfirm: file.permissions.auto_confirm,
      hookAutoConfirm: file.permissions.hook_auto_confirm,
      logs: file.permissions.logs,
      stated: (
        ["power_level", "allow", "two_person_rule", "auto_confirm", "hook_auto_confirm", "logs"] as const
      ).filter((k) => statedPermissions.includes(k)),
    },
    actions,
    lease: {
      ttlMs: file.lease.ttl,
      renewEveryMs: file.lease.renew_every,
      acquireEveryMs: file.lease.acquire_every,
      marginMs: marginOf(file.lease),
      taskTtlMs: file.lease.task_ttl,
      taskMarginMs: taskMarginOf(file.lease),
    },
    limits: { globalCap: file.limits.global_cap, confirmTimeoutMs: file.limits.confirm_timeout },
    retention: {
      finishedMs: file.retention.finished,
      nodeGoneAfterMs: file.retention.node_gone_after ?? Math.max(30_000, 3 * file.lease.renew_every),
      forgetNodesAfterMs: file.retention.forget_nodes_after,
      forgetKeysAfterMs: file.retention.idempotency_keys,
    },
    http:
      file.http === undefined || listen === null
        ? null
        : {
            listen: file.http.listen,
            host: (listen[1] ?? "").replace(/^\[|\]$/g, ""),
            port: Number(listen[2]),
            tokens: file.http.tokens.map((t) => ({
              name: t.name,
              sha256: t.sha256,
              level: t.level,
              ...(t.rooms === undefined ? {} : { rooms: t.rooms }),
              ...(t.node === undefined ? {} : { node: t.node }),
              ...(t.labels === undefined ? {} : { labels: t.labels }),
              ...(t.actions === undefined ? {} : { actions: t.actions }),
            })),
            openHealth: file.http.health === "open",
            openMetrics: file.http.metrics === "open",
            bodyLimitBytes: file.http.body_limit,
            edgeOutputLimitBytes:
              file.http.edge_output_limit ??
              Math.max(DEFAULT_OUTPUT_LIMIT, ...Object.values(file.actions).map((a) => a.output_limit)),
            sseBufferBytes: file.http.sse_buffer,
            commandTimeoutMs: file.http.command_timeout,
            heartbeatMs: file.http.heartbeat,
            maxStreams: file.http.max_streams,
            maxConnections: file.http.max_connections,
            headerTimeoutMs: file.http.header_timeout,
            requestTimeoutMs: file.http.request_timeout,
            keepAliveTimeoutMs: file.http.keep_alive_timeout,
          },
    edge:
      file.edge === undefined
        ? null
        : {
            cores: file.edge.cores,
            tokenFile: file.edge.token_file,
            // Read by the loader (loadConfig) once the file is valid; never part of the file.
            token: "",
            requestTimeoutMs: file.edge.request_timeout,
          },
    webhooks: file.webhooks.map((h) => ({
      id: h.id,
      room: h.room ?? (matrix === null ? LOCAL_ROOM_ID : (matrix.rooms[0] ?? LOCAL_ROOM_ID)),
      dag: h.dag,
      kind: h.kind,
      params: h.params,
      filters: h.filter,
      events: h.events ?? null,
      link: h.link ?? null,
      deliveryFrom: h.delivery_from ?? null,
      bodyLimitBytes: h.body_limit,
      replayWindowMs: h.replay_window,
      timestampHeader: h.timestamp_header,
      signatureHeader: h.signature_header,
      deliveryHeader: h.delivery_header,
      eventHeader: h.event_header ?? null,
      // Read by the loader (loadConfig) once the file is valid; never part of the file.
      secret: "",
      secretFrom: h.secret_file !== undefined ? { file: h.secret_file } : { env: h.secret_env ?? "" },
    })),
    logLevel: file.log_level,
    stopGraceMs: file.stop_grace,
  };
}

/** "UID:GID" as numbers; a name through the users the loader read from the system. */
export function resolveRunAs(
  spec: string | undefined,
  users: ReadonlyMap<string, { uid: number; gid: number }>,
): { uid: number; gid: number } | null {
  if (spec === undefined) return null;
  const numeric = /^(\d{1,10}):(\d{1,10})$/.exec(spec);
  if (numeric !== null) return { uid: Number(numeric[1]), gid: Number(numeric[2]) };
  return users.get(spec) ?? null;
}
