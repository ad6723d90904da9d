/**
 * One better-sqlite3 connection and the discipline around it: WAL, a busy timeout, every write in
 * BEGIN IMMEDIATE with a bounded retry on SQLITE_BUSY, errors mapped to the port's types at the
 * edge, and change notifications fired only after a commit.
 */
import { setImmediate as immediate } from "node:timers";
import { setTimeout as sleep } from "node:timers/promises";
import Database from "better-sqlite3";
import type { ChangeTopic, CommitJoiner, CommittedWrite } from "../../ports/store.js";
import { mapError } from "../store-common/checks.js";
import type { LogLine } from "../store-common/records.js";
import type { Backoff } from "../../domain/backoff.js";
import { backoffMs } from "../../domain/backoff.js";
import { FLEET_PROTOCOL } from "../../domain/release.js";

export type Row = Record<string, unknown>;

/** The temp view by which a connection says it speaks this release's fleet protocol (docs/architecture.md §11). */
export const FLEET_PROTOCOL_VIEW = `dagbot_fleet_protocol_${FLEET_PROTOCOL}`;

/** Says, on this connection only, that it speaks this release's fleet protocol (its temp schema). */
export function declareFleetProtocol(db: Database.Database): void {
  db.exec(`CREATE TEMP VIEW IF NOT EXISTS ${FLEET_PROTOCOL_VIEW} AS SELECT ${FLEET_PROTOCOL} AS protocol`);
}

/** What a write transaction collects for after its commit. */
export interface Tx {
  readonly now: number;
  /** `nodes`: the nodes the change names (a claim's claimer), for this process's listeners. */
  touch(topic: ChangeTopic, roomId: string | null, nodes?: readonly string[]): void;
  log(entry: LogEntry): void;
}

/** A log line and its room: one transaction may write to several rooms' logs. */
export interface LogEntry extends LogLine {
  roomId: string;
}

type Notify = (topic: ChangeTopic, roomId: string | null, nodes?: readonly string[]) => void;
type Touched = [ChangeTopic, string | null, (readonly string[])?];

interface PendingWrite {
  operation: string;
  fn: (tx: Tx) => unknown;
  resolve: (value: unknown) => void;
  reject: (reason: unknown) => void;
}

type WriteOutcome =
  { ok: true; value: unknown; touched: Touched[] } | { ok: false; value: unknown; touched: [] };

// Retries after busy_timeout already waited: a few more chances with jitter, then a StoreError.
const BUSY_RETRIES = 8;

/**
 * Rounds of writes that joiners may add to one commit (joinCommits): a finish, the leader's step it
 * calls for, the claims that step calls for, and one more for what those bring. Bounded so that no
 * chain of joiners can keep a transaction open.
 */
export const MAX_JOIN_ROUNDS = 4;

export { sessionKey } from "../store-common/records.js";

/**
 * A row limit given as a parameter, as every statement of this store writes it: `LIMIT ? + 0`, never
 * a bare `LIMIT ?`. This SQLite (better-sqlite3's build, with SQLITE_ENABLE_STAT4) lets the planner
 * use the value bound to a bare LIMIT parameter, and such a statement cost 25–30 µs more at every
 * execution than the same one with the limit written in: the claim's pick took 110 µs instead of 17.
 * An expression is a value the planner does not look at, so the prepared plan is kept
 * (docs/architecture.md §8, "Commits"; test/adapters/sqlite-query-plan.test.ts keeps it so).
 */
export const LIMIT = "LIMIT ? + 0";

export class SqliteConnection {
  readonly db: Database.Database;
  private readonly statements = new Map<string, Database.Statement>();
  // Made once: db.transaction() builds its four wrappers on every call, a cost on every claim and finish.
  private readonly inTransaction: Database.Transaction<(body: () => unknown) => unknown>;

  constructor(
    path: string,
    busyTimeoutMs: number,
    readonly clock: () => number,
    private readonly notify: Notify,
    synchronous: "full" | "normal" = "full",
  ) {
    this.db = new Database(path);
    try {
      // busy_timeout first: switching to WAL itself needs a lock another opener may hold.
      this.db.pragma(`busy_timeout = ${Math.max(0, Math.floor(busyTimeoutMs))}`);
      this.db.pragma("journal_mode = WAL");
      // FULL (the default): a commit the caller saw survives a power cut too, not only a killed
      // process. NORMAL, when the node's config asks for it: no fsync per commit, only at
      // checkpoints; a killed process loses nothing, a power cut or OS crash may lose the last
      // commits, and the WAL stays consistent either way.
      this.db.pragma(`synchronous = ${synchronous === "normal" ? "NORMAL" : "FULL"}`);
      this.db.pragma("foreign_keys = ON");
      // This connection speaks FLEET_PROTOCOL: the store's fence triggers (migration
      // 017-fleet-protocol-2.sql, made again for protocol 3 by 020-run-conditions.sql) look for
      // this view in the connection's own temp schema, which an older release never made.
      declareFleetProtocol(this.db);
      this.inTransaction = this.db.transaction((body: () => unknown) => body());
    } catch (e) {
      this.db.close();
      throw e;
    }
  }

  /** Open with the same bounded BUSY retry as writes: several processes may open a new file at once. */
  static async open(
    path: string,
    busyTimeoutMs: number,
    clock: () => number,
    notify: Notify,
    synchronous: "full" | "normal" = "full",
  ): Promise<SqliteConnection> {
    for (let attempt = 0; ; attempt++) {
      try {
        return new SqliteConnection(path, busyTimeoutMs, clock, notify, synchronous);
      } catch (e) {
        if (isBusy(e) && attempt < BUSY_RETRIES) {
          await backoff(attempt);
          continue;
        }
        throw mapError(`open sqlite store ${path}`, e);
      }
    }
  }

  stmt(sql: string): Database.Statement {
    let s = this.statements.get(sql);
    if (s === undefined) {
      s = this.db.prepare(sql);
      this.statements.set(sql, s);
    }
    return s;
  }

  get<T = Row>(sql: string, ...params: unknown[]): T | undefined {
    return this.stmt(sql).get(...params) as T | undefined;
  }

  all<T = Row>(sql: string, ...params: unknown[]): T[] {
    return this.stmt(sql).all(...params) as T[];
  }

  run(sql: string, ...params: unknown[]): number {
    return this.stmt(sql).run(...params).changes;
  }

  /**
   * A multi-statement write under BEGIN IMMEDIATE; listeners hear of it after the commit, and the
   * promise settles only once the commit is durable. Group commit (docs/architecture.md §8,
   * "Commits"): the writes asked for in one turn of the event loop share one transaction, each in a
   * savepoint of its own, so each succeeds or fails alone exactly as a transaction of its own would,
   * and they pay for one commit (one fsync at `synchronous = FULL`) together.
   */
  write<T>(operation: string, fn: (tx: Tx) => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.pending.push({ operation, fn, resolve: resolve as (value: unknown) => void, reject });
      if (this.pending.length === 1) immediate(() => void this.flush());
    });
  }

  private pending: PendingWrite[] = [];
  /** Commits made and writes they carried (group commit's measure: bench and tests read it). */
  readonly counts = { commits: 0, writes: 0 };
  private readonly joiners = new Map<CommitJoiner, (err: unknown) => void>();
  /** True while joiners are called: a read then would commit the batch under them. */
  private joining = false;

  /**
   * Calls `joiner` inside every commit of this connection, after the commit's writes ran and before
   * it is made durable, with the writes that succeeded (docs/architecture.md §8, "One commit a
   * step"). The writes a joiner asks for there, synchronously, join the same commit, each in a
   * savepoint of its own like any write of the batch, and joiners hear of them in the next round
   * (MAX_JOIN_ROUNDS at most). A joiner may not read (the read is refused); one that throws is
   * reported to `onError` and the commit goes on. Returns the way to stop.
   */
  joinCommits(joiner: CommitJoiner, onError: (err: unknown) => void): () => void {
    this.joiners.set(joiner, onError);
    return () => this.joiners.delete(joiner);
  }

  /** Commits the writes asked for so far in one transaction; retried whole on SQLITE_BUSY. */
  private async flush(): Promise<void> {
    const batch = this.pending;
    this.pending = [];
    if (batch.length === 0) return;
    for (let attempt = 0; ; attempt++) {
      const busy = this.commitBatch(batch, attempt < BUSY_RETRIES);
      if (!busy) return;
      await backoff(attempt);
    }
  }

  /**
   * Writes asked for before a read are committed before it, as they were asked first: a caller
   * that reads in a loop of resolved promises (no timer, so no turn of the event loop) still lets
   * the writes before it land. A batch that finds the file locked stays for its scheduled flush.
   */
  private flushBeforeRead(): void {
    if (this.pending.length === 0) return;
    const batch = this.pending;
    this.pending = [];
    if (this.commitBatch(batch, true)) this.pending = [...batch, ...this.pending];
  }

  /**
   * One attempt at committing a batch; settles every write of it unless the lock was busy and
   * `mayRetry`, in which case nothing was changed and it returns true.
   */
  private commitBatch(batch: PendingWrite[], mayRetry: boolean): boolean {
    const outcomes: WriteOutcome[] = [];
    try {
      this.inTransaction.immediate(() => {
        outcomes.length = 0;
        for (const op of batch) outcomes.push(this.inSavepoint(op));
        this.joinRounds(batch, outcomes);
      });
    } catch (e) {
      if (isBusy(e) && mayRetry) return true;
      for (const op of batch) op.reject(mapError(op.operation, e));
      return false;
    }
    this.counts.commits += 1;
    this.counts.writes += batch.length;
    const seen = new Set<string>();
    for (const o of outcomes) {
      for (const [topic, roomId, nodes] of o.touched) {
        const k = `${topic}\u0000${roomId ?? ""}\u0000${(nodes ?? []).join("\u0000")}`;
        if (seen.has(k)) continue;
        seen.add(k);
        this.notify(topic, roomId, nodes);
      }
    }
    batch.forEach((op, n) => {
      const o = outcomes[n];
      if (o?.ok === true) op.resolve(o.value);
      else op.reject(mapError(op.operation, o?.value));
    });
    return false;
  }

  /**
   * Inside the transaction: the joiners hear the writes of each round that succeeded; the writes
   * they ask for are added to the batch (so a retried batch runs them again) and run in savepoints
   * of their own. A retried batch calls the joiners again: each must ask at most once for what one
   * change calls for (the leader's pass and a worker's claim keep a flag while theirs is on its way).
   */
  private joinRounds(batch: PendingWrite[], outcomes: WriteOutcome[]): void {
    if (this.joiners.size === 0) return;
    for (let round = 0, from = 0; round < MAX_JOIN_ROUNDS; round++) {
      const writes: CommittedWrite[] = [];
      for (let i = from; i < batch.length; i++) {
        const o = outcomes[i];
        if (o?.ok === true) writes.push({ operation: batch[i]!.operation, touched: o.touched });
      }
      if (writes.length === 0) return;
      this.joining = true;
      try {
        for (const [joiner, onError] of this.joiners) {
          try {
            joiner(writes);
          } catch (err) {
            onError(err);
          }
        }
      } finally {
        this.joining = false;
      }
      if (this.pending.length === 0) return;
      from = batch.length;
      for (const op of this.pending.splice(0)) {
        batch.push(op);
        outcomes.push(this.inSavepoint(op));
      }
    }
  }

  /** One write of a batch in its own savepoint: a failure undoes only its own changes. */
  private inSavepoint(op: PendingWrite): WriteOutcome {
    const touched: Touched[] = [];
    try {
      const value = this.inTransaction(() => {
        const now = this.clock();
        const tx: Tx = {
          now,
          touch: (topic, roomId, nodes) => touched.push([topic, roomId, nodes]),
          log: (entry) => this.appendEvent(now, entry),
        };
        return op.fn(tx);
      });
      return { ok: true, value, touched };
    } catch (e) {
      // Busy inside the lock cannot happen; if it does, the whole batch retries.
      if (isBusy(e)) throw e;
      return { ok: false, value: e, touched: [] };
    }
  }

  /** A read; one statement or a deferred transaction, so it sees one snapshot. */
  async read<T>(operation: string, fn: (now: number) => T): Promise<T> {
    if (this.joining) throw new Error(`${operation}: a read inside a commit's joiners (they may only write)`);
    this.flushBeforeRead();
    for (let attempt = 0; ; attempt++) {
      try {
        return this.inTransaction.deferred(() => fn(this.clock())) as T;
      } catch (e) {
        if (isBusy(e) && attempt < BUSY_RETRIES) {
          await backoff(attempt);
          continue;
        }
        throw mapError(operation, e);
      }
    }
  }

  private appendEvent(now: number, e: LogEntry): void {
    this.run(
      "INSERT INTO events (room_id, at, kind, run_id, task_id, term, actor, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
      e.roomId,
      now,
      e.kind,
      e.runId ?? null,
      e.taskId ?? null,
      e.term ?? null,
      e.actor ?? null,
      JSON.stringify(e.data ?? {}),
    );
  }

  /** Bumped by SQLite whenever ANOTHER connection commits: the cheap cross-process change signal. */
  dataVersion(): number {
    // A kept statement: db.pragma() prepares its statement afresh on every call (0.17 ms against
    // 0.005 ms here), and the change feed asks on every poll.
    return this.stmt("PRAGMA data_version").pluck().get() as number;
  }

  close(): void {
    // Writes asked for and not yet committed fail rather than run on a closed database.
    const left = this.pending;
    this.pending = [];
    for (const op of left) op.reject(mapError(op.operation, new Error("the store was closed")));
    this.statements.clear();
    if (this.db.open) this.db.close();
  }
}

/** A busy connection's retry: 5 ms doubling up to 160 ms, spread over half to one and a half of that. */
const BUSY_BACKOFF: Backoff = {
  baseMs: 5,
  capMs: Number.POSITIVE_INFINITY,
  maxDoublings: 5,
  jitter: [0.5, 1.5],
};
const backoff = (attempt: number): Promise<void> => sleep(backoffMs(BUSY_BACKOFF, attempt, Math.random));

function isBusy(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  return typeof code === "string" && (code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED"));
}
