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
 */
import type { ArgValue } from "./model.js";
import type { CheckBudget } from "./params.js";
import { checkCost, compileParamPattern, PATTERN_LIMITS } from "./param-pattern.js";
import { holdsReference, OUTPUT_REFERENCE } from "./references.js";

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

export interface OutputReference {
  taskId: string;
  name: string;
}

/** The outputs a string refers to, in order. */
export function outputReferences(text: string): OutputReference[] {
  return [...text.matchAll(OUTPUT_REFERENCE)].map((m) => ({ taskId: m[1] ?? "", name: m[2] ?? "" }));
}

/** The argument names whose values refer to an output: known only when the task runs. */
export function deferredArgs(args: Readonly<Record<string, ArgValue>>): Set<string> {
  const names = new Set<string>();
  for (const [key, value] of Object.entries(args))
    if (typeof value === "string" && outputReferences(value).length > 0) names.add(key);
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
): string | null {
  const what = `output "${name}" of task ${taskId}`;
  const bytes = utf8.encode(value).length;
  if (bytes > OUTPUT_LIMITS.maxValueBytes)
    return `${what} is ${bytes} bytes long; at most ${OUTPUT_LIMITS.maxValueBytes}`;
  if (value.includes("\0")) return `${what} contains a NUL byte`;
  if (/[\r\n]/.test(value)) return `${what} spans more than one line; a value is one line`;
  if (holdsReference(value))
    return `${what} (value ${shown(value)}) holds a {params.…} or {tasks.…} reference, which a value may not`;
  const compiled = compileParamPattern(pattern);
  if (typeof compiled === "string") return `${what} has an invalid pattern: it ${compiled}`;
  const cost = checkCost(compiled, value);
  if (budget.spent + cost > OUTPUT_LIMITS.maxCheckCost)
    return `${what}: checking the outputs would cost more than the ${OUTPUT_LIMITS.maxCheckCost} instructions × characters one attempt may spend: publish shorter values or declare simpler patterns`;
  budget.spent += cost;
  if (!compiled.matches(value))
    return `${what} (value ${shown(value)}) does not match its pattern ${pattern}`;
  return null;
}

export type ParsedOutputs = { ok: true; values: Record<string, string> } | { ok: false; message: string };

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * The values an attempt of task `taskId` published in its DAGBOT_OUTPUT file (`text`, already read
 * within OUTPUT_LIMITS.maxFileBytes and decoded), against what the task declares. Empty lines are
 * skipped and a line may end in CRLF; the first problem is the answer.
 */
export function parseOutputFile(
  taskId: string,
  declared: Readonly<Record<string, string>>,
  text: string,
): ParsedOutputs {
  const fail = (message: string): ParsedOutputs => ({ ok: false, message });
  const names = Object.keys(declared);
  const declares = names.length === 0 ? "it declares no outputs" : `it declares ${names.join(", ")}`;
  const values: Record<string, string> = {};
  const budget: CheckBudget = { spent: 0 };
  const lines = text.split("\n");
  for (const [i, raw] of lines.entries()) {
    const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
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
    if (Object.hasOwn(values, name)) return fail(`output "${name}" is written twice (${where})`);
    const problem = outputValueProblem(taskId, name, declared[name]!, value, budget);
    if (problem !== null) return fail(problem);
    Object.defineProperty(values, name, { value, enumerable: true, writable: true, configurable: true });
  }
  const missing = names.filter((n) => !Object.hasOwn(values, n));
  if (missing.length > 0)
    return fail(
      `task ${taskId} declares output${missing.length > 1 ? "s" : ""} ${missing.map((n) => `"${n}"`).join(", ")} but did not write ${missing.length > 1 ? "them" : "it"} to $DAGBOT_OUTPUT (NAME=value lines)`,
    );
  return { ok: true, values };
}

/** What a producer published, as the worker reads it before a dependent runs. */
export interface ProducerOutputs {
  /** The producer's declared outputs (name → pattern). */
  declared: Readonly<Record<string, string>>;
  /** Its published values; null while it has none (it has not succeeded). */
  values: Readonly<Record<string, string>> | null;
}

export type SubstituteResult = { ok: true; args: Record<string, ArgValue> } | { ok: false; message: string };

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
  const out = replaceReferences(args, (key, whole, producer, name) => {
    if (problem !== null) return whole;
    const p = producers.get(producer);
    const values = p?.values ?? null;
    if (p === undefined || values === null || !Object.hasOwn(values, name)) {
      problem = `argument "${key}" of task ${taskId} refers to ${whole}, but task ${producer} has published no output "${name}"`;
      return whole;
    }
    const v = values[name]!;
    const pattern = Object.hasOwn(p.declared, name) ? p.declared[name]! : null;
    problem =
      pattern === null
        ? `argument "${key}" of task ${taskId} refers to ${whole}, but task ${producer} declares no output "${name}"`
        : outputValueProblem(producer, name, pattern, v, budget);
    return v;
  });
  return problem === null ? { ok: true, args: out } : { ok: false, message: problem };
}

/**
 * A retry's task arguments (`!dag retry`): each reference to a task the retry does not run again is
 * replaced by the value that task published in the run retried (`published`, by task id), in one
 * pass; references to tasks it runs again stay, for its worker. A value the producer did not
 * publish leaves its reference, which the worker then refuses naming it.
 */
export function carryOutputs(
  args: Readonly<Record<string, ArgValue>>,
  published: ReadonlyMap<string, Readonly<Record<string, string>>>,
): Record<string, ArgValue> {
  return replaceReferences(args, (_key, whole, producer, name) => {
    const values = published.get(producer);
    return values !== undefined && Object.hasOwn(values, name) ? values[name]! : whole;
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
