/**
 * Carries out a store script (store-common/script.ts) on SQLite: synchronously, inside the write
 * transaction it is given, so nothing else on the connection interleaves with it.
 */
import type { LeaderFence } from "../../ports/store.js";
import { holdFence } from "../store-common/ops/fence.js";
import { rowMappers } from "../store-common/records.js";
import type { Mappers, ParamType, Script, Statement, Step } from "../store-common/script.js";
import { compile, valuesOf } from "../store-common/script.js";
import type { SqliteConnection, Tx } from "./connection.js";

/** What a script runs in: a write transaction, or a read (which has a clock and writes nothing). */
export type ScriptEnv = Pick<Tx, "now"> & Partial<Pick<Tx, "log" | "touch">>;

const readOnly = (step: string): Error => new Error(`a store script wrote (${step}) inside a read`);

const json = <T>(v: unknown): T => JSON.parse(v as string) as T;
const MAPPERS: Mappers = { ...rowMappers(json), json };

const encode = (type: ParamType, v: unknown): unknown =>
  type === "json" || type === "textList" || type === "texts" || type === "array"
    ? JSON.stringify(v)
    : type === "bool"
      ? v === true
        ? 1
        : 0
      : v;

function carryOut(c: SqliteConnection, tx: ScriptEnv, step: Step): unknown {
  switch (step.step) {
    case "rows":
    case "run": {
      const compiled = compile(step.statement, "sqlite");
      if (!compiled.runs) return step.step === "rows" ? [] : 0;
      const values = valuesOf(compiled, step.statement, step.values, encode, () => tx.now);
      return step.step === "rows" ? c.all(compiled.text, ...values) : c.run(compiled.text, ...values);
    }
    case "now":
      return tx.now;
    case "mappers":
      return MAPPERS;
    case "log":
      if (tx.log === undefined) throw readOnly("log");
      tx.log({ ...step.line, roomId: step.roomId });
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
  now = 0,
): { sql: string; values: unknown[] } {
  const compiled = compile(statement, "sqlite");
  return { sql: compiled.text, values: valuesOf(compiled, statement, values, encode, () => now) };
}

/** Runs `script` to its end inside `tx`; an error a step throws is thrown into the script. */
export function runScript<T>(c: SqliteConnection, tx: ScriptEnv, script: Script<T>): T {
  let next = script.next();
  while (next.done !== true) {
    let value: unknown;
    try {
      value = carryOut(c, tx, next.value);
    } catch (e) {
      next = script.throw(e);
      continue;
    }
    next = script.next(value);
  }
  return next.value;
}

/** A write transaction that runs one script (made afresh if the write is tried again). */
export function writeScript<T>(c: SqliteConnection, operation: string, make: () => Script<T>): Promise<T> {
  return c.write(operation, (tx) => runScript(c, tx, make()));
}

/** A read (one snapshot) that runs one script; it may not write. */
export function readScript<T>(c: SqliteConnection, operation: string, make: () => Script<T>): Promise<T> {
  return c.read(operation, (now) => runScript(c, { now }, make()));
}

/**
 * Leader writes change nothing unless the fence still holds the room's unexpired lease
 * (store-common/ops/fence.ts). Called inside the write's transaction, so a takeover cannot slip in
 * between check and write.
 */
export function checkFence(c: SqliteConnection, tx: ScriptEnv, operation: string, fence: LeaderFence): void {
  runScript(c, tx, holdFence(operation, fence));
}
