/**
 * Carries out a store script (store-common/script.ts) on PostgreSQL: each step awaited inside the
 * transaction it is given. `$1` of a statement that reads the clock is the transaction's clock
 * parameter (db.ts).
 */
import type { ChangeTopic, LeaderFence } from "../../ports/store.js";
import { fenceConflict as conflictOf, holdFence } from "../store-common/ops/fence.js";
import { rowMappers } from "../store-common/records.js";
import type { Mappers, ParamType, Script, Statement, Step } from "../store-common/script.js";
import { compile, p, sql, valuesOf } from "../store-common/script.js";
import type { Db, Lane, Queryable, Tx } from "./db.js";

/** What a script runs in: a transaction, or the pool (one statement each, writing no log). */
export type ScriptEnv = Pick<Tx, "query" | "clockParam"> &
  Partial<Pick<Tx, "log">> & {
    touch?: (topic: ChangeTopic, roomId: string | null, nodes?: readonly string[]) => void;
  };

const readOnly = (step: string): Error => new Error(`a store script wrote (${step}) outside a transaction`);
import { cleanText, json as jsonText, mapError } from "./sql.js";

// The driver has decoded jsonb and text[] already.
const json = <T>(v: unknown): T => v as T;
const MAPPERS: Mappers = { ...rowMappers(json), json };

// Text from chat or a process may hold U+0000 or lone surrogates, which PostgreSQL refuses (sql.ts, cleanText).
const encode = (type: ParamType, v: unknown): unknown =>
  type === "json" ? jsonText(v) : type === "text" && typeof v === "string" ? cleanText(v) : v;

const NOW = sql("the transaction's clock")`SELECT ${p.now} AS now`;

/** The clock read once per transaction: now() is the transaction's start, and a test clock is fixed per transaction. */
const clocks = new WeakMap<ScriptEnv, number>();

async function carryOut(tx: ScriptEnv, step: Step): Promise<unknown> {
  switch (step.step) {
    case "rows":
    case "run": {
      const compiled = compile(step.statement, "postgres");
      if (!compiled.runs) return step.step === "rows" ? [] : 0;
      const values = valuesOf(compiled, step.statement, step.values, encode, () => tx.clockParam);
      const result = await tx.query(compiled.text, values);
      return step.step === "rows" ? result.rows : (result.rowCount ?? 0);
    }
    case "now": {
      let at = clocks.get(tx);
      if (at === undefined) {
        const compiled = compile(NOW, "postgres");
        const { rows } = await tx.query<{ now: string | number }>(compiled.text, [tx.clockParam]);
        at = Number(rows[0]?.now);
        clocks.set(tx, at);
      }
      return at;
    }
    case "mappers":
      return MAPPERS;
    case "log":
      if (tx.log === undefined) throw readOnly("log");
      tx.log(step.roomId, step.line);
      return undefined;
    case "touch":
      if (tx.touch === undefined) throw readOnly("touch");
      tx.touch(step.topic, step.roomId, step.nodes);
      return undefined;
  }
}

/** The text and values this driver runs for `statement` (for tests that read its plan). */
export function queryOf(
  statement: Statement,
  values: Readonly<Record<string, unknown>>,
  clockParam: number | null = null,
): { sql: string; values: unknown[] } {
  const compiled = compile(statement, "postgres");
  return { sql: compiled.text, values: valuesOf(compiled, statement, values, encode, () => clockParam) };
}

/** Runs `script` to its end inside `tx`; an error a step throws is thrown into the script. */
export async function runScript<T>(tx: ScriptEnv, script: Script<T>): Promise<T> {
  let next = script.next();
  while (next.done !== true) {
    let value: unknown;
    try {
      value = await carryOut(tx, next.value);
    } catch (e) {
      next = script.throw(e);
      continue;
    }
    next = script.next(value);
  }
  return next.value;
}

/** A transaction that runs one script. */
export function writeScript<T>(db: Db, operation: string, make: () => Script<T>): Promise<T> {
  return db.tx(operation, (tx) => runScript(tx, make()));
}

/**
 * A read on the pool (or the lease lane: db.ts, Lane), outside a transaction (each statement its own
 * snapshot); it may not write.
 */
export async function readScript<T>(
  db: Db,
  operation: string,
  make: () => Script<T>,
  lane: Lane = "pool",
): Promise<T> {
  try {
    return await runScript(
      { query: (text, values) => db.query(text, values, lane), clockParam: db.clockParam() },
      make(),
    );
  } catch (e) {
    throw mapError(operation, e);
  }
}

/**
 * A script of one-statement writes on the pool (or the lease lane: db.ts, Lane), outside a
 * transaction: each statement commits alone, one round trip (a claim, a finish, a lease renewal, a
 * node's lease wishes). Such a statement writes its own log lines (data-modifying CTEs); what it
 * `touch`es is told once the script ends, as a transaction's is (Db.committed).
 */
export async function autocommitScript<T>(
  db: Db,
  operation: string,
  make: () => Script<T>,
  lane: Lane = "pool",
): Promise<T> {
  const topics: [ChangeTopic, string | null, (readonly string[])?][] = [];
  let result: T;
  try {
    result = await runScript(
      {
        query: (text, values) => db.query(text, values, lane),
        clockParam: db.clockParam(),
        touch: (topic, roomId, nodes) => topics.push([topic, roomId, nodes]),
      },
      make(),
    );
  } catch (e) {
    throw mapError(operation, e);
  }
  for (const [topic, roomId, nodes] of topics) db.committed(topic, roomId, nodes);
  return result;
}

/**
 * Inside a transaction: hold a shared lock on the room's lease row while it still names this fence
 * unexpired (store-common/ops/fence.ts). An acquire or renewal must wait for the write to commit, so
 * the fence cannot change between this check and the commit. ConflictError when the fence no longer holds.
 */
export function lockFence(tx: Tx, operation: string, fence: LeaderFence): Promise<void> {
  return runScript(tx, holdFence(operation, fence));
}

/** The ConflictError for a fence that no longer holds, with the lease as found now. */
export async function fenceConflict(
  db: Db,
  operation: string,
  fence: LeaderFence,
  q: Queryable = db,
): Promise<Error> {
  try {
    return await runScript(
      { query: (text, values) => q.query(text, values), clockParam: db.clockParam() },
      conflictOf(operation, fence),
    );
  } catch (e) {
    return mapError(operation, e);
  }
}
