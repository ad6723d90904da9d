/**
 * The PostgreSQL connection discipline: one pool, the store's clock as a SQL expression, short
 * transactions, leader fencing by a shared lock on the room's lease row, the event log appended
 * last, and driver errors mapped to the port's error types at the edge.
 */
import { createHash } from "node:crypto";
import pg from "pg";
import { ConflictError, NotFoundError, SchemaTooNewError, StoreError } from "../../ports/errors.js";
import type { ChangeTopic, LeaderFence, Session } from "../../ports/store.js";

export type Row = Record<string, unknown>;

/** Anything that runs a query: the pool (one statement, autocommit) or a client inside a transaction. */
export interface Queryable {
  query<R extends pg.QueryResultRow = Row>(text: string, values?: unknown[]): Promise<pg.QueryResult<R>>;
}

/**
 * The store's clock in epoch ms. `$1` of every statement that reads time is the test clock's value
 * or NULL; NULL means now(), the transaction's start time: one instant for every row a transaction
 * writes, and never later than the moment a lock wait ended, so each expiry check errs toward
 * "not yet expired" while the row lock keeps the decision safe.
 */
export const NOW = "coalesce($1::bigint, floor(extract(epoch FROM now()) * 1000)::bigint)";

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

export const quoteIdent = (name: string): string => `"${name.replaceAll('"', '""')}"`;

export const sessionKey = (s: Session): string => `${s.nodeId}/${s.bootId}`;

export function clientConfig(o: PgOptions): pg.ClientConfig {
  return {
    connectionString: o.url,
    types,
    // Every connection resolves our tables in the chosen schema, so one database can hold several stores.
    options: `-c search_path=${quoteIdent(o.schema)}`,
    application_name: "dagbot",
  };
}

/** A log line a write appends; seq and time are filled in when the transaction appends it. */
export interface LogEntry {
  kind: string;
  runId?: string | null;
  taskId?: string | null;
  term?: number | null;
  actor?: string | null;
  data?: Record<string, unknown>;
}

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
  onCommit: ((topic: ChangeTopic, roomId: string | null) => void) | undefined;

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
  committedHot(topic: ChangeTopic, roomId: string | null): void {
    this.committed(topic, roomId);
    this.pendingNotify.add(`${topic}:${roomId ?? ""}`);
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
        const c = client;
        // One round trip; no WAL flush waited for while the notify lock is held.
        await c.query(
          `BEGIN; SET LOCAL synchronous_commit TO off;
           SELECT ${batch.map((t) => `pg_notify('dagbot', ${c.escapeLiteral(t)})`).join(", ")}; COMMIT`,
        );
        client.release();
      } catch (e) {
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
    try {
      await client.query("BEGIN");
      const result = await fn(tx);
      for (const [roomId, list] of entries) await appendEvents(client, clockParam, roomId, list);
      if (topics.size > 0)
        await client.query(
          prepared("SELECT pg_notify('dagbot', t) FROM unnest($1::text[]) t", [[...topics]]),
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
      client.release(broken);
    }
  }

  /**
   * Inside a transaction: hold a shared lock on the room's lease row while it still names this
   * fence unexpired. An acquire or renewal must wait for the write to commit, so the fence cannot
   * change between this check and the commit. ConflictError when the fence no longer holds.
   */
  async lockFence(tx: Tx, operation: string, fence: LeaderFence): Promise<void> {
    const { rows } = await tx.query(
      `SELECT 1 FROM room_leases
        WHERE room_id = $2 AND holder_node = $3 AND holder_boot = $4 AND term = $5 AND expires_at > ${NOW}
        FOR SHARE`,
      [tx.clockParam, fence.roomId, fence.session.nodeId, fence.session.bootId, fence.term],
    );
    if (rows.length === 0) throw await this.fenceConflict(operation, fence, tx.client);
  }

  /** The ConflictError for a fence that no longer holds, with the lease as found now. */
  async fenceConflict(operation: string, fence: LeaderFence, q: Queryable = this.pool): Promise<Error> {
    try {
      return await this.readFenceConflict(operation, fence, q);
    } catch (e) {
      return mapError(operation, e);
    }
  }

  private async readFenceConflict(
    operation: string,
    fence: LeaderFence,
    q: Queryable,
  ): Promise<ConflictError> {
    const { rows } = await q.query(
      `SELECT holder_node, holder_boot, term, expires_at, ${NOW} AS now FROM room_leases WHERE room_id = $2`,
      [this.clockParam(), fence.roomId],
    );
    const r = rows[0];
    return new ConflictError(
      operation,
      { roomId: fence.roomId, holder: sessionKey(fence.session), term: fence.term, unexpired: true },
      r === undefined
        ? null
        : {
            holder: r.holder_node === null ? null : `${String(r.holder_node)}/${String(r.holder_boot)}`,
            term: r.term,
            expiresAt: r.expires_at,
            now: r.now,
          },
    );
  }

  private ended = false;

  async close(): Promise<void> {
    await this.flushing;
    this.ended = true;
    await this.pool.end();
  }
}

/**
 * The fence as a CTE for single-statement leader writes: `fence` has one row while the lease still
 * names this fence unexpired, and locks it FOR SHARE until the statement's transaction commits.
 * Parameters: $1 clock, then the four at `at` (room, node, boot, term).
 */
export function fenceCte(at: number): string {
  return `fence AS (
    SELECT 1 FROM room_leases
     WHERE room_id = $${at} AND holder_node = $${at + 1} AND holder_boot = $${at + 2} AND term = $${at + 3}
       AND expires_at > ${NOW}
     FOR SHARE)`;
}

export const fenceParams = (f: LeaderFence): unknown[] => [
  f.roomId,
  f.session.nodeId,
  f.session.bootId,
  f.term,
];

/** The advisory lock key of a room's event log: writers hold it shared, readers exclusive. */
export const LOG_LOCK = (room: string): string => `hashtext('dagbot.events'), hashtext(${room})`;

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

/**
 * The event-log CTEs for a single-statement write whose CTE `src` yields one row per log line with
 * columns room_id, ord, kind, run_id, task_id, term, actor, data. `log_lock` reads `src`, so the
 * room's log lock is taken after the write has locked its rows (the log lock is always the last
 * lock a transaction takes), and seq is drawn per inserted row after that lock, in `ord` order.
 */
export const LOG_CTES = `
  log_lock AS (
    SELECT room_id, pg_advisory_xact_lock_shared(${LOG_LOCK("room_id")}) AS locked
      FROM (SELECT DISTINCT room_id FROM src) r),
  log_ins AS (
    INSERT INTO events (room_id, at, kind, run_id, task_id, term, actor, data)
    SELECT src.room_id, ${NOW}, src.kind, src.run_id, src.task_id, src.term, src.actor, src.data
      FROM src JOIN log_lock USING (room_id)
     ORDER BY src.ord
    RETURNING 1)`;

/**
 * JSON and text from chat or a process may hold U+0000, which PostgreSQL text and jsonb refuse;
 * replace it so a stray NUL in a command or an action's output never makes a write fail.
 */
export function cleanText(s: string): string;
export function cleanText(s: string | null): string | null;
export function cleanText(s: string | null): string | null {
  return s === null || !s.includes("\u0000") ? s : s.replaceAll("\u0000", "\uFFFD");
}

export function clean<T>(v: T): T {
  if (typeof v === "string") return cleanText(v) as T;
  if (Array.isArray(v)) return v.map(clean) as T;
  if (v !== null && typeof v === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) out[cleanText(k)] = clean(x);
    return out as T;
  }
  return v;
}

export const json = (v: unknown): string => JSON.stringify(clean(v));

/** Our own typed errors pass through; anything the driver threw becomes a StoreError. */
export function mapError(operation: string, e: unknown): Error {
  if (
    e instanceof ConflictError ||
    e instanceof NotFoundError ||
    e instanceof StoreError ||
    e instanceof SchemaTooNewError ||
    e instanceof RangeError
  )
    return e;
  return new StoreError(operation, { cause: e });
}

/**
 * A read made under a fence: the rows of `inner` (a SELECT whose parameters start at $6) if the
 * fence still holds the room's unexpired lease, else ConflictError. One round trip.
 */
export async function fencedRead(
  db: Db,
  operation: string,
  fence: LeaderFence,
  inner: string,
  params: unknown[],
): Promise<Row[]> {
  const rows = await db.one<{ fenced: boolean; rows: Row[] }>(
    operation,
    `WITH f AS (
       SELECT 1 FROM room_leases
        WHERE room_id = $2::text AND holder_node = $3::text AND holder_boot = $4::text AND term = $5::bigint
          AND expires_at > ${NOW})
     SELECT EXISTS (SELECT 1 FROM f) AS fenced,
            CASE WHEN EXISTS (SELECT 1 FROM f) THEN coalesce((SELECT json_agg(x) FROM (${inner}) x), '[]') END AS rows`,
    [db.clockParam(), ...fenceParams(fence), ...params],
  );
  const r = rows[0];
  if (r === undefined || !r.fenced) throw await db.fenceConflict(operation, fence);
  return r.rows;
}

/**
 * After a guarded write changed nothing, find out why: the fence lost (ConflictError on the lease),
 * the row missing (NotFoundError), or the row in another state (ConflictError with what was found).
 */
export async function explainMiss(
  db: Db,
  q: Queryable,
  operation: string,
  fence: LeaderFence | null,
  key: Record<string, unknown>,
  expected: Record<string, unknown>,
  foundSql: string,
  foundParams: unknown[],
): Promise<Error> {
  try {
    return await readMiss(db, q, operation, fence, key, expected, foundSql, foundParams);
  } catch (e) {
    return mapError(operation, e);
  }
}

async function readMiss(
  db: Db,
  q: Queryable,
  operation: string,
  fence: LeaderFence | null,
  key: Record<string, unknown>,
  expected: Record<string, unknown>,
  foundSql: string,
  foundParams: unknown[],
): Promise<Error> {
  if (fence !== null) {
    const { rows } = await q.query(
      `SELECT 1 FROM room_leases WHERE room_id = $2::text AND holder_node = $3::text AND holder_boot = $4::text
          AND term = $5::bigint AND expires_at > ${NOW}`,
      [db.clockParam(), ...fenceParams(fence)],
    );
    if (rows.length === 0) return db.fenceConflict(operation, fence, q);
  }
  const { rows } = await q.query(foundSql, foundParams);
  const found = rows[0];
  if (found === undefined) return new NotFoundError(operation, key);
  return new ConflictError(operation, { ...key, ...expected }, found);
}
