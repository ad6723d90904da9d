/**
 * DAG parameters: a DAG declares `[params.NAME]` with a pattern (RE2, matched against the
 * whole value) and an optional default; a run gives values (`!dag run ID name=value`), checked here
 * before the run exists, and a task argument's `{params.NAME}` is replaced by the value. A value is
 * text put into an argument value, so it ends up inside one argv entry at most, and the action's own
 * argument checks (pattern, leading "-") still apply to the result when the task runs.
 */
import type { ArgValue, ParamSpec, ParsedDag, TaskSpec } from "./model.js";
import { checkCost, compileParamPattern, PATTERN_LIMITS } from "./param-pattern.js";
import { holdsItemReference, holdsOutputReference, PARAM_REFERENCE } from "./references.js";
import { documentIndexes } from "./matrix.js";

export const PARAM_LIMITS = {
  maxParams: 32,
  maxPatternLength: PATTERN_LIMITS.maxSource,
  maxValueLength: 4096,
  /**
   * Characters of one task argument once the values are put in: what one argv entry may hold
   * (action-argv.ts refuses more at run time anyway; this refuses it before the run exists).
   */
  maxAppliedArgLength: 64 * 1024,
  /**
   * Characters of all of a run's arguments once the values are put in: a 64 KiB document whose
   * arguments repeat `{params.v}` 5,000 times would otherwise become 20 MB of arguments to check.
   */
  maxAppliedTotal: 1024 * 1024,
} as const;

/**
 * What the checks of one command have spent (instructions × characters, param-pattern.ts): a
 * publish's defaults and a run's given values each share one, so 32 parameters cannot add up to a
 * stall that no single one is.
 */
export interface CheckBudget {
  spent: number;
}

export function newCheckBudget(): CheckBudget {
  return { spent: 0 };
}

export { PARAM_REFERENCE } from "./references.js";

/** The parameter names a string refers to. */
export function paramReferences(text: string): string[] {
  return [...text.matchAll(PARAM_REFERENCE)].map((m) => m[1] ?? "");
}

function shown(value: string, max = 40): string {
  const cut = value.length > max ? `${value.slice(0, max)}…` : value;
  return JSON.stringify(cut);
}

/**
 * Why `value` cannot be the value of parameter `name` (declared as `spec`), or null. The check is
 * charged to `budget`: past PATTERN_LIMITS.maxCheckCost the value is refused before it is matched.
 */
export function paramValueProblem(
  name: string,
  spec: ParamSpec,
  value: string,
  budget: CheckBudget = newCheckBudget(),
): string | null {
  if (value.length > PARAM_LIMITS.maxValueLength)
    return `parameter "${name}" is ${value.length} characters long; at most ${PARAM_LIMITS.maxValueLength}`;
  if (value.includes("\0")) return `parameter "${name}" contains a NUL byte`;
  // Outputs are put in after parameters: a value saying {tasks.x.outputs.y} would become a
  // reference nobody checked.
  if (holdsOutputReference(value))
    return `parameter "${name}" holds an output reference ({tasks.…}), which a value may not`;
  // A fan-out's items are put in after parameters too (fan-out.ts).
  if (holdsItemReference(value))
    return `parameter "${name}" holds an item reference ({item}), which a value may not`;
  const pattern = compileParamPattern(spec.pattern);
  if (typeof pattern === "string") return `parameter "${name}" has an invalid pattern: it ${pattern}`;
  const cost = checkCost(pattern, value);
  const max = PATTERN_LIMITS.maxCheckCost;
  if (budget.spent + cost > max) {
    const what = `its ${value.length}-character value × its pattern's ${pattern.instructions} instructions = ${cost}`;
    const sum = budget.spent === 0 ? "" : `; with the parameters checked before it, ${budget.spent + cost}`;
    return `parameter "${name}": checking ${what}${sum}, over the ${max} one command may spend on checking values: give a shorter value or declare a simpler pattern`;
  }
  budget.spent += cost;
  if (!pattern.matches(value))
    return `parameter "${name}": ${shown(value)} does not match its pattern ${spec.pattern}`;
  return null;
}

export type ResolveResult =
  | { ok: true; values: Record<string, string> }
  /** `missing`: a parameter without a default was not given. */
  | { ok: false; message: string; missing?: true };

/**
 * The values of a new run of `dag`: each given pair must name a declared parameter (once), each
 * value must match its pattern, and every parameter without a default must be given. The first
 * problem is the answer, naming the parameter; nothing is partially applied.
 */
export function resolveParams(
  dag: ParsedDag,
  given: ReadonlyArray<readonly [string, string]>,
): ResolveResult {
  const declared = dag.params ?? {};
  const names = Object.keys(declared);
  const seen = new Set<string>();
  const budget = newCheckBudget();
  for (const [name, value] of given) {
    if (!Object.hasOwn(declared, name)) {
      const known = names.length === 0 ? "it declares none" : `it declares ${names.join(", ")}`;
      return { ok: false, message: `unknown parameter "${name.slice(0, 64)}" for ${dag.id}: ${known}` };
    }
    if (seen.has(name)) return { ok: false, message: `parameter "${name}" is given twice` };
    seen.add(name);
    const problem = paramValueProblem(name, declared[name]!, value, budget);
    if (problem !== null) return { ok: false, message: problem };
  }
  const values: Record<string, string> = {};
  const givenMap = new Map(given.map(([n, v]) => [n, v]));
  for (const name of names) {
    const spec = declared[name]!;
    const value = givenMap.get(name) ?? spec.default;
    if (value === null) {
      return {
        ok: false,
        missing: true,
        message: `parameter "${name}" is required (it has no default): give ${name}=<value> matching ${spec.pattern}`,
      };
    }
    Object.defineProperty(values, name, { value, enumerable: true, writable: true, configurable: true });
  }
  const tooLong = appliedSizeProblem(dag, values);
  if (tooLong !== null) return { ok: false, message: tooLong };
  return { ok: true, values };
}

/**
 * Why the run's arguments would be too long once `values` are put in, or null: computed from the
 * lengths alone, before any string is built.
 */
function appliedSizeProblem(dag: ParsedDag, values: Readonly<Record<string, string>>): string | null {
  let total = 0;
  // A matrix instance is placed at the document's task it came from (matrix.ts).
  const places = documentIndexes(dag.tasks.map((t) => t.id));
  for (const [n, task] of dag.tasks.entries()) {
    const i = places[n] ?? n;
    for (const [key, raw] of Object.entries(task.args)) {
      if (typeof raw !== "string") continue;
      let length = raw.length;
      for (const m of raw.matchAll(PARAM_REFERENCE)) {
        const name = m[1] ?? "";
        if (Object.hasOwn(values, name)) length += values[name]!.length - m[0].length;
      }
      if (length > PARAM_LIMITS.maxAppliedArgLength)
        return `with these parameter values, tasks[${i}].args.${key} would be ${length} characters long; at most ${PARAM_LIMITS.maxAppliedArgLength}`;
      total += length;
      if (total > PARAM_LIMITS.maxAppliedTotal)
        return `with these parameter values, the run's task arguments would come to more than ${PARAM_LIMITS.maxAppliedTotal} characters`;
    }
  }
  return null;
}

function substitute(value: ArgValue, values: Readonly<Record<string, string>>): ArgValue {
  if (typeof value !== "string") return value;
  // One pass: a value that itself says {params.x} is not expanded again.
  return value.replace(PARAM_REFERENCE, (whole, name: string) =>
    Object.hasOwn(values, name) ? values[name]! : whole,
  );
}

/** A task's arguments with its run's parameter values put in. */
export function taskArgs(dag: ParsedDag, task: TaskSpec): Record<string, ArgValue> {
  const values = dag.values;
  if (values === undefined) return task.args;
  const out: Record<string, ArgValue> = {};
  for (const key of Object.keys(task.args)) {
    const value = substitute(task.args[key]!, values);
    Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true });
  }
  return out;
}

/** The DAG as its run executes it: every task's arguments substituted (for checks and the card). */
export function appliedDag(dag: ParsedDag): ParsedDag {
  if (dag.values === undefined) return dag;
  return { ...dag, tasks: dag.tasks.map((t) => ({ ...t, args: taskArgs(dag, t) })) };
}

/** The definition part of a stored run's DAG: what its hash covers (no run values or origin). */
export function definitionOf(dag: ParsedDag): ParsedDag {
  const {
    values: _values,
    definition: _definition,
    slot: _slot,
    trigger: _trigger,
    hook: _hook,
    registered: _registered,
    ...rest
  } = dag;
  return rest;
}

/** The tasks a run of this DAG executes: none for a run that only registers its definition. */
export function executedTasks(dag: ParsedDag): ParsedDag["tasks"] {
  return dag.registered === true ? [] : dag.tasks;
}
