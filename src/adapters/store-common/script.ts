/**
 * A store operation written once for both dialects (docs/architecture.md §9, "Stores"): a script
 * reads, lets the domain decide, and writes, by yielding steps — a named statement with named
 * values, the transaction's clock, a log line, a change topic — that a dialect's driver carries
 * out. The SQLite driver runs a script synchronously inside its group-committed write (nothing else
 * can interleave); the PostgreSQL driver awaits each step inside its transaction. Neither restates
 * what the script decides.
 *
 * A statement is written once too, as SQL with typed placeholders; each dialect compiles it once
 * (`?` for SQLite, `$n::type` for PostgreSQL, whose `$1` is always the clock of NOW).
 */
import type { ChangeTopic } from "../../ports/store.js";
import { NOW } from "./postgres-text.js";
import type { LogLine, rowMappers } from "./records.js";

/**
 * The dialect's row → record mappers, and its decoder of a JSON column (parsed already on
 * PostgreSQL, text on SQLite).
 */
export type Mappers = ReturnType<typeof rowMappers> & { json<T>(v: unknown): T };

export type Dialect = "sqlite" | "postgres";
export type Row = Record<string, unknown>;

export type ParamType = "text" | "int" | "json" | "bool" | "textList" | "texts" | "limit" | "array";

export interface Param {
  readonly kind: "param";
  readonly name: string;
  readonly type: ParamType;
  /** A JSON array of objects read as a table (p.table): its alias and its columns. */
  readonly table?: { readonly alias: string; readonly columns: Readonly<Record<string, ColumnType>> };
  /** An array's PostgreSQL element type (p.array). */
  readonly element?: string;
}

/** A column of a table given as a JSON array (p.table). */
export type ColumnType = "text" | "int" | "bool" | "json" | "textList";
/** The transaction's clock in epoch ms (SQLite: read at BEGIN; PostgreSQL: the transaction's now()). */
export interface Now {
  readonly kind: "now";
}
/**
 * Text that only one dialect needs (a row lock, a cast), or a fragment only one dialect runs (the
 * event-log CTEs of a PostgreSQL one-statement write).
 */
export interface Only {
  readonly kind: "only";
  readonly sqlite: string | Statement;
  readonly postgres: string | Statement;
}

type Part = string | Param | Now | Only;

export interface Statement {
  /** What the statement is for, in a few words (named in plans and errors). */
  readonly name: string;
  readonly parts: readonly Part[];
}

export const p = {
  text: (name: string): Param => ({ kind: "param", name, type: "text" }),
  int: (name: string): Param => ({ kind: "param", name, type: "int" }),
  json: (name: string): Param => ({ kind: "param", name, type: "json" }),
  bool: (name: string): Param => ({ kind: "param", name, type: "bool" }),
  /** A list of texts as a column's value (SQLite: JSON text; PostgreSQL: text[]). */
  texts: (name: string): Param => ({ kind: "param", name, type: "texts" }),
  /** ` IN (…)` the list of texts given (a JS array): written after the column it tests. */
  inList: (name: string): Param => ({ kind: "param", name, type: "textList" }),
  /**
   * `LIMIT n` with n given. SQLite: `LIMIT ? + 0`, never a bare `LIMIT ?`, whose bound value this
   * build's planner (STAT4) reads at every execution (docs/query-plans.md).
   */
  limit: (name: string): Param => ({ kind: "param", name, type: "limit" }),
  /**
   * `FROM ${p.table("rows", "x", { id: "text", n: "int" })}`: a JS array of objects given as one
   * JSON value, read as a table named `alias` with these columns (one statement for many rows).
   * A `json` or `textList` column holds an object or an array (SQLite keeps it as JSON text).
   */
  table: (name: string, alias: string, columns: Readonly<Record<string, ColumnType>>): Param => ({
    kind: "param",
    name,
    type: "json",
    table: { alias, columns },
  }),
  /**
   * A JS array as one PostgreSQL array of `element` (`$n::int[]`), for a PostgreSQL-only statement
   * that unnests many rows' values (SQLite: JSON text).
   */
  array: (name: string, element: string): Param => ({ kind: "param", name, type: "array", element }),
  now: { kind: "now" } as Now,
  only: (texts: { sqlite?: string | Statement; postgres?: string | Statement }): Only => ({
    kind: "only",
    sqlite: texts.sqlite ?? "",
    postgres: texts.postgres ?? "",
  }),
};

/**
 * A statement, as a tagged template: sql("name")`SELECT … WHERE id = ${p.text("id")}`. A slot may
 * also be another statement, whose parts are written in its place (a fragment written once, such as
 * the lease fence's condition).
 */
export function sql(name: string) {
  return (
    strings: TemplateStringsArray,
    ...slots: (Param | Now | Only | Statement | string)[]
  ): Statement => {
    const parts: Part[] = [];
    strings.forEach((s, i) => {
      parts.push(s);
      if (i >= slots.length) return;
      const slot = slots[i] as Part | Statement;
      if (typeof slot !== "string" && "parts" in slot) parts.push(...slot.parts);
      else parts.push(slot);
    });
    return { name, parts };
  };
}

/** A statement compiled for one dialect: its text and the values in placeholder order. */
export interface Compiled {
  readonly text: string;
  /**
   * Whether the dialect runs the statement at all: one whose every part belongs to the other dialect
   * (a lock only PostgreSQL takes) is no statement there, and its step returns no rows.
   */
  readonly runs: boolean;
  /** Named values in placeholder order, and where the clock goes. */
  readonly order: readonly (Param | Now)[];
}

const PG_CAST: Record<ParamType, string> = {
  text: "text",
  int: "bigint",
  json: "jsonb",
  bool: "boolean",
  textList: "text[]",
  texts: "text[]",
  limit: "bigint",
  array: "text[]",
};

const PG_COLUMN: Record<ColumnType, string> = {
  text: "text",
  int: "bigint",
  bool: "boolean",
  json: "jsonb",
  textList: "text[]",
};

/** A table given as JSON: jsonb_to_recordset on PostgreSQL, json_each and json_extract on SQLite. */
function tablePlaceholder(table: NonNullable<Param["table"]>, dialect: Dialect, n: number): string {
  const columns = Object.entries(table.columns);
  if (dialect === "postgres")
    return `jsonb_to_recordset($${n}::jsonb) AS ${table.alias}(${columns.map(([c, t]) => `${c} ${PG_COLUMN[t]}`).join(", ")})`;
  const read = columns.map(([c]) => `json_extract(value, '$.${c}') AS ${c}`).join(", ");
  return `(SELECT ${read} FROM json_each(?)) AS ${table.alias}`;
}

/** How a placeholder reads in each dialect (`?` and `$n::cast` but for lists, limits and tables). */
function placeholder(part: Param, dialect: Dialect, n: number): string {
  const type = part.type;
  if (part.table !== undefined) return tablePlaceholder(part.table, dialect, n);
  if (dialect === "sqlite")
    return type === "textList"
      ? " IN (SELECT value FROM json_each(?))"
      : type === "limit"
        ? "LIMIT ? + 0"
        : "?";
  const value = `$${n}::${type === "array" ? `${part.element ?? "text"}[]` : PG_CAST[type]}`;
  return type === "textList" ? ` = ANY(${value})` : type === "limit" ? `LIMIT ${value}` : value;
}

const compiled = { sqlite: new WeakMap<Statement, Compiled>(), postgres: new WeakMap<Statement, Compiled>() };

/** The parts `dialect` runs: each dialect-only part replaced by its text or fragment for it. */
function partsFor(parts: readonly Part[], dialect: Dialect): (string | Param | Now)[] {
  return parts.flatMap((part) => {
    if (typeof part === "string" || part.kind !== "only") return [part];
    const mine = part[dialect];
    return typeof mine === "string" ? [mine] : partsFor(mine.parts, dialect);
  });
}

export function compile(s: Statement, dialect: Dialect): Compiled {
  const cached = compiled[dialect].get(s);
  if (cached !== undefined) return cached;
  let text = "";
  const order: (Param | Now)[] = [];
  const parts = partsFor(s.parts, dialect);
  // PostgreSQL: one $n per name (a name used twice is one value); the clock, when the statement
  // reads it, is $1 (null for the server's now(), or a test clock's value).
  const usesNow = parts.some((part) => typeof part !== "string" && part.kind === "now");
  const numbers = new Map<string, number>();
  if (dialect === "postgres" && usesNow) order.push(p.now);
  for (const part of parts) {
    if (typeof part === "string") text += part;
    else if (part.kind === "now") {
      if (dialect === "postgres") text += NOW;
      else {
        text += "?";
        order.push(part);
      }
    } else if (dialect === "sqlite") {
      text += placeholder(part, dialect, 0);
      order.push(part);
    } else {
      let n = numbers.get(part.name);
      if (n === undefined) {
        n = numbers.size + (usesNow ? 2 : 1);
        numbers.set(part.name, n);
        order.push(part);
      }
      text += placeholder(part, dialect, n);
    }
  }
  const result = { text, order, runs: text.trim() !== "" };
  compiled[dialect].set(s, result);
  return result;
}

/** One step of a script, carried out by the dialect's driver. */
export type Step =
  | {
      readonly step: "rows";
      readonly statement: Statement;
      readonly values: Readonly<Record<string, unknown>>;
    }
  | {
      readonly step: "run";
      readonly statement: Statement;
      readonly values: Readonly<Record<string, unknown>>;
    }
  | { readonly step: "now" }
  | { readonly step: "mappers" }
  | { readonly step: "log"; readonly roomId: string; readonly line: LogLine }
  | {
      readonly step: "touch";
      readonly topic: ChangeTopic;
      readonly roomId: string | null;
      readonly nodes?: readonly string[];
    };

/** A store operation written once: a generator of steps, returning the operation's result. */
export type Script<T> = Generator<Step, T, unknown>;

/** The rows a statement returns. */
export function* rows<R = Row>(statement: Statement, values: Record<string, unknown> = {}): Script<R[]> {
  return (yield { step: "rows", statement, values }) as R[];
}

/** The first row a statement returns, if any. */
export function* row<R = Row>(
  statement: Statement,
  values: Record<string, unknown> = {},
): Script<R | undefined> {
  // Yielded here rather than through rows(): one generator less on every step of the hot path.
  return ((yield { step: "rows", statement, values }) as R[])[0];
}

/** Runs a statement; the number of rows it changed. */
export function* run(statement: Statement, values: Record<string, unknown> = {}): Script<number> {
  return (yield { step: "run", statement, values }) as number;
}

/** The transaction's clock, in epoch ms. */
export function* now(): Script<number> {
  return (yield { step: "now" }) as number;
}

/** The dialect's row → record mappers. */
export function* mappers(): Script<Mappers> {
  return (yield { step: "mappers" }) as Mappers;
}

/** A line of the room's event log, written with the transaction. */
export function* log(roomId: string, line: LogLine): Script<void> {
  yield { step: "log", roomId, line };
}

/** Listeners of `topic` hear of this transaction once it committed. */
export function* touch(topic: ChangeTopic, roomId: string | null, nodes?: readonly string[]): Script<void> {
  yield nodes === undefined ? { step: "touch", topic, roomId } : { step: "touch", topic, roomId, nodes };
}

/** The value each placeholder takes, from a step's named values (undefined is an error in the script). */
export function valuesOf(
  c: Compiled,
  statement: Statement,
  values: Readonly<Record<string, unknown>>,
  encode: (type: ParamType, v: unknown) => unknown,
  clock: () => unknown,
): unknown[] {
  return c.order.map((slot) => {
    if (slot.kind === "now") return clock();
    const v = values[slot.name];
    if (v === undefined)
      throw new Error(`statement "${statement.name}" was given no value for "${slot.name}"`);
    return v === null ? null : encode(slot.type, v);
  });
}
