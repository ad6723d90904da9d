/**
 * Renders an action's argv template with a task's arguments: the one place where DAG input meets a
 * command line, so every value is checked against its declared pattern and lands in exactly one argv entry.
 */
import { compileRe2 } from "./re2.js";
import type { ArgValue } from "./model.js";

/** How one argument of an action is checked. */
export interface ArgSpec {
  /** The whole value must match it (RE2 syntax: matched in linear time, never backtracking). */
  pattern: string;
  /**
   * A placeholder that is a whole argv entry refuses a value starting with "-" (it would be read as an
   * option: `find {dir}` with dir = "-delete") unless this is true. Embedded placeholders
   * (`--out={file}`) are not affected.
   */
  allowLeadingDash?: boolean;
}

/** The part of an action that decides its command line (the executor's ActionDefinition extends it). */
export interface ActionTemplate {
  name: string;
  /** argv[0] is the executable; `{name}` anywhere in an element is replaced by that argument's value. */
  argv: string[];
  /** Every argument the action accepts, with the pattern its whole value must match. */
  args: Record<string, ArgSpec>;
}

export type RenderResult = { ok: true; argv: string[] } | { ok: false; message: string };

/**
 * A value as the worker hands it to the action: a DAG's value, or a fan-in's list (the values a
 * fan-out's instances published, outputs.ts), which fills each whole argv entry it is used in with
 * one entry per item, like xargs (docs/architecture.md §6, "Fan-out").
 */
export type RunArgValue = ArgValue | readonly string[];

/** Linux refuses a single argv string above 128 KiB (MAX_ARG_STRLEN); stay well under it. */
export const MAX_ARG_BYTES = 64 * 1024;

const utf8 = new TextEncoder();

const PLACEHOLDER = /\{([A-Za-z_][A-Za-z0-9_]*)\}/g;

/** The argument names an argv element refers to, in order of appearance. */
export function placeholdersOf(element: string): string[] {
  return [...element.matchAll(PLACEHOLDER)].map((match) => match[1] ?? "");
}

/** A compiled argument pattern: `matches` is a whole-value match in time linear in the value. */
export interface ArgPattern {
  matches(value: string): boolean;
}

const compiled = new Map<string, ArgPattern>();

/**
 * Compiles a configured pattern with RE2 (re2js), whose matching time is linear in the input: a
 * pattern like `(a+)+b` cannot freeze a node on a crafted argument. RE2 has no
 * backreferences or lookaround; such patterns are refused at config load. `matches` is a full match,
 * so no anchors are added, and `a)|(b` is a syntax error rather than a pattern escaping its anchors.
 * Returns an error message for an invalid pattern.
 */
export function compileArgPattern(pattern: string): ArgPattern | string {
  const known = compiled.get(pattern);
  if (known !== undefined) return known;
  try {
    const re = compileRe2(pattern);
    const result: ArgPattern = { matches: (value) => re.matches(value) };
    if (compiled.size > 1000) compiled.clear();
    compiled.set(pattern, result);
    return result;
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    return message.replace(/^error parsing regexp: /, "");
  }
}

/** The argument names that fill a whole argv entry (`{dir}` alone), where a leading "-" is an option. */
export function wholeEntryArgs(action: Pick<ActionTemplate, "argv">): Set<string> {
  const names = new Set<string>();
  action.argv.forEach((element, index) => {
    if (index === 0) return;
    const match = /^\{([A-Za-z_][A-Za-z0-9_]*)\}$/.exec(element);
    if (match?.[1] !== undefined) names.add(match[1]);
  });
  return names;
}

/** Whether a "--" entry comes before the first whole-entry use of `name` (ends the program's options). */
export function endOfOptionsBefore(action: Pick<ActionTemplate, "argv">, name: string): boolean {
  const at = action.argv.indexOf(`{${name}}`);
  return at > 0 && action.argv.slice(1, at).includes("--");
}

function stringify(value: ArgValue): string {
  return typeof value === "string" ? value : String(value);
}

/** Why `raw` cannot be argument `name` of the action (its type, size, pattern, a leading "-"), or null. */
function valueProblem(
  action: ActionTemplate,
  name: string,
  spec: ArgSpec,
  raw: unknown,
  whole: ReadonlySet<string>,
): string | null {
  if (typeof raw !== "string" && typeof raw !== "number" && typeof raw !== "boolean")
    return "must be a string, number or boolean";
  const value = stringify(raw);
  if (value.includes("\0")) return "contains a NUL byte";
  if (utf8.encode(value).length > MAX_ARG_BYTES) return `is longer than ${MAX_ARG_BYTES} bytes`;
  const pattern = compileArgPattern(spec.pattern);
  if (typeof pattern === "string") return `has an invalid pattern in the node config: ${pattern}`;
  if (!pattern.matches(value)) return `does not match its pattern ${spec.pattern}`;
  if (value.startsWith("-") && whole.has(name) && spec.allowLeadingDash !== true)
    return `starts with "-", which the program would read as an option; action "${action.name}" does not allow that for "${name}"`;
  return null;
}

/** One argument problem: `arg` names the argument, or is null for a problem of the action itself. */
export interface ArgProblem {
  arg: string | null;
  message: string;
}

/**
 * Checks `args` against an action's declared arguments without building a command line: the same
 * checks renderArgv makes, one problem per argument, so a DAG can be refused when it is published
 * rather than when its task comes up. The values that pass are in `values`.
 * `deferred` names arguments whose values are known only when the task runs (they refer to another
 * task's output): only whether the action accepts them is checked; renderArgv checks their values.
 */
export function checkArgs(
  action: ActionTemplate,
  args: Readonly<Record<string, RunArgValue>>,
  deferred: ReadonlySet<string> = new Set(),
): { problems: ArgProblem[]; values: Map<string, string | string[]> } {
  const problems: ArgProblem[] = [];
  const values = new Map<string, string | string[]>();
  const whole = wholeEntryArgs(action);
  const fail = (arg: string, message: string): void => {
    problems.push({ arg, message: `argument "${arg}" ${message}` });
  };

  for (const name of Object.keys(args)) {
    if (!Object.hasOwn(action.args, name)) fail(name, `is not accepted by action "${action.name}"`);
  }
  for (const [name, spec] of Object.entries(action.args)) {
    if (!Object.hasOwn(args, name)) {
      fail(name, `is missing (action "${action.name}" requires it)`);
      continue;
    }
    if (deferred.has(name)) continue;
    const raw = args[name];
    if (Array.isArray(raw)) {
      // A fan-in's list: each item is checked as a value, and it may only fill whole argv entries.
      const embedded = action.argv.some(
        (element, index) =>
          placeholdersOf(element).includes(name) && (index === 0 || element !== `{${name}}`),
      );
      if (embedded) {
        fail(
          name,
          `is a list (${raw.length} items, a fan-out's values), which only fills a whole argv entry ("{${name}}" alone), one entry per item; action "${action.name}" uses it inside a longer entry`,
        );
        continue;
      }
      const items: string[] = [];
      for (const [i, item] of (raw as readonly unknown[]).entries()) {
        const problem = valueProblem(action, name, spec, item, whole);
        if (problem !== null) {
          fail(name, `item ${i}: ${problem}`);
          break;
        }
        items.push(item as string);
      }
      if (items.length === raw.length) values.set(name, items);
      continue;
    }
    const problem = valueProblem(action, name, spec, raw, whole);
    if (problem !== null) {
      fail(name, problem);
      continue;
    }
    values.set(name, stringify(raw as ArgValue));
  }
  for (const element of action.argv) {
    for (const name of placeholdersOf(element)) {
      if (!Object.hasOwn(action.args, name)) {
        problems.push({
          arg: null,
          message: `placeholder {${name}} of action "${action.name}" has no declared argument`,
        });
      }
    }
  }
  return { problems, values };
}

/**
 * Substitutes `args` into `action.argv`. One template element yields one argv entry (a value with
 * spaces, quotes or newlines is never split), except a whole entry filled by a fan-in's list, which
 * yields one entry per item, substitution is a single pass (a value containing
 * `{x}` stays literal), and every problem is reported naming its argument.
 */
export function renderArgv(
  action: ActionTemplate,
  args: Readonly<Record<string, RunArgValue>>,
): RenderResult {
  const { problems, values } = checkArgs(action, args);
  if (problems.length > 0) {
    return { ok: false, message: [...new Set(problems.map((p) => p.message))].join("; ") };
  }
  // A list (checkArgs allowed it only as a whole entry) gives one entry per item, none when empty.
  const argv = action.argv.flatMap((element, index) => {
    const listed = index > 0 ? /^\{([A-Za-z_][A-Za-z0-9_]*)\}$/.exec(element)?.[1] : undefined;
    const list = listed === undefined ? undefined : values.get(listed);
    if (Array.isArray(list)) return list;
    return [
      element.replace(PLACEHOLDER, (whole, name: string) => {
        const value = values.get(name);
        return typeof value === "string" ? value : whole;
      }),
    ];
  });
  if (argv.length === 0 || argv[0] === "") {
    return { ok: false, message: `action "${action.name}" has an empty argv` };
  }
  return { ok: true, argv };
}

/**
 * A value starting with "-" that the pattern accepts, found by probing option-like values; null when
 * none was found. For `dagbot validate --config` warnings: a probe, not a proof (RE2 gives no
 * intersection of languages), so it tries the shapes options take (`-x`, `--help`, `-1`, `-rf`...).
 */
export function leadingDashExample(pattern: string): string | null {
  const compiled = compileArgPattern(pattern);
  if (typeof compiled === "string") return null;
  const probes = ["-", "--", "-x", "-n", "-1", "-rf", "--help", "--version", "-delete", "--a=b", "-./", "-_"];
  for (let code = 0x20; code < 0x7f; code++) {
    const c = String.fromCharCode(code);
    for (const n of [1, 2, 3, 4, 8, 16]) probes.push(`-${c.repeat(n)}`, `--${c.repeat(n)}`);
  }
  return probes.find((probe) => compiled.matches(probe)) ?? null;
}

/**
 * What a node registers in the store about an action, for the leader's argument checks: its
 * arguments, and its argv reduced to where the placeholders sit. Literal entries are dropped (they
 * could hold a secret such as `--password=...`), but a whole-entry placeholder stays one.
 */
export function publicTemplate(action: ActionTemplate): ActionTemplate {
  return {
    name: action.name,
    argv: action.argv.map((element, index) => {
      if (index > 0 && /^\{[A-Za-z_][A-Za-z0-9_]*\}$/.test(element)) return element;
      return placeholdersOf(element)
        .map((name) => `…{${name}}`)
        .join("");
    }),
    args: Object.fromEntries(
      Object.entries(action.args).map(([name, spec]) => [
        name,
        spec.allowLeadingDash === true
          ? { pattern: spec.pattern, allowLeadingDash: true }
          : { pattern: spec.pattern },
      ]),
    ),
  };
}
