/** The DAG document schema (docs/architecture.md §6): one zod schema for JSON and TOML, its limits and durations. */
import * as z from "zod";
import type { ArgValue, ParsedDag, TaskSpec } from "./model.js";
import type { GateSpec, GateWho } from "./gates.js";
import { describeChar, describeValue, quote } from "./dag-issues.js";
import { parseDuration } from "./duration.js";
import { compileParamPattern } from "./param-pattern.js";
import { FAN_OUT_LIMITS, isListOutput, OUTPUT_LIMITS, outputReferences } from "./outputs.js";
import type { OutputDeclaration } from "./outputs.js";
import { newCheckBudget, PARAM_LIMITS, paramReferences, paramValueProblem } from "./params.js";
import { scheduleProblem } from "./schedule.js";
import { AFTER_STATUSES, parseAfterSource } from "./after.js";
import { MATRIX_LIMITS, MATRIX_VALUE } from "./matrix.js";
import { expandTasks, matrixIssues } from "./matrix-expansion.js";
import { fanOutIssues, toForEachSpec } from "./fan-out.js";
import { RUN_WHENS } from "./run-when.js";

/** Every limit a DAG document is held to; messages quote these numbers. */
export const DAG_LIMITS = {
  /** Checked on the UTF-8 bytes before any parsing, so a huge paste costs nothing. */
  maxDocumentBytes: 64 * 1024,
  maxTasks: 1000,
  maxIdLength: 64,
  maxArgs: 64,
  maxArgStringLength: 4096,
  maxLabels: 32,
  maxDescriptionLength: 1000,
  maxRetries: 10,
  minPriority: -1000,
  maxPriority: 1000,
  /** A week: longer than any sane task, short enough that a typo ("1000h") is caught. */
  maxDurationMs: 7 * 24 * 60 * 60 * 1000,
  /** Deeper than any valid document (which nests 4 levels); past this we stop before zod. */
  maxNesting: 32,
} as const;

/** The backoff base when a task says nothing: retries wait 1 s, 2 s, 4 s, ... */
export const DEFAULT_RETRY_BACKOFF_MS = 1000;

const ID_CHAR = /[A-Za-z0-9_.-]/;
export const ID_PATTERN = /^[A-Za-z0-9_.-]{1,64}$/;

/** Names that must never become keys of an object we build, whatever the id pattern allows. */
const RESERVED_NAMES: ReadonlySet<string> = new Set(["__proto__", "constructor", "prototype"]);

/** Why `value` is not a valid id (DAG, task, action, label, node, concurrency key), or null if it is. */
export function idProblem(value: string): string | null {
  if (value.length === 0) return "must not be empty";
  let position = 0;
  for (const ch of value) {
    position++;
    if (!ID_CHAR.test(ch)) {
      return `contains ${describeChar(ch)} at position ${position}; ids use only letters A-Z a-z, digits, "_", "." and "-"`;
    }
  }
  if (value.length > DAG_LIMITS.maxIdLength) {
    return `is ${value.length} characters long; at most ${DAG_LIMITS.maxIdLength} are allowed`;
  }
  return null;
}

const ARG_NAME_CHAR = /[A-Za-z0-9_]/;

/**
 * Why `name` cannot be an argument name, or null. Argument names are what an action's argv
 * template can name as `{placeholder}` (see action-argv.ts), so anything else could never be used.
 */
export function argNameProblem(name: string): string | null {
  if (name.length === 0) return "must not be empty";
  let position = 0;
  for (const ch of name) {
    position++;
    if (!ARG_NAME_CHAR.test(ch) || (position === 1 && /[0-9]/.test(ch))) {
      return `contains ${describeChar(ch)} at position ${position}; argument names start with a letter or "_" and use only letters, digits and "_"`;
    }
  }
  if (name.length > DAG_LIMITS.maxIdLength) {
    return `is ${name.length} characters long; at most ${DAG_LIMITS.maxIdLength} are allowed`;
  }
  return null;
}

const DURATION_HINT = 'use a number and a unit, like "500ms", "30s", "10m", "1h" or "1h30m"';

/** A task duration in milliseconds: the shared duration syntax, positive and at most a week. */
function taskDuration(text: string): { ok: true; ms: number } | { ok: false; message: string } {
  const ms = parseDuration(text);
  if (ms === null) return { ok: false, message: `${quote(text, 32)} is not a duration; ${DURATION_HINT}` };
  if (ms <= 0) return { ok: false, message: `${quote(text, 32)} is zero; a duration must be at least 1ms` };
  if (ms > DAG_LIMITS.maxDurationMs) {
    return { ok: false, message: `${quote(text, 32)} is longer than the limit of 7 days` };
  }
  return { ok: true, ms };
}

const idSchema = z.string().superRefine((value, ctx) => {
  const problem = idProblem(value);
  if (problem !== null) ctx.addIssue({ code: "custom", message: problem });
});

const durationSchema = z
  .string({
    error: (iss) =>
      iss.input === undefined
        ? undefined
        : `expected a duration string like "30s", "10m" or "1h", got ${describeValue(iss.input)}`,
  })
  .transform((text, ctx) => {
    const parsed = taskDuration(text);
    if (parsed.ok) return parsed.ms;
    ctx.addIssue({ code: "custom", message: parsed.message });
    return z.NEVER;
  });

/** An integer in [min, max]; one wording whether the input is a string, a fraction or a table. */
function integer(min: number, max: number) {
  return z
    .int({
      error: (iss) =>
        // The checks below inherit this error; leave their wording to the shared error map.
        iss.code !== "invalid_type" || iss.input === undefined
          ? undefined
          : `expected an integer, got ${describeValue(iss.input)}${typeof iss.input === "number" ? ` (${iss.input})` : ""}`,
    })
    .min(min)
    .max(max);
}

function isTable(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value) && !(value instanceof Date);
}

/**
 * The entries of a table of named things (arguments, parameters) whose names may be used: it must
 * be a table of at most `max` entries, and each refused name (reserved, or not a valid name) is an
 * issue at its key. Values are read as own properties, so `__proto__` is a name like any other.
 */
function namedEntries(
  raw: unknown,
  ctx: z.RefinementCtx,
  what: "argument" | "parameter" | "output" | "field" | "axis",
  max: number,
): Array<[string, unknown]> {
  const whats = what === "axis" ? "axes" : `${what}s`;
  if (!isTable(raw)) {
    ctx.addIssue({ code: "custom", message: `expected a table of ${whats}, got ${describeValue(raw)}` });
    return [];
  }
  const keys = Object.keys(raw);
  if (keys.length > max)
    ctx.addIssue({ code: "custom", message: `has ${keys.length} ${whats}; at most ${max}` });
  const entries: Array<[string, unknown]> = [];
  for (const key of keys) {
    const problem = RESERVED_NAMES.has(key) ? null : argNameProblem(key);
    if (RESERVED_NAMES.has(key))
      ctx.addIssue({ code: "custom", path: [key], message: `${quote(key)} is a reserved name` });
    else if (problem !== null)
      ctx.addIssue({ code: "custom", path: [key], message: `${what} name ${problem}` });
    else entries.push([key, Object.getOwnPropertyDescriptor(raw, key)?.value]);
  }
  return entries;
}

/**
 * A copy of a checked map's own keys, each an own data property whatever its name (defineProperty:
 * nothing is ever assigned through a prototype setter), its value through `value`.
 */
function ownRecord<T>(raw: unknown, value: (v: unknown) => T = (v) => v as T): Record<string, T> {
  const out: Record<string, T> = {};
  for (const key of Object.keys(raw as Record<string, unknown>)) {
    const v = value(Object.getOwnPropertyDescriptor(raw, key)?.value);
    Object.defineProperty(out, key, { value: v, enumerable: true, writable: true, configurable: true });
  }
  return out;
}

/**
 * `{ NAME = "PATTERN" }` (a task's outputs, a gate's form): names as argument names, each pattern
 * compiled with RE2 within the limits of param-pattern.ts, like a parameter's.
 */
function patternsSchema(noun: "output" | "field", max: number, expected: string) {
  return z
    .unknown()
    .superRefine((raw, ctx) => {
      for (const [key, value] of namedEntries(raw, ctx, noun, max)) {
        if (typeof value !== "string" || value.length === 0) {
          ctx.addIssue({
            code: "custom",
            path: [key],
            message: `expected ${expected}, got ${describeValue(value)}`,
          });
          continue;
        }
        const compiled = compileParamPattern(value);
        if (typeof compiled === "string") ctx.addIssue({ code: "custom", path: [key], message: compiled });
      }
    })
    .transform((raw) => ownRecord<string>(raw));
}

/**
 * Arguments are checked by hand rather than with z.record: z.record silently drops an own
 * `__proto__` key (which JSON.parse creates), and a dropped key must be an error, not a surprise.
 */
const argsSchema = z
  .unknown()
  .superRefine((raw, ctx) => {
    for (const [key, value] of namedEntries(raw, ctx, "argument", DAG_LIMITS.maxArgs)) {
      if (typeof value === "string") {
        if (value.length > DAG_LIMITS.maxArgStringLength) {
          ctx.addIssue({
            code: "custom",
            path: [key],
            message: `is ${value.length} characters long; at most ${DAG_LIMITS.maxArgStringLength}`,
          });
        }
      } else if (!(typeof value === "boolean" || (typeof value === "number" && Number.isFinite(value)))) {
        ctx.addIssue({
          code: "custom",
          path: [key],
          message: `expected a string, number or boolean, got ${describeValue(value)}`,
        });
      }
    }
  })
  .transform((raw) => ownRecord<ArgValue>(raw));

const paramSchema = z.strictObject({
  // Its length and complexity are checked with its compilation (param-pattern.ts), in one message.
  pattern: z.string().min(1),
  default: z.string().max(PARAM_LIMITS.maxValueLength).optional(),
});

/**
 * `[params.NAME]`: names as argument names (not reserved ones), each pattern compiled with RE2
 * within the limits of param-pattern.ts, the defaults' checks sharing one budget.
 */
const paramsSchema = z
  .unknown()
  .superRefine((raw, ctx) => {
    const budget = newCheckBudget();
    for (const [key, value] of namedEntries(raw, ctx, "parameter", PARAM_LIMITS.maxParams)) {
      const spec = paramSchema.safeParse(value);
      if (!spec.success) {
        for (const issue of spec.error.issues)
          ctx.addIssue({ code: "custom", path: [key, ...issue.path.map(String)], message: issue.message });
        continue;
      }
      const compiled = compileParamPattern(spec.data.pattern);
      if (typeof compiled === "string") {
        ctx.addIssue({ code: "custom", path: [key, "pattern"], message: compiled });
        continue;
      }
      if (spec.data.default !== undefined) {
        const declared = { pattern: spec.data.pattern, default: null };
        const bad = paramValueProblem(key, declared, spec.data.default, budget);
        if (bad !== null) ctx.addIssue({ code: "custom", path: [key, "default"], message: bad });
      }
    }
  })
  .transform((raw) =>
    ownRecord(raw, (v) => {
      const spec = v as { pattern: string; default?: string };
      return { pattern: spec.pattern, default: spec.default ?? null };
    }),
  );

const listOutputSchema = z.strictObject({
  // Its length and complexity are checked with its compilation (param-pattern.ts), in one message.
  pattern: z.string().min(1),
  list: z.literal(true, { error: () => "must be true: the table form declares a list output" }),
  max_items: z
    .number()
    .int()
    .min(0)
    .optional()
    .superRefine((n, ctx) => {
      if (n !== undefined && n > FAN_OUT_LIMITS.maxItems)
        ctx.addIssue({
          code: "custom",
          message: `is ${n}; a list output may hold at most ${FAN_OUT_LIMITS.maxItems} items (the fan-out bound)`,
        });
    }),
});

/**
 * `outputs = { NAME = "PATTERN" }`: what a task publishes for its dependents (outputs.ts), or
 * `NAME = { pattern = "PATTERN", list = true, max_items = 100 }` for a list of values (one line an
 * item). Names as argument names; each pattern compiled with RE2 within the limits of
 * param-pattern.ts.
 */
const outputsSchema = z
  .unknown()
  .superRefine((raw, ctx) => {
    for (const [key, value] of namedEntries(raw, ctx, "output", OUTPUT_LIMITS.maxOutputs)) {
      let pattern: string;
      if (isTable(value)) {
        const list = listOutputSchema.safeParse(value);
        if (!list.success) {
          for (const issue of list.error.issues)
            ctx.addIssue({ code: "custom", path: [key, ...issue.path.map(String)], message: issue.message });
          continue;
        }
        pattern = list.data.pattern;
      } else if (typeof value === "string" && value.length > 0) pattern = value;
      else {
        ctx.addIssue({
          code: "custom",
          path: [key],
          message: `expected the output's pattern (a non-empty string, RE2, matched against the whole value) or a list output ({ pattern = "...", list = true, max_items = N }), got ${describeValue(value)}`,
        });
        continue;
      }
      const compiled = compileParamPattern(pattern);
      if (typeof compiled === "string")
        ctx.addIssue({ code: "custom", path: isTable(value) ? [key, "pattern"] : [key], message: compiled });
    }
  })
  .transform((raw) =>
    ownRecord<OutputDeclaration>(raw, (v) => {
      if (typeof v === "string") return v;
      const list = v as { pattern: string; max_items?: number };
      return { pattern: list.pattern, list: true, maxItems: list.max_items ?? FAN_OUT_LIMITS.maxItems };
    }),
  );

/**
 * `matrix = { AXIS = ["VALUE", ...] }` (matrix.ts): names as argument names, each axis a list of
 * distinct values with an id's characters (a value is part of its instance's id), at most
 * MATRIX_LIMITS.maxInstances combinations in all.
 */
const matrixSchema = z
  .unknown()
  .superRefine((raw, ctx) => {
    const entries = namedEntries(raw, ctx, "axis", MATRIX_LIMITS.maxAxes);
    if (isTable(raw) && Object.keys(raw).length === 0)
      ctx.addIssue({ code: "custom", message: "names no axis; a matrix needs at least one list of values" });
    const lengths: number[] = [];
    for (const [axis, values] of entries) {
      if (!Array.isArray(values) || values.length === 0 || values.length > MATRIX_LIMITS.maxValues) {
        const got = Array.isArray(values) ? `${values.length} values` : describeValue(values);
        ctx.addIssue({
          code: "custom",
          path: [axis],
          message: `expected a list of 1 to ${MATRIX_LIMITS.maxValues} values, got ${got}`,
        });
        lengths.push(0);
        continue;
      }
      lengths.push(values.length);
      const seen = new Set<string>();
      values.forEach((value: unknown, j) => {
        const problem =
          typeof value !== "string"
            ? `expected a string (write ${typeof value === "number" ? `"${value}"` : "it in quotes"}), got ${describeValue(value)}`
            : !MATRIX_VALUE.test(value)
              ? `${quote(value)} is not a matrix value: 1 to ${MATRIX_LIMITS.maxValueLength} characters of A-Z a-z 0-9 _ . - (it becomes part of the instance's id)`
              : seen.has(value)
                ? `${quote(value)} is listed twice`
                : null;
        if (typeof value === "string") seen.add(value);
        if (problem !== null) ctx.addIssue({ code: "custom", path: [axis, j], message: problem });
      });
    }
    const count = lengths.reduce((n, l) => n * l, 1);
    if (lengths.length > 0 && count > MATRIX_LIMITS.maxInstances)
      ctx.addIssue({
        code: "custom",
        message: `expands to ${count} instances (${lengths.join(" × ")}); a matrix task may have at most ${MATRIX_LIMITS.maxInstances}`,
      });
  })
  .transform((raw) => ownRecord<string[]>(raw, (v) => [...(v as string[])]));

/** The limits of an approval gate (`approve = { ... }`). */
export const GATE_LIMITS = {
  maxApprovers: 10,
  maxUsers: 50,
  maxUserIdLength: 255,
  maxPowerLevel: 1_000_000,
} as const;

const USER_ID = /^@[^\s:]+:[^\s]+$/;

/** `who`: "operators", a list of Matrix user ids, or a power level. */
const gateWhoSchema = z.unknown().transform((raw, ctx): GateWho => {
  if (raw === "operators") return raw;
  if (typeof raw === "number") {
    if (Number.isInteger(raw) && raw >= 0 && raw <= GATE_LIMITS.maxPowerLevel) return raw;
    ctx.addIssue({
      code: "custom",
      message: `a power level is an integer from 0 to ${GATE_LIMITS.maxPowerLevel}, got ${raw}`,
    });
    return z.NEVER;
  }
  if (Array.isArray(raw)) {
    if (raw.length === 0 || raw.length > GATE_LIMITS.maxUsers) {
      ctx.addIssue({
        code: "custom",
        message: `a list of approvers holds 1 to ${GATE_LIMITS.maxUsers} user ids, got ${raw.length}`,
      });
      return z.NEVER;
    }
    raw.forEach((u: unknown, i) => {
      if (typeof u !== "string" || u.length > GATE_LIMITS.maxUserIdLength || !USER_ID.test(u))
        ctx.addIssue({
          code: "custom",
          path: [i],
          message: `expected a Matrix user id like "@alice:example.org", got ${typeof u === "string" ? quote(u, 64) : describeValue(u)}`,
        });
    });
    const users = raw as string[];
    if (new Set(users).size !== users.length)
      ctx.addIssue({ code: "custom", message: "names someone twice" });
    return [...users];
  }
  ctx.addIssue({
    code: "custom",
    message: `expected "operators", a list of user ids or a power level, got ${typeof raw === "string" ? quote(raw, 64) : describeValue(raw)}`,
  });
  return z.NEVER;
});

/** `form = { NAME = "PATTERN" }`: names as argument names, each pattern compiled like a parameter's. */
const gateFormSchema = patternsSchema("field", PARAM_LIMITS.maxParams, "the field's pattern (a string)");

const gateSchema = z.strictObject({
  who: gateWhoSchema.optional(),
  approvers: integer(1, GATE_LIMITS.maxApprovers).optional(),
  publisher_may_approve: z.boolean().optional(),
  timeout: durationSchema.optional(),
  on_timeout: z.enum(["fail", "skip"]).optional(),
  description: z.string().max(DAG_LIMITS.maxDescriptionLength).optional(),
  form: gateFormSchema.optional(),
});

type GateDocument = z.output<typeof gateSchema>;

function toGateSpec(gate: GateDocument): GateSpec {
  return {
    who: gate.who ?? "operators",
    approvers: gate.approvers ?? 1,
    publisherMayApprove: gate.publisher_may_approve ?? false,
    timeoutMs: gate.timeout ?? null,
    onTimeout: gate.on_timeout ?? "fail",
    description: gate.description ?? null,
    form: gate.form ?? {},
  };
}

/** What a gate task's action is called where a task's action is shown. */
export const GATE_ACTION = "approve";

/** Keys of a task that mean running something: a gate (which runs nothing) may not say them. */
const ACTION_ONLY_KEYS = [
  "args",
  "on",
  "timeout",
  "queue_timeout",
  "retry_backoff",
  "retries",
  "concurrency_key",
  "priority",
  "outputs",
  "rerun_if_lost",
] as const;

/**
 * `for_each = { items = "{tasks.discover.outputs.hosts}", max_parallel = 8, fail_fast = false }`
 * (fan-out.ts): the task runs once per item of a list output of a task it needs.
 */
const forEachSchema = z.strictObject({
  items: z.string().min(1).max(200),
  max_parallel: integer(1, FAN_OUT_LIMITS.maxItems).optional(),
  fail_fast: z.boolean().optional(),
});

const placementSchema = z.strictObject({
  labels: z.array(idSchema).max(DAG_LIMITS.maxLabels).optional(),
  node: idSchema.optional(),
});

const WHEN_RULE = `must be one of ${RUN_WHENS.map((w) => `"${w}"`).join(", ")}`;

const taskSchema = z.strictObject({
  id: idSchema,
  action: idSchema.optional(),
  approve: gateSchema.optional(),
  args: argsSchema.optional(),
  needs: z.array(idSchema).max(DAG_LIMITS.maxTasks).optional(),
  on: placementSchema.optional(),
  timeout: durationSchema.optional(),
  queue_timeout: durationSchema.optional(),
  retry_backoff: durationSchema.optional(),
  retries: integer(0, DAG_LIMITS.maxRetries).optional(),
  concurrency_key: idSchema.optional(),
  priority: integer(DAG_LIMITS.minPriority, DAG_LIMITS.maxPriority).optional(),
  outputs: outputsSchema.optional(),
  // false: an attempt whose node was lost is never run again (task-states.ts, decideReap).
  rerun_if_lost: z.boolean().optional(),
  // Its run condition (run-when.ts): when it runs, by how its needs ended.
  when: z.enum(RUN_WHENS, { error: () => WHEN_RULE }).optional(),
  // Expanded at parse into one task per combination (matrix-expansion.ts); no spec keeps it.
  matrix: matrixSchema.optional(),
  // Expanded at run time by the leader, once per item of a list output (fan-out.ts).
  for_each: forEachSchema.optional(),
});

const AFTER_STATUS_RULE = `must be one of ${AFTER_STATUSES.map((s) => `"${s}"`).join(", ")} (or a list of them)`;
const afterStatusSchema = z.enum(AFTER_STATUSES, { error: () => AFTER_STATUS_RULE });

/** `after = { dag = "build", status = "succeeded", params = { version = "params.version" } }` (after.ts). */
const afterSchema = z.strictObject({
  dag: idSchema,
  status: z
    .union([afterStatusSchema, z.array(afterStatusSchema).min(1).max(AFTER_STATUSES.length)], {
      error: () => AFTER_STATUS_RULE,
    })
    .optional(),
  params: z
    .unknown()
    .superRefine((raw, ctx) => {
      // By hand, as arguments: z.record would drop an own `__proto__` key without a word.
      for (const [key, value] of namedEntries(raw, ctx, "parameter", PARAM_LIMITS.maxParams)) {
        if (typeof value !== "string" || value.length === 0 || value.length > 200)
          ctx.addIssue({
            code: "custom",
            path: [key],
            message: `expected where the value comes from ("params.NAME" or "tasks.TASK.outputs.NAME", at most 200 characters), got ${describeValue(value)}`,
          });
      }
    })
    .transform((raw) => {
      const out: Record<string, string> = {};
      for (const key of Object.keys(raw as Record<string, unknown>)) {
        if (RESERVED_NAMES.has(key)) continue; // refused above
        const value = Object.getOwnPropertyDescriptor(raw, key)?.value as string;
        Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true });
      }
      return out;
    })
    .optional(),
});

const documentSchema = z.strictObject({
  id: idSchema,
  description: z.string().max(DAG_LIMITS.maxDescriptionLength).optional(),
  max_parallel: integer(1, DAG_LIMITS.maxTasks).optional(),
  params: paramsSchema.optional(),
  schedule: z.string().min(1).max(200).optional(),
  timezone: z.string().min(1).max(64).optional(),
  missed: z.enum(["skip", "run_once"]).optional(),
  after: afterSchema.optional(),
  tasks: z
    .array(taskSchema)
    .min(1, { error: "a DAG needs at least one task" })
    .max(DAG_LIMITS.maxTasks, {
      error: (iss) =>
        `has ${Array.isArray(iss.input) ? iss.input.length : "too many"} tasks; at most ${DAG_LIMITS.maxTasks} are allowed`,
    }),
});

type TaskDocument = z.output<typeof taskSchema>;

function toTaskSpec(task: TaskDocument): TaskSpec {
  const spec: TaskSpec = {
    id: task.id,
    action: task.action ?? GATE_ACTION,
    args: task.args ?? {},
    needs: [...(task.needs ?? [])],
    on: { labels: [...(task.on?.labels ?? [])], node: task.on?.node ?? null },
    timeoutMs: task.timeout ?? null,
    queueTimeoutMs: task.queue_timeout ?? null,
    retries: task.retries ?? 0,
    retryBackoffMs: task.retry_backoff ?? DEFAULT_RETRY_BACKOFF_MS,
    concurrencyKey: task.concurrency_key ?? null,
    priority: task.priority ?? 0,
  };
  // Absent when none are declared, so a DAG without outputs keeps the hash it always had.
  if (task.outputs !== undefined && Object.keys(task.outputs).length > 0) spec.outputs = task.outputs;
  // Only a condition other than the default is kept, so a DAG that does not say it keeps its hash.
  if (task.when !== undefined && task.when !== "succeeded") spec.when = task.when;
  // Only `rerun_if_lost = false` is kept, so a DAG that does not say it keeps the hash it always had.
  if (task.rerun_if_lost === false) spec.rerunIfLost = false;
  // Only a fan-out's template carries the key, so a DAG without one keeps the hash it always had.
  if (task.for_each !== undefined) spec.forEach = toForEachSpec(task.for_each);
  // Only a gate carries the key, so a DAG without gates keeps the hash it always had. Its form's
  // fields are its outputs: the approved values are what dependents read as {tasks.ID.outputs.NAME}.
  if (task.approve !== undefined) {
    spec.gate = toGateSpec(task.approve);
    if (Object.keys(spec.gate.form).length > 0) spec.outputs = { ...spec.gate.form };
  }
  return spec;
}

/** Each task's ancestors (through `needs`, transitively); unknown needs and cycles end the walk. */
function ancestorsOf(tasks: readonly TaskDocument[]): Map<string, Set<string>> {
  const needs = new Map(tasks.map((t) => [t.id, t.needs ?? []]));
  const found = new Map<string, Set<string>>();
  for (const t of tasks) {
    const seen = new Set<string>();
    const stack = [...(needs.get(t.id) ?? [])];
    while (stack.length > 0) {
      const id = stack.pop()!;
      if (seen.has(id) || !needs.has(id)) continue;
      seen.add(id);
      stack.push(...(needs.get(id) ?? []));
    }
    found.set(t.id, seen);
  }
  return found;
}

/**
 * Why `{tasks.PRODUCER.outputs.NAME}` in an argument of task `taskId` cannot be resolved when it
 * runs, or null: the producer must exist, be an ancestor (so it has succeeded before the task
 * starts), and declare NAME.
 */
function outputReferenceProblem(
  taskId: string,
  producer: string,
  name: string,
  byId: ReadonlyMap<string, TaskDocument>,
  ancestors: ReadonlySet<string>,
  wholeArgument: boolean,
): string | null {
  const ref = `{tasks.${producer}.outputs.${name}}`;
  const task = byId.get(producer);
  if (task === undefined) return `refers to ${ref}, but the DAG has no task "${producer}"`;
  if (producer === taskId)
    return `refers to ${ref}, the task's own output; only a task it needs can give it one`;
  if (!ancestors.has(producer))
    return `refers to ${ref}, but "${producer}" is not among the tasks "${taskId}" needs (directly or through others), so it may not have run yet: add it to needs`;
  if (task.matrix !== undefined)
    return `refers to ${ref}, but "${producer}" is a matrix task, whose instances each have their own outputs: no one value is its`;
  // A fan-in: a fan-out's output is the list of its instances' values, which fills whole argv entries.
  if (task.for_each !== undefined && !wholeArgument)
    return `refers to ${ref}, the list of fan-out "${producer}"'s values, inside a longer string: a list must be the whole argument (it becomes one argv entry per item)`;
  // An approval gate's outputs are its form's fields.
  const declared: Record<string, OutputDeclaration> = task.outputs ?? task.approve?.form ?? {};
  if (!Object.hasOwn(declared, name)) {
    const names = Object.keys(declared);
    const has = names.length === 0 ? "it declares no outputs" : `it declares ${names.join(", ")}`;
    return `refers to ${ref}, but task "${producer}" declares no output "${name}" (${has})`;
  }
  if (isListOutput(declared[name]))
    return `refers to ${ref}, but "${name}" of task "${producer}" is a list output, not one value: run a task once per item with for_each = { items = "${ref}" }`;
  return null;
}

/**
 * The one schema for JSON and TOML documents. Its output is a ParsedDag with every default filled
 * in; the graph checks (dag-graph.ts) still have to pass before the result is a valid DAG.
 */
export const dagSchema = documentSchema
  .superRefine((doc, ctx) => {
    if (doc.schedule === undefined) {
      for (const key of ["timezone", "missed"] as const) {
        if (doc[key] !== undefined)
          ctx.addIssue({ code: "custom", path: [key], message: `only means something with a schedule` });
      }
    } else {
      const problem = scheduleProblem(doc.schedule, doc.timezone ?? "UTC");
      if (problem !== null) {
        ctx.addIssue({
          code: "custom",
          path: [doc.timezone !== undefined && /time ?zone/i.test(problem) ? "timezone" : "schedule"],
          message: `is not a valid schedule: ${problem}`,
        });
      }
      for (const [name, spec] of Object.entries(doc.params ?? {})) {
        if (spec.default === null)
          ctx.addIssue({
            code: "custom",
            path: ["params", name],
            message: "needs a default: a scheduled run has nobody to give a value",
          });
      }
    }
    const declared = doc.params ?? {};
    if (doc.after !== undefined) {
      if (doc.after.dag === doc.id)
        ctx.addIssue({ code: "custom", path: ["after", "dag"], message: "a DAG cannot run after itself" });
      const mapped = Object.entries(doc.after.params ?? {});
      for (const [name, source] of mapped.slice(0, PARAM_LIMITS.maxParams)) {
        if (RESERVED_NAMES.has(name) || typeof source !== "string") continue; // refused by afterSchema
        if (!Object.hasOwn(declared, name))
          ctx.addIssue({
            code: "custom",
            path: ["after", "params", name],
            message: `maps a parameter this DAG does not declare (declare it as [params.${name.slice(0, 64)}] with a pattern)`,
          });
        const parsed = parseAfterSource(source);
        if (typeof parsed === "string")
          ctx.addIssue({
            code: "custom",
            path: ["after", "params", name],
            message: `"${source.slice(0, 80)}" ${parsed}`,
          });
      }
    }
    // A task runs an action or is an approval gate, never both; a gate says nothing about running.
    doc.tasks.forEach((task, i) => {
      if (task.action === undefined && task.approve === undefined)
        ctx.addIssue({
          code: "custom",
          path: ["tasks", i, "action"],
          message: 'is required (or "approve", to make the task an approval gate)',
        });
      if (task.action !== undefined && task.approve !== undefined)
        ctx.addIssue({
          code: "custom",
          path: ["tasks", i, "approve"],
          message: 'a task is an action or an approval gate, not both: drop "action" or "approve"',
        });
      const gate = task.approve;
      if (gate === undefined) return;
      for (const key of ACTION_ONLY_KEYS) {
        if (task[key] !== undefined)
          ctx.addIssue({
            code: "custom",
            path: ["tasks", i, key],
            message:
              key === "outputs"
                ? "an approval gate's outputs are the fields of its form (approve.form)"
                : `means nothing on an approval gate (it runs nothing); its time limit is approve.timeout`,
          });
      }
      if (gate.on_timeout !== undefined && gate.timeout === undefined)
        ctx.addIssue({
          code: "custom",
          path: ["tasks", i, "approve", "on_timeout"],
          message: "only means something with a timeout",
        });
      if (Array.isArray(gate.who) && gate.approvers !== undefined && gate.approvers > gate.who.length)
        ctx.addIssue({
          code: "custom",
          path: ["tasks", i, "approve", "approvers"],
          message: `asks for ${gate.approvers} approvers, but only ${gate.who.length} ${gate.who.length === 1 ? "person is" : "people are"} listed in who`,
        });
    });
    // A run condition other than the default judges needs: a task must have some, and "denied" a
    // need that is an approval gate (run-when.ts).
    const gateIds = new Set(doc.tasks.filter((t) => t.approve !== undefined).map((t) => t.id));
    doc.tasks.forEach((task, i) => {
      if (task.when === undefined || task.when === "succeeded") return;
      const needs = task.needs ?? [];
      if (needs.length === 0)
        ctx.addIssue({
          code: "custom",
          path: ["tasks", i, "when"],
          message: `task "${task.id}" says when = "${task.when}" but needs nothing: a condition judges how the tasks it needs ended`,
        });
      else if (task.when === "denied" && !needs.some((n) => gateIds.has(n)))
        ctx.addIssue({
          code: "custom",
          path: ["tasks", i, "when"],
          message: `task "${task.id}" says when = "denied" but none of the tasks it needs (${needs.join(", ")}) is an approval gate: only a gate is denied`,
        });
    });
    // Every {params.NAME} a task argument says must be declared, and every
    // {tasks.ID.outputs.NAME} must name an ancestor's declared output: a typo is caught at publish.
    const byId = new Map(doc.tasks.map((t) => [t.id, t]));
    let ancestors: Map<string, Set<string>> | null = null;
    doc.tasks.forEach((task, i) => {
      for (const [key, value] of Object.entries(task.args ?? {})) {
        if (typeof value !== "string") continue;
        const refs = outputReferences(value);
        if (value.split("{tasks.").length - 1 > refs.length)
          ctx.addIssue({
            code: "custom",
            path: ["tasks", i, "args", key],
            message: `says "{tasks." but not as an output reference: write {tasks.TASK_ID.outputs.NAME}`,
          });
        for (const ref of refs) {
          ancestors ??= ancestorsOf(doc.tasks);
          const problem = outputReferenceProblem(
            task.id,
            ref.taskId,
            ref.name,
            byId,
            ancestors.get(task.id) ?? new Set(),
            refs.length === 1 && value === `{tasks.${ref.taskId}.outputs.${ref.name}}`,
          );
          if (problem !== null)
            ctx.addIssue({ code: "custom", path: ["tasks", i, "args", key], message: problem });
        }
        for (const name of paramReferences(value)) {
          if (Object.hasOwn(declared, name)) continue;
          ctx.addIssue({
            code: "custom",
            path: ["tasks", i, "args", key],
            message: `refers to {params.${name}}, but the DAG declares no parameter "${name}" (declare it as [params.${name}] with a pattern)`,
          });
        }
      }
    });
    // Matrix references and the bounds of the expanded DAG: an instance's argument is a document
    // argument (its length limit), and all of them together a run's (params.ts maxAppliedTotal).
    const expansion = {
      maxTasks: DAG_LIMITS.maxTasks,
      maxArgLength: DAG_LIMITS.maxArgStringLength,
      maxArgsTotal: PARAM_LIMITS.maxAppliedTotal,
    };
    for (const issue of matrixIssues(doc.tasks, expansion))
      ctx.addIssue({ code: "custom", path: issue.path, message: issue.message });
    for (const issue of fanOutIssues(doc.tasks))
      ctx.addIssue({ code: "custom", path: issue.path, message: issue.message });
  })
  .transform((doc): ParsedDag => {
    const dag: ParsedDag = {
      id: doc.id,
      description: doc.description ?? null,
      maxParallel: doc.max_parallel ?? null,
      tasks: expandTasks(doc.tasks, doc.tasks.map(toTaskSpec)),
    };
    // Absent when none are declared, so a DAG without parameters keeps the hash it always had.
    if (doc.params !== undefined && Object.keys(doc.params).length > 0) dag.params = doc.params;
    if (doc.schedule !== undefined)
      dag.schedule = { cron: doc.schedule, timezone: doc.timezone ?? "UTC", missed: doc.missed ?? "skip" };
    if (doc.after !== undefined) {
      const status = doc.after.status ?? "succeeded";
      const listed = [...new Set(typeof status === "string" ? [status] : status)];
      dag.after = {
        dag: doc.after.dag,
        status: listed.includes("finished") ? ["finished"] : listed,
        params: { ...(doc.after.params ?? {}) },
      };
    }
    return dag;
  });

/** The keys each level of the document allows, for "did you mean" hints on unknown keys. */
export const DOCUMENT_KEYS: readonly string[] = Object.keys(documentSchema.shape);
export const TASK_KEYS: readonly string[] = Object.keys(taskSchema.shape);
export const PLACEMENT_KEYS: readonly string[] = Object.keys(placementSchema.shape);
export const GATE_KEYS: readonly string[] = Object.keys(gateSchema.shape);
