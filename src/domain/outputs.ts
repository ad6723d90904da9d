/**
 * Task outputs (docs/architecture.md §6): a task declares the values it publishes for its
 * dependents, `outputs = { version = "[0-9]+\\.[0-9]+\\.[0-9]+" }`, each with an RE2 pattern held to
 * the limits of param-pattern.ts and matched against the whole value. Its action appends
 * `NAME=value` lines to the file named by DAGBOT_OUTPUT (GitHub Actions' GITHUB_OUTPUT convention,
 * one line a value: multi-line values are refused); after a successful exit the worker reads it
 * (parseOutputFile): only declared names, each once, every declared one present, each value within
 * its size and matching its pattern; any problem fails the task with a message naming the output
 * and the rule. A dependent's argument says `{tasks.ID.outputs.NAME}`: the schema checks that ID is
 * an ancestor (through `needs`) declaring NAME, and the worker puts the value in when the dependent
 * runs (substituteOutputs), where the action's own argument checks still apply, as for parameters.
 * A list output (`{ pattern, list = true, max_items }`) is the same line repeated, one an item, in
 * order; a fan-out (`for_each`) runs a task once per item (docs/architecture.md §6, "Fan-out").
 */
import type { RunArgValue } from "./action-argv.js";
import type { ArgValue } from "./model.js";
import type { CheckBudget } from "./params.js";
import { checkCost, compileParamPattern, PATTERN_LIMITS } from "./param-pattern.js";
import { holdsItemReference, holdsReference, OUTPUT_REFERENCE } from "./references.js";

export { OUTPUT_REFERENCE } from "./references.js";

export const OUTPUT_LIMITS = {
  /** Outputs one task may declare. */
  maxOutputs: 32,
  /** Bytes of the DAGBOT_OUTPUT file; a larger file fails the task unread. */
  maxFileBytes: 64 * 1024,
  /** Bytes of one value (UTF-8). */
  maxValueBytes: 4 * 1024,
  /**
   * Instructions × characters the checks of one attempt's outputs may spend together (see
   * param-pattern.ts): four commands' worth, since a worker checks up to 64 KiB, not one value.
   */
  maxCheckCost: 4 * PATTERN_LIMITS.maxCheckCost,
} as const;

/** The bounds of list outputs and the fan-outs over them (docs/architecture.md §6, "Fan-out"). */
export const FAN_OUT_LIMITS = {
  /** Items one list output may hold (and so instances one fan-out may have); `max_items` at most this. */
  maxItems: 1000,
  /**
   * Instructions × characters the checks of one list's items may spend together: sixteen times an
   * attempt's scalar outputs, so a list of 1,000 host names under a simple pattern fits.
   */
  maxListCheckCost: 16 * 4 * PATTERN_LIMITS.maxCheckCost,
  /**
   * Instances all the fan-outs of one run may add together, counted from their lists' max_items at
   * publish: a DAG of 1,000 tasks cannot become a run of a million rows.
   */
  maxRunInstances: 5000,
} as const;

/** A declared list output: the line `NAME=value` repeated, one an item, at most `maxItems` of them. */
export interface ListOutput {
  pattern: string;
  list: true;
  maxItems: number;
}

/** What a task declares for one output: its pattern (a single value), or a list. */
export type OutputDeclaration = string | ListOutput;

/** A published value: one string, or a list output's items in the order they were written. */
export type OutputValue = string | string[];

/** The pattern each value (or each item of a list) must match. */
export function outputPattern(declaration: OutputDeclaration): string {
  return typeof declaration === "string" ? declaration : declaration.pattern;
}

/** Whether the output is a list. */
export function isListOutput(declaration: OutputDeclaration | undefined): declaration is ListOutput {
  return typeof declaration === "object" && declaration !== null && declaration.list === true;
}

/**
 * A published value as the text faces show it: a single value as it is, a list as `[a, b, …]` with
 * its first items and its length (`[web1, web2, web3, … 50 items]`), so a line stays a line.
 */
export function outputValueText(value: OutputValue): string {
  if (typeof value === "string") return value;
  const shownItems = value.slice(0, 3).join(", ");
  if (value.length <= 3) return `[${shownItems}]`;
  return `[${shownItems}, … ${value.length} items]`;
}

/**
 * Why `count` items are too many for list output `name` of task `taskId`, or null: more than its
 * `max_items` (itself at most FAN_OUT_LIMITS.maxItems). `atLeast`: the count is a lower bound.
 */
export function listCountProblem(
  taskId: string,
  name: string,
  declaration: ListOutput,
  count: number,
  atLeast = false,
): string | null {
  if (count <= declaration.maxItems) return null;
  const bound =
    declaration.maxItems === FAN_OUT_LIMITS.maxItems
      ? `at most ${FAN_OUT_LIMITS.maxItems}, the most a list output may hold`
      : `at most ${declaration.maxItems} (its max_items)`;
  return `list output "${name}" of task ${taskId} has ${atLeast ? "at least " : ""}${count} items; ${bound}`;
}

/** A DAGBOT_OUTPUT file larger than OUTPUT_LIMITS.maxFileBytes, left unparsed: its size and its lines counted by name. */
export interface OversizeOutputFile {
  bytes: number;
  /** `NAME=` lines per name (names only, never values), as far as the reader counted. */
  lines: Record<string, number>;
  /** false when the reader stopped counting before the end of the file (the counts are lower bounds). */
  complete: boolean;
}

/**
 * Why an oversize DAGBOT_OUTPUT file fails its task: a list output written with more items than it
 * may hold is named first (so a 10,000-item list is refused for its count, not its size), else the
 * file's size.
 */
export function oversizeProblem(
  taskId: string,
  declared: Readonly<Record<string, OutputDeclaration>>,
  file: OversizeOutputFile,
): string {
  for (const name of Object.keys(declared)) {
    const declaration = declared[name]!;
    if (!isListOutput(declaration) || !Object.hasOwn(file.lines, name)) continue;
    const problem = listCountProblem(taskId, name, declaration, file.lines[name]!, !file.complete);
    if (problem !== null) return problem;
  }
  return `$DAGBOT_OUTPUT holds ${file.bytes} bytes; at most ${OUTPUT_LIMITS.maxFileBytes}`;
}

export interface OutputReference {
  taskId: string;
  name: string;
}

/** The outputs a string refers to, in order. */
export function outputReferences(text: string): OutputReference[] {
  return [...text.matchAll(OUTPUT_REFERENCE)].map((m) => ({ taskId: m[1] ?? "", name: m[2] ?? "" }));
}

/**
 * The argument names whose values refer to an output or to a fan-out's item: known only when the
 * task (or the instance) runs, so the action's checks of them wait until then.
 */
export function deferredArgs(args: Readonly<Record<string, ArgValue>>): Set<string> {
  const names = new Set<string>();
  for (const [key, value] of Object.entries(args))
    if (typeof value === "string" && (outputReferences(value).length > 0 || holdsItemReference(value)))
      names.add(key);
  return names;
}

function shown(value: string, max = 40): string {
  return JSON.stringify(value.length > max ? `${value.slice(0, max)}…` : value);
}

const utf8 = new TextEncoder();

/**
 * Why `value` cannot be output `name` of task `taskId` (declared with `pattern`), or null: its size,
 * a NUL or a line break, a reference, then the pattern, charged to `budget`.
 */
export function outputValueProblem(
  taskId: string,
  name: string,
  pattern: string,
  value: string,
  budget: CheckBudget,
  maxCost: number = OUTPUT_LIMITS.maxCheckCost,
): string | null {
  const what = `output "${name}" of task ${taskId}`;
  const bytes = utf8.encode(value).length;
  if (bytes > OUTPUT_LIMITS.maxValueBytes)
    return `${what} is ${bytes} bytes long; at most ${OUTPUT_LIMITS.maxValueBytes}`;
  if (value.includes("\0")) return `${what} contains a NUL byte`;
  if (/[\r\n]/.test(value)) return `${what} spans more than one line; a value is one line`;
  if (holdsReference(value))
    return `${what} (value ${shown(value)}) holds a {params.…}, {tasks.…} or {item} reference, which a value may not`;
  const compiled = compileParamPattern(pattern);
  if (typeof compiled === "string") return `${what} has an invalid pattern: it ${compiled}`;
  const cost = checkCost(compiled, value);
  if (budget.spent + cost > maxCost)
    return `${what}: checking the outputs would cost more than the ${maxCost} instructions × characters ${maxCost === OUTPUT_LIMITS.maxCheckCost ? "one attempt" : "one list"} may spend: publish shorter values or declare simpler patterns`;
  budget.spent += cost;
  if (!compiled.matches(value))
    return `${what} (value ${shown(value)}) does not match its pattern ${pattern}`;
  return null;
}

export type ParsedOutputs =
  { ok: true; values: Record<string, OutputValue> } | { ok: false; message: string };

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * The values an attempt of task `taskId` published in its DAGBOT_OUTPUT file (`text`, already read
 * within OUTPUT_LIMITS.maxFileBytes and decoded), against what the task declares. Empty lines are
 * skipped and a line may end in CRLF; a list output's lines are its items, in order (none: an empty
 * list), counted before any is checked so that too many are refused naming the count. The first
 * problem is the answer.
 */
export function parseOutputFile(
  taskId: string,
  declared: Readonly<Record<string, OutputDeclaration>>,
  text: string,
): ParsedOutputs {
  const fail = (message: string): ParsedOutputs => ({ ok: false, message });
  const names = Object.keys(declared);
  const declares = names.length === 0 ? "it declares no outputs" : `it declares ${names.join(", ")}`;
  const values: Record<string, OutputValue> = {};
  const budget: CheckBudget = { spent: 0 };
  const listBudgets = new Map<string, CheckBudget>();
  const lines = text.split("\n").map((raw) => (raw.endsWith("\r") ? raw.slice(0, -1) : raw));
  for (const name of names) {
    const declaration = declared[name]!;
    if (!isListOutput(declaration)) continue;
    const count = lines.filter((line) => line.startsWith(`${name}=`)).length;
    const problem = listCountProblem(taskId, name, declaration, count);
    if (problem !== null) return fail(problem);
    setOwn(values, name, []);
    listBudgets.set(name, { spent: 0 });
  }
  for (const [i, line] of lines.entries()) {
    if (line === "") continue;
    const where = `line ${i + 1} of $DAGBOT_OUTPUT`;
    const eq = line.indexOf("=");
    const heredoc = /^([A-Za-z_][A-Za-z0-9_]*)<</.exec(line);
    if (heredoc !== null && (eq < 0 || eq > line.indexOf("<<")))
      return fail(
        `${where}: output "${heredoc[1]}" is written as a multi-line value (NAME<<DELIMITER), which dagbot does not accept: write one NAME=value line`,
      );
    if (eq < 0) return fail(`${where} is not NAME=value: ${shown(line)}`);
    const name = line.slice(0, eq);
    const value = line.slice(eq + 1);
    if (!NAME.test(name)) return fail(`${where}: ${shown(name)} is not an output name`);
    if (!Object.hasOwn(declared, name))
      return fail(`output "${name}" is not declared by task ${taskId} (${declares})`);
    const declaration = declared[name]!;
    const listBudget = listBudgets.get(name);
    if (listBudget !== undefined) {
      const problem = outputValueProblem(
        taskId,
        name,
        outputPattern(declaration),
        value,
        listBudget,
        FAN_OUT_LIMITS.maxListCheckCost,
      );
      if (problem !== null) return fail(`${problem} (item ${(values[name] as string[]).length}, ${where})`);
      (values[name] as string[]).push(value);
      continue;
    }
    if (Object.hasOwn(values, name)) return fail(`output "${name}" is written twice (${where})`);
    const problem = outputValueProblem(taskId, name, outputPattern(declaration), value, budget);
    if (problem !== null) return fail(problem);
    setOwn(values, name, value);
  }
  const missing = names.filter((n) => !Object.hasOwn(values, n));
  if (missing.length > 0)
    return fail(
      `task ${taskId} declares output${missing.length > 1 ? "s" : ""} ${missing.map((n) => `"${n}"`).join(", ")} but did not write ${missing.length > 1 ? "them" : "it"} to $DAGBOT_OUTPUT (NAME=value lines)`,
    );
  return { ok: true, values };
}

/** Sets `name` as an own data property, whatever the name (never through a prototype setter). */
function setOwn<T>(record: Record<string, T>, name: string, value: T): void {
  Object.defineProperty(record, name, { value, enumerable: true, writable: true, configurable: true });
}

/** What a producer published, as the worker reads it before a dependent runs. */
export interface ProducerOutputs {
  /** The producer's declared outputs (name → pattern or list). */
  declared: Readonly<Record<string, OutputDeclaration>>;
  /** Its published values; null while it has none (it has not succeeded). */
  values: Readonly<Record<string, OutputValue>> | null;
  /**
   * For a fan-out (docs/architecture.md §6, "Fan-out"): each instance's published values, in item order
   * (null for one that published none); `values` is then null. A fan-out with no item has none.
   */
  instances?: ReadonlyArray<Readonly<Record<string, OutputValue>> | null>;
}

export type SubstituteResult =
  { ok: true; args: Record<string, RunArgValue> } | { ok: false; message: string };

/**
 * A task's arguments with every `{tasks.ID.outputs.NAME}` replaced by the producer's value, in one
 * pass (a value is never expanded again). Each value is checked again as when it was published;
 * a missing producer or value is a refusal naming it (the schema made both impossible for a DAG it
 * accepted, so this is defence in depth).
 */
export function substituteOutputs(
  taskId: string,
  args: Readonly<Record<string, ArgValue>>,
  producers: ReadonlyMap<string, ProducerOutputs>,
): SubstituteResult {
  const budget: CheckBudget = { spent: 0 };
  let problem: string | null = null;
  // A fan-in: an argument that is exactly one reference to a fan-out's output is the list of its
  // instances' values, in item order, each checked as when it was published.
  const lists = new Map<string, string[]>();
  for (const key of Object.keys(args)) {
    const raw = args[key];
    const ref = typeof raw === "string" ? parseWholeReference(raw) : null;
    const p = ref === null ? undefined : producers.get(ref.taskId);
    if (ref === null || p?.instances === undefined) continue;
    const declaration = Object.hasOwn(p.declared, ref.name) ? p.declared[ref.name]! : null;
    const items: string[] = [];
    for (const [i, values] of p.instances.entries()) {
      const v = values !== null && Object.hasOwn(values, ref.name) ? values[ref.name]! : null;
      if (declaration === null || typeof v !== "string") {
        problem ??= `argument "${key}" of task ${taskId} refers to ${raw as string}, but instance ${i} of fan-out ${ref.taskId} has published no output "${ref.name}"`;
        break;
      }
      problem ??= outputValueProblem(
        `${ref.taskId}[item=${i}]`,
        ref.name,
        outputPattern(declaration),
        v,
        budget,
      );
      items.push(v);
    }
    lists.set(key, items);
  }
  const out: Record<string, RunArgValue> = replaceReferences(args, (key, whole, producer, name) => {
    if (lists.has(key)) return whole;
    if (producers.get(producer)?.instances !== undefined) {
      problem ??= `argument "${key}" of task ${taskId} refers to ${whole}, the list of fan-out ${producer}'s values, inside a longer string: a list must be the whole argument`;
      return whole;
    }
    if (problem !== null) return whole;
    const p = producers.get(producer);
    const values = p?.values ?? null;
    if (p === undefined || values === null || !Object.hasOwn(values, name)) {
      problem = `argument "${key}" of task ${taskId} refers to ${whole}, but task ${producer} has published no output "${name}"`;
      return whole;
    }
    const v = values[name]!;
    const declaration = Object.hasOwn(p.declared, name) ? p.declared[name]! : null;
    if (typeof v !== "string" || isListOutput(declaration ?? undefined)) {
      problem = `argument "${key}" of task ${taskId} refers to ${whole}, but "${name}" of task ${producer} is a list output: a list is fanned out over (for_each), not put into an argument`;
      return whole;
    }
    problem =
      declaration === null
        ? `argument "${key}" of task ${taskId} refers to ${whole}, but task ${producer} declares no output "${name}"`
        : outputValueProblem(producer, name, outputPattern(declaration), v, budget);
    return v;
  });
  for (const [key, items] of lists) setOwn(out, key, items);
  return problem === null ? { ok: true, args: out } : { ok: false, message: problem };
}

const WHOLE_REFERENCE = new RegExp(`^${OUTPUT_REFERENCE.source}$`);

/** The producer and output a string names when it is exactly one output reference; else null. */
export function parseWholeReference(text: string): OutputReference | null {
  const m = WHOLE_REFERENCE.exec(text);
  return m === null ? null : { taskId: m[1] ?? "", name: m[2] ?? "" };
}

/**
 * A retry's task arguments (`!dag retry`): each reference to a task the retry does not run again is
 * replaced by the value that task published in the run retried (`published`, by task id), in one
 * pass; references to tasks it runs again stay, for its worker. A value the producer did not
 * publish leaves its reference, which the worker then refuses naming it.
 */
export function carryOutputs(
  args: Readonly<Record<string, ArgValue>>,
  published: ReadonlyMap<string, Readonly<Record<string, OutputValue>>>,
): Record<string, ArgValue> {
  return replaceReferences(args, (_key, whole, producer, name) => {
    const values = published.get(producer);
    const value = values !== undefined && Object.hasOwn(values, name) ? values[name]! : null;
    // A list is never put into an argument: its reference stays, for the worker to refuse.
    return typeof value === "string" ? value : whole;
  });
}

/**
 * `args` with each `{tasks.ID.outputs.NAME}` in a string value replaced by what `by` gives for it,
 * in one pass; each argument an own data property of the copy whatever its name.
 */
function replaceReferences(
  args: Readonly<Record<string, ArgValue>>,
  by: (key: string, whole: string, producer: string, name: string) => string,
): Record<string, ArgValue> {
  const out: Record<string, ArgValue> = {};
  for (const key of Object.keys(args)) {
    const raw = args[key]!;
    const value =
      typeof raw !== "string"
        ? raw
        : raw.replace(OUTPUT_REFERENCE, (whole, producer: string, name: string) =>
            by(key, whole, producer, name),
          );
    Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true });
  }
  return out;
}
