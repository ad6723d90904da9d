/**
 * Renders an action's argv template with a task's arguments: the one place where DAG input meets a
 * command line, so every value is checked against its declared pattern and lands in exactly one argv entry.
 */
import type { ArgValue } from "./model.js";

/** The part of an action that decides its command line (the executor's ActionDefinition extends it). */
export interface ActionTemplate {
  name: string;
  /** argv[0] is the executable; `{name}` anywhere in an element is replaced by that argument's value. */
  argv: string[];
  /** Every argument the action accepts, with the pattern its whole value must match. */
  args: Record<string, { pattern: string }>;
}

export type RenderResult = { ok: true; argv: string[] } | { ok: false; message: string };

/** Linux refuses a single argv string above 128 KiB (MAX_ARG_STRLEN); stay well under it. */
export const MAX_ARG_BYTES = 64 * 1024;

const utf8 = new TextEncoder();

const PLACEHOLDER = /\{([A-Za-z_][A-Za-z0-9_]*)\}/g;

/** The argument names an argv element refers to, in order of appearance. */
export function placeholdersOf(element: string): string[] {
  return [...element.matchAll(PLACEHOLDER)].map((match) => match[1] ?? "");
}

/**
 * Compiles a configured pattern so that it must match a whole value. The pattern is first compiled on
 * its own: wrapping an unbalanced pattern such as `a)|(b` would otherwise produce a valid regex whose
 * anchors no longer cover every branch. Returns an error message for an invalid pattern.
 */
export function compileArgPattern(pattern: string): RegExp | string {
  try {
    new RegExp(pattern, "u");
    return new RegExp(`^(?:${pattern})$`, "u");
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}

function stringify(value: ArgValue): string {
  return typeof value === "string" ? value : String(value);
}

/**
 * Substitutes `args` into `action.argv`. One template element always yields one argv entry (a value
 * with spaces, quotes or newlines is never split), substitution is a single pass (a value containing
 * `{x}` stays literal), and every problem is reported naming its argument.
 */
export function renderArgv(action: ActionTemplate, args: Readonly<Record<string, ArgValue>>): RenderResult {
  const problems: string[] = [];
  const values = new Map<string, string>();

  for (const name of Object.keys(args)) {
    if (!Object.hasOwn(action.args, name)) {
      problems.push(`argument "${name}" is not accepted by action "${action.name}"`);
    }
  }
  for (const [name, spec] of Object.entries(action.args)) {
    if (!Object.hasOwn(args, name)) {
      problems.push(`argument "${name}" is missing (action "${action.name}" requires it)`);
      continue;
    }
    const raw = args[name];
    if (typeof raw !== "string" && typeof raw !== "number" && typeof raw !== "boolean") {
      problems.push(`argument "${name}" must be a string, number or boolean`);
      continue;
    }
    const value = stringify(raw);
    if (value.includes("\0")) {
      problems.push(`argument "${name}" contains a NUL byte`);
      continue;
    }
    if (utf8.encode(value).length > MAX_ARG_BYTES) {
      problems.push(`argument "${name}" is longer than ${MAX_ARG_BYTES} bytes`);
      continue;
    }
    const pattern = compileArgPattern(spec.pattern);
    if (typeof pattern === "string") {
      problems.push(`argument "${name}" has an invalid pattern in the node config: ${pattern}`);
      continue;
    }
    if (!pattern.test(value)) {
      problems.push(`argument "${name}" does not match its pattern ${spec.pattern}`);
      continue;
    }
    values.set(name, value);
  }

  const argv: string[] = [];
  for (const element of action.argv) {
    argv.push(
      element.replace(PLACEHOLDER, (whole, name: string) => {
        const value = values.get(name);
        if (value !== undefined) return value;
        if (!Object.hasOwn(action.args, name)) {
          problems.push(`placeholder {${name}} of action "${action.name}" has no declared argument`);
        }
        return whole;
      }),
    );
  }

  if (problems.length > 0) return { ok: false, message: [...new Set(problems)].join("; ") };
  if (argv.length === 0 || argv[0] === "") {
    return { ok: false, message: `action "${action.name}" has an empty argv` };
  }
  return { ok: true, argv };
}
