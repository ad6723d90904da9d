/**
 * The PostgreSQL connection discipline: one pool of prepared statements, short transactions,
 * leader fencing by a shared lock on the room's lease row, the event log appended last, and the
 * notifications of commits (NOTIFY, and this Store's own listeners at once).
 */
import { createHash } from "node:crypto";
import pg from "pg";
import { FLEET_PROTOCOL } from "../../domain/release.js";
import type { ChangeTopic } from "../../ports/store.js";
import { HOT_TOPICS } from "../../ports/store.js";
import type { LogLine } from "../store-common/records.js";
import { clean, LOG_LOCK, mapError, NOW, quoteIdent } from "./sql.js";

export type Row = Record<string, unknown>;

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

export interface PgOptions {
  url: string;
  poolSize: number;
  schema: string;
  clock: (() => number) | undefined;
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
const HOT_SQL = HOT_TOPICS.map((t) => `'${t}'`).join(", ");

/** The channel a payload (`topic:room…`) goes to. */
export function channelOf(payload: string): string {
  const at = payload.indexOf(":");
  const topic = at < 0 ? payload : payload.slice(0, at);
  return (HOT_TOPICS as readonly string[]).includes(topic) ? HOT_CHANNEL : CHANNEL;
}

/** What a write transaction collects and writes last: its log lines and the topics to notify. */
export interface Tx {
  readonly client: pg.PoolClient;
  /** A prepared statement on the transaction's connection. */
  query<R extends pg.QueryResultRow = Row>(text: string, values?: unknown[]): Promise<pg.QueryResult<R>>;
  /** The clock parameter ($1) of every statement in this transaction. */
  readonly clockParam: number | null;
  log(roomId: string, entry: LogEntry): void;
  touch(topic: ChangeTopic, roomId: string | null): void;
}

export class Db {
  readonly pool: pg.Pool;
  /**
   * Hears this Store's own commits at once (its listeners need not wait for the NOTIFY round trip);
   * other Stores hear them through LISTEN.
   */
  onCommit: ((topic: ChangeTopic, roomId: string | null, nodes?: readonly string[]) => void) | undefined;

  constructor(readonly options: PgOptions) {
    this.pool = new pg.Pool({ ...clientConfig(options), max: options.poolSize });
    // An idle client that loses its connection must not crash the process; the pool drops it.
    this.pool.on("error", () => {});
  }

  /** Tell this Store's own listeners of a committed change. */
  committed(topic: ChangeTopic, roomId: string | null): void {
    this.onCommit?.(topic, roomId);
  }

  /**
   * For the worker's hot path (claim, finish): tell this Store's listeners now and other Stores
   * right after, through one NOTIFY transaction for everything committed meanwhile. PostgreSQL
   * serializes the commits of notifying transactions under one global lock (held through the WAL
   * flush), which halved claim throughput at 8 workers when each claim notified in its own
   * transaction. The cost: a crash between the commit and this NOTIFY loses the wake-up, which
   * the port allows (listeners also poll).
   */
  committedHot(topic: ChangeTopic, roomId: string | null, nodes?: readonly string[]): void {
    this.onCommit?.(topic, roomId, nodes);
    this.pendingNotify.add([`${topic}:${roomId ?? ""}`, ...(nodes ?? [])].join("\n"));
    this.flushing ??= this.flushNotify().finally(() => {
      this.flushing = undefined;
    });
  }

  /**
   * Send a NOTIFY payload soon, with the batch of the hot path, and not to this Store's own
   * listeners (they hear it back through LISTEN, once).
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
    // Let the commits of this tick join the batch.
    await new Promise<void>((resolve) => setImmediate(resolve));
    while (this.pendingNotify.size > 0 && !this.ended) {
      const batch = [...this.pendingNotify];
      this.pendingNotify.clear();
      let client: pg.PoolClient | undefined;
      try {
        client = await this.pool.connect();
        client.on("error", ignoreLost);
        const c = client;
        // One round trip; no WAL flush waited for while the notify lock is held.
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

  /** One statement on a pooled connection (its own transaction). */
  async one<R extends pg.QueryResultRow = Row>(
    operation: string,
    text: string,
    values: unknown[],
  ): Promise<R[]> {
    try {
      return (await this.pool.query<R>(prepared(text, values))).rows;
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
        client.query<R>(prepared(text, values)),
      clockParam,
      log: (roomId, entry) => {
        const list = entries.get(roomId) ?? [];
        list.push(entry);
        entries.set(roomId, list);
      },
      touch: (topic, roomId) => topics.add(`${topic}:${roomId ?? ""}`),
    };
    let broken: Error | undefined;
    // A connection lost while checked out (a server restart, a session the server ended) emits
    // "error" on the client, which would crash the process without a listener; the statement in
    // flight or the next one fails with it, and the client is discarded on release.
    const onLost = (e: Error): void => {
      broken = e;
    };
    client.on("error", onLost);
    try {
      await client.query("BEGIN");
      const result = await fn(tx);
      for (const [roomId, list] of entries) await appendEvents(client, clockParam, roomId, list);
      if (topics.size > 0)
        await client.query(
          prepared(
            `SELECT pg_notify(CASE WHEN split_part(t, ':', 1) IN (${HOT_SQL}) THEN '${HOT_CHANNEL}' ELSE '${CHANNEL}' END, t)
               FROM unnest($1::text[]) t`,
            [[...topics]],
          ),
        );
      await client.query("COMMIT");
      for (const t of topics) {
        const at = t.indexOf(":");
        const room = t.slice(at + 1);
        this.committed(t.slice(0, at) as ChangeTopic, room === "" ? null : room);
      }
      return result;
    } catch (e) {
      try {
        await client.query("ROLLBACK");
      } catch (rollbackError) {
        broken = rollbackError instanceof Error ? rollbackError : new Error(String(rollbackError));
      }
      throw mapError(operation, e);
    } finally {
      client.off("error", onLost);
      client.release(broken);
    }
  }

  private ended = false;

  async close(): Promise<void> {
    await this.flushing;
    this.ended = true;
    await this.pool.end();
  }
}

/**
 * Append log lines for one room, last in its transaction: the room's log lock (shared), then the
 * rows in order, each drawing the next seq as it is inserted.
 */
async function appendEvents(
  client: pg.PoolClient,
  clockParam: number | null,
  roomId: string,
  list: LogEntry[],
): Promise<void> {
  await client.query(
    prepared(
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
