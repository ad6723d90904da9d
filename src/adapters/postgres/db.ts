/**
 * The PostgreSQL connection discipline: one pool of prepared statements, short transactions, a
 * connection of its own for the node's lease statements (Lane), leader fencing by a shared lock on
 * the room's lease row, the event log appended last, and the notifications of commits (this
 * Store's own listeners at once, other Stores through one batched NOTIFY transaction after the
 * commits: docs/architecture.md §8, "Wake-ups"). Behind a transaction-mode pooler no statement is
 * named and no setting outlives its transaction.
 */
import { createHash } from "node:crypto";
import pg from "pg";
import { FLEET_PROTOCOL } from "../../domain/release.js";
import type { ChangeTopic } from "../../ports/store.js";
import { HOT_TOPICS } from "../../ports/store.js";
import type { LogLine } from "../store-common/records.js";
import { clean, LOG_LOCK, mapError, NOW, quoteIdent } from "./sql.js";

export type Row = Record<string, unknown>;

/**
 * Which connections a statement takes. "pool": the pool every statement shares, where a statement
 * waits in line for a free connection behind claims, finishes and leaders' transactions. "lease":
 * the lease lane, one connection of its own for what keeps the node's leadership and liveness (its
 * room leases and its own heartbeat), so a renewal never waits behind a busy pool past the lease's
 * TTL and loses the room for nothing (docs/operations.md, "Running many nodes"). Its statements
 * are single statements, each its own transaction, so it holds no session state and works through a
 * transaction-mode pooler as the pool does. (SQLite has no lane: one connection, its writes short
 * and serialised by the file.)
 */
export type Lane = "pool" | "lease";

/** Anything that runs a query: the pool (one statement, autocommit) or a client inside a transaction. */
export interface Queryable {
  query<R extends pg.QueryResultRow = Row>(text: string, values?: unknown[]): Promise<pg.QueryResult<R>>;
}

// BIGINT and NUMERIC come back as strings by default; every number we store fits in 2^53.
const types = {
  getTypeParser(oid: number, format?: "text" | "binary") {
    if (oid === 20 || oid === 1700) return (v: string) => Number(v);
    return pg.types.getTypeParser(oid, format);
  },
};

/**
 * How the Store reaches the server: "none" directly (or through a session-mode pooler), or
 * "transaction" through a transaction-mode pooler such as PgBouncer, where a server connection is
 * the Store's only for one transaction: no LISTEN, no named prepared statements, no startup options
 * and no setting that outlives a transaction (docs/operations.md, "Behind a connection pooler").
 */
export const POOLER_MODES = ["none", "transaction"] as const;
export type PoolerMode = (typeof POOLER_MODES)[number];

export interface PgOptions {
  url: string;
  poolSize: number;
  schema: string;
  clock: (() => number) | undefined;
  /** Default "none". */
  pooler?: PoolerMode;
  /**
   * How long the first commit of a batch waits for others before their one NOTIFY transaction goes
   * (default 0: the commits of the same turn of the event loop, then whatever commits while it is on
   * its way).
   */
  notifyWindowMs?: number;
}

/**
 * The server ends a session that sits idle inside a transaction this long. Our transactions send
 * their statements back to back, so only a frozen process (SIGSTOP, a paused VM) gets there; and a
 * frozen leader's transaction holds the lock its fence check took on the lease row (and the event
 * log's lock), which would stop every takeover until the process woke up.
 */
export const IDLE_IN_TRANSACTION_TIMEOUT_MS = 2_000;

/** The startup option that says a connection speaks this release's fleet protocol. */
export const FLEET_PROTOCOL_OPTION = `-c dagbot.protocol=${FLEET_PROTOCOL}`;

const literal = (s: string): string => `'${s.replaceAll("'", "''")}'`;

/**
 * In "transaction" pooler mode, the settings clientConfig gives a direct connection at startup,
 * made by the first statement of every transaction instead and gone at its end (set_config's
 * is_local): the schema, the idle-in-transaction limit, and the fleet protocol the store's fence
 * triggers read (migration 017-fleet-protocol-2.sql; docs/architecture.md §11).
 */
export function transactionSettings(o: Pick<PgOptions, "schema">): string {
  return `SELECT set_config('search_path', ${literal(quoteIdent(o.schema))}, true),
    set_config('idle_in_transaction_session_timeout', '${IDLE_IN_TRANSACTION_TIMEOUT_MS}', true),
    set_config('dagbot.protocol', '${FLEET_PROTOCOL}', true)`;
}

export function clientConfig(o: PgOptions): pg.ClientConfig {
  // node-postgres lets a URL's `options` parameter replace the config's: it is taken out of the URL
  // and goes first, so ours (later, so they win for the same setting) are never lost.
  let url = o.url;
  let theirs = "";
  try {
    const parsed = new URL(o.url);
    theirs = parsed.searchParams.get("options") ?? "";
    if (theirs !== "") {
      parsed.searchParams.delete("options");
      url = parsed.toString();
    }
  } catch {
    // Not a URL node-postgres parses as one either: left as it is.
  }
  if (o.pooler === "transaction")
    // A transaction-mode pooler refuses startup options (and hands the server connection to others
    // between transactions): each transaction makes its settings itself (transactionSettings).
    return {
      connectionString: url,
      types,
      ...(theirs === "" ? {} : { options: theirs }),
      application_name: "dagbot",
    };
  return {
    connectionString: url,
    types,
    // Every connection resolves our tables in the chosen schema, so one database can hold several stores.
    // dagbot.protocol: the fleet protocol this connection speaks, which the store's fence triggers
    // read (migrations 017-fleet-protocol-2.sql and 020-run-conditions.sql; docs/architecture.md
    // §11). An older release never sets it.
    options: [
      theirs,
      `-c search_path=${quoteIdent(o.schema)}`,
      `-c idle_in_transaction_session_timeout=${IDLE_IN_TRANSACTION_TIMEOUT_MS}`,
      FLEET_PROTOCOL_OPTION,
    ]
      .filter((x) => x !== "")
      .join(" "),
    application_name: "dagbot",
  };
}

/** The failing query reports a lost connection; the client's own "error" event must not crash the process. */
const ignoreLost = (): void => {};

/** A log line a write appends (its room is given alongside); seq and time are filled in when the transaction appends it. */
export type LogEntry = LogLine;

const names = new Map<string, string>();

/**
 * A named (prepared) statement: each connection parses and plans it once and then reuses the plan,
 * which for the claim's CTEs costs more than running it. The name is derived from the text.
 */
export function prepared(text: string, values: unknown[] = []): pg.QueryConfig {
  let name = names.get(text);
  if (name === undefined) {
    name = `dagbot_${createHash("sha1").update(text).digest("hex").slice(0, 20)}`;
    names.set(text, name);
  }
  return { name, text, values };
}

/** The channel of every change but the hot path's. */
export const CHANNEL = "dagbot";
/**
 * The hot path's channel (HOT_TOPICS: a claim, a finish, a scheduling step): LISTENed to only by
 * processes where someone wants those topics, so a follower's connection does not receive (and its
 * process parse) two notifications per task run anywhere (45–70 µs of node CPU each, per
 * listening node).
 */
export const HOT_CHANNEL = "dagbot_tasks";

/** The channel a payload (`topic:room…`) goes to. */
export function channelOf(payload: string): string {
  const at = payload.indexOf(":");
  const topic = at < 0 ? payload : payload.slice(0, at);
  return (HOT_TOPICS as readonly string[]).includes(topic) ? HOT_CHANNEL : CHANNEL;
}

/** What a write transaction collects and writes last: its log lines and the topics to notify. */
export interface Tx {
  readonly client: pg.PoolClient;
  /** A statement on the transaction's connection (prepared, unless behind a transaction-mode pooler). */
  query<R extends pg.QueryResultRow = Row>(text: string, values?: unknown[]): Promise<pg.QueryResult<R>>;
  /** The clock parameter ($1) of every statement in this transaction. */
  readonly clockParam: number | null;
  log(roomId: string, entry: LogEntry): void;
  touch(topic: ChangeTopic, roomId: string | null): void;
}

export class Db {
  readonly pool: pg.Pool;
  /** The lease lane (Lane): one connection, kept open between renewals so none waits for a connect. */
  readonly leaseLane: pg.Pool;
  /**
   * Hears this Store's own commits at once (its listeners need not wait for the NOTIFY round trip);
   * other Stores hear them through LISTEN.
   */
  onCommit: ((topic: ChangeTopic, roomId: string | null, nodes?: readonly string[]) => void) | undefined;
  /** Behind a transaction-mode pooler (PgOptions.pooler). */
  readonly pooler: boolean;
  /**
   * How many NOTIFY transactions this Store has sent: no write transaction notifies, so this is
   * the number of commits that took PostgreSQL's notify lock (postgresStoreStats).
   */
  notifyTransactions = 0;

  constructor(readonly options: PgOptions) {
    this.pooler = options.pooler === "transaction";
    this.pool = new pg.Pool({ ...clientConfig(options), max: options.poolSize });
    this.leaseLane = new pg.Pool({
      ...clientConfig(options),
      application_name: "dagbot-lease",
      max: 1,
      idleTimeoutMillis: 0,
    });
    // An idle client that loses its connection must not crash the process; the pool drops it.
    this.pool.on("error", () => {});
    this.leaseLane.on("error", () => {});
  }

  /** A statement's query config: named (prepared once per connection) unless behind a pooler. */
  statement(text: string, values: unknown[] = []): pg.QueryConfig {
    return this.pooler ? { text, values } : prepared(text, values);
  }

  /** What opens a transaction: BEGIN, and behind a pooler the connection's settings with it. */
  get begin(): string {
    return this.pooler ? `BEGIN; ${transactionSettings(this.options)}` : "BEGIN";
  }

  /**
   * A committed change: tell this Store's listeners now and other Stores right after, through one
   * NOTIFY transaction for everything committed meanwhile (docs/architecture.md §8, "Wake-ups").
   * No write transaction notifies: PostgreSQL serializes the commits of notifying transactions
   * under one database-wide lock held through the WAL flush, which capped a fleet at a few hundred
   * notifying commits a second and halved claim throughput at 8 workers. The cost: a crash between
   * the commit and this NOTIFY loses the wake-up, which the port allows (listeners also poll).
   */
  committed(topic: ChangeTopic, roomId: string | null, nodes?: readonly string[]): void {
    this.onCommit?.(topic, roomId, nodes);
    this.notifySoon([`${topic}:${roomId ?? ""}`, ...(nodes ?? [])].join("\n"));
  }

  /**
   * Send a NOTIFY payload soon, with the batch, and not to this Store's own listeners (they hear
   * it back through LISTEN, once).
   */
  notifySoon(payload: string): void {
    this.pendingNotify.add(payload);
    this.flushing ??= this.flushNotify().finally(() => {
      this.flushing = undefined;
    });
  }

  private readonly pendingNotify = new Set<string>();
  private flushing: Promise<void> | undefined;
  /** Where a failed NOTIFY goes (the Store's listener-error handler). */
  onNotifyError: (e: unknown) => void = () => {};

  private async flushNotify(): Promise<void> {
    const windowMs = this.options.notifyWindowMs ?? 0;
    for (;;) {
      // Let the commits of this tick (or of the window) join the batch: one NOTIFY transaction a
      // window at most, whatever commits meanwhile.
      await new Promise<void>((resolve) =>
        windowMs > 0 ? setTimeout(resolve, windowMs) : setImmediate(resolve),
      );
      if (this.pendingNotify.size === 0 || this.ended) return;
      const batch = [...this.pendingNotify];
      this.pendingNotify.clear();
      let client: pg.PoolClient | undefined;
      try {
        client = await this.pool.connect();
        client.on("error", ignoreLost);
        const c = client;
        this.notifyTransactions += 1;
        // One round trip; no WAL flush waited for while the notify lock is held. It writes no
        // data and names no table, so it needs none of a pooler's per-transaction settings.
        await c.query(
          `BEGIN; SET LOCAL synchronous_commit TO off;
           SELECT ${batch.map((t) => `pg_notify('${channelOf(t)}', ${c.escapeLiteral(t)})`).join(", ")}; COMMIT`,
        );
        client.off("error", ignoreLost);
        client.release();
      } catch (e) {
        client?.off("error", ignoreLost);
        client?.release(e instanceof Error ? e : new Error(String(e)));
        this.onNotifyError(e);
        return;
      }
    }
  }

  /** The value of $1: the test clock, or null for the server's now(). */
  clockParam(): number | null {
    return this.options.clock === undefined ? null : this.options.clock();
  }

  /**
   * One statement on a connection of `lane`, its own transaction (a Queryable). Behind a pooler it
   * is wrapped in a transaction that makes the connection's settings first. Errors come back as the
   * driver gave them (a script may look at a statement's error code).
   */
  async query<R extends pg.QueryResultRow = Row>(
    text: string,
    values: unknown[] = [],
    lane: Lane = "pool",
  ): Promise<pg.QueryResult<R>> {
    const pool = lane === "lease" ? this.leaseLane : this.pool;
    if (!this.pooler) return pool.query<R>(prepared(text, values));
    return this.inTransaction(await pool.connect(), (client) => client.query<R>(text, values));
  }

  /**
   * `fn` between BEGIN (with the pooler's settings) and COMMIT on `client`, rolled back when it
   * throws (the error as thrown); the client released, discarded if its connection was lost. A
   * connection lost while checked out (a server restart, a session the server ended) emits "error"
   * on the client, which would crash the process without a listener; the statement in flight or
   * the next one fails with it.
   */
  private async inTransaction<T>(
    client: pg.PoolClient,
    fn: (client: pg.PoolClient) => Promise<T>,
  ): Promise<T> {
    let broken: Error | undefined;
    const onLost = (e: Error): void => {
      broken = e;
    };
    client.on("error", onLost);
    try {
      await client.query(this.begin);
      const result = await fn(client);
      await client.query("COMMIT");
      return result;
    } catch (e) {
      try {
        await client.query("ROLLBACK");
      } catch (rollbackError) {
        broken = rollbackError instanceof Error ? rollbackError : new Error(String(rollbackError));
      }
      throw e;
    } finally {
      client.off("error", onLost);
      client.release(broken);
    }
  }

  /** One statement on a pooled connection (its own transaction). */
  async one<R extends pg.QueryResultRow = Row>(
    operation: string,
    text: string,
    values: unknown[],
  ): Promise<R[]> {
    try {
      return (await this.query<R>(text, values)).rows;
    } catch (e) {
      throw mapError(operation, e);
    }
  }

  /**
   * A multi-statement transaction. The log lines and notifications it collected are written by its
   * last statements, so seq is drawn after every read and the room's log lock is the last lock taken.
   */
  async tx<T>(operation: string, fn: (tx: Tx) => Promise<T>): Promise<T> {
    let client: pg.PoolClient;
    try {
      client = await this.pool.connect();
    } catch (e) {
      throw mapError(operation, e);
    }
    const entries = new Map<string, LogEntry[]>();
    const topics = new Set<string>();
    const clockParam = this.clockParam();
    const tx: Tx = {
      client,
      query: <R extends pg.QueryResultRow>(text: string, values: unknown[] = []) =>
        client.query<R>(this.statement(text, values)),
      clockParam,
      log: (roomId, entry) => {
        const list = entries.get(roomId) ?? [];
        list.push(entry);
        entries.set(roomId, list);
      },
      touch: (topic, roomId) => topics.add(`${topic}:${roomId ?? ""}`),
    };
    try {
      const result = await this.inTransaction(client, async () => {
        const value = await fn(tx);
        for (const [roomId, list] of entries) await appendEvents(this, client, clockParam, roomId, list);
        return value;
      });
      for (const t of topics) {
        const at = t.indexOf(":");
        const room = t.slice(at + 1);
        this.committed(t.slice(0, at) as ChangeTopic, room === "" ? null : room);
      }
      return result;
    } catch (e) {
      throw mapError(operation, e);
    }
  }

  private ended = false;

  async close(): Promise<void> {
    await this.flushing;
    this.ended = true;
    await Promise.all([this.pool.end(), this.leaseLane.end()]);
  }
}

/**
 * Append log lines for one room, last in its transaction: the room's log lock (shared), then the
 * rows in order, each drawing the next seq as it is inserted.
 */
async function appendEvents(
  db: Db,
  client: pg.PoolClient,
  clockParam: number | null,
  roomId: string,
  list: LogEntry[],
): Promise<void> {
  await client.query(
    db.statement(
      `WITH lk AS (SELECT pg_advisory_xact_lock_shared(${LOG_LOCK("$2::text")}))
       INSERT INTO events (room_id, at, kind, run_id, task_id, term, actor, data)
       SELECT $2, ${NOW}, e.kind, e.run_id, e.task_id, e.term, e.actor, e.data
         FROM lk, unnest($3::text[], $4::text[], $5::text[], $6::bigint[], $7::text[], $8::jsonb[])
                WITH ORDINALITY AS e(kind, run_id, task_id, term, actor, data, n)
        ORDER BY e.n`,
      [
        clockParam,
        roomId,
        list.map((e) => e.kind),
        list.map((e) => e.runId ?? null),
        list.map((e) => e.taskId ?? null),
        list.map((e) => e.term ?? null),
        list.map((e) => e.actor ?? null),
        list.map((e) => JSON.stringify(clean(e.data ?? {}))),
      ],
    ),
  );
}
