/**
 * parseDag: DAG document text (JSON or TOML) to a ParsedDag and its content hash, or every issue
 * with its place, collected in one pass. Never throws, whatever the input.
 */
import type * as z from "zod";
import type { ActionTemplate } from "./action-argv.js";
import { checkArgs } from "./action-argv.js";
import type { ParsedDag } from "./model.js";
import { dagHash } from "./canonical-hash.js";
import { checkGraph, graphView } from "./dag-graph.js";
import { deferredArgs } from "./outputs.js";
import { documentIndexes, parseInstanceId } from "./matrix.js";
import type { DagIssue } from "./dag-issues.js";
import { describeValue, formatPath, quote, suggestion } from "./dag-issues.js";
import { DOCUMENT_KEYS, GATE_KEYS, PLACEMENT_KEYS, TASK_KEYS, dagSchema } from "./dag-schema.js";
import type { DagFormat } from "./dag-text.js";
import { parseDocumentText } from "./dag-text.js";

export type { DagIssue } from "./dag-issues.js";
export { formatIssue } from "./dag-issues.js";
export type { DagFormat } from "./dag-text.js";
export { detectFormat, formatFromFileName } from "./dag-text.js";

export type ParseDagResult = { ok: true; dag: ParsedDag; hash: string } | { ok: false; issues: DagIssue[] };

/** Parses and validates a DAG document: size, syntax, schema, then graph, all issues at once. */
export function parseDag(text: string, format: DagFormat): ParseDagResult {
  return neverThrow(() => {
    if (typeof text !== "string") {
      return {
        ok: false,
        issues: [{ path: "", message: `expected document text, got ${describeValue(text)}` }],
      };
    }
    if (format !== "json" && format !== "toml") {
      return {
        ok: false,
        issues: [{ path: "", message: `unknown format ${quote(String(format))}; use json or toml` }],
      };
    }
    const raw = parseDocumentText(text, format);
    return raw.ok ? validateValue(raw.value) : raw;
  });
}

/** Validates an already-parsed document value (what JSON.parse or a TOML parser returned). */
export function validateDocument(raw: unknown): ParseDagResult {
  return neverThrow(() => validateValue(raw));
}

function validateValue(raw: unknown): ParseDagResult {
  const parsed = dagSchema.safeParse(raw, { error: describeZodIssue });
  const issues = parsed.success ? [] : parsed.error.issues.flatMap(toDagIssues);
  issues.push(...checkGraph(graphView(raw)));
  if (!parsed.success || issues.length > 0) return { ok: false, issues: inDocumentOrder(issues) };
  return { ok: true, dag: parsed.data, hash: dagHash(parsed.data) };
}

function neverThrow(validate: () => ParseDagResult): ParseDagResult {
  try {
    return validate();
  } catch (err) {
    // A bug of ours must still come back as an answer, not an exception through the caller.
    const reason = err instanceof Error ? err.message : String(err);
    return {
      ok: false,
      issues: [{ path: "", message: `internal error while validating: ${quote(reason, 200)}` }],
    };
  }
}

/** Issues for tasks whose action is not in `knownActions` (for the leader, which knows every node's). */
export function checkActions(dag: ParsedDag, knownActions: ReadonlySet<string>): DagIssue[] {
  const issues: DagIssue[] = [];
  const seen = new Set<number>();
  const places = documentIndexes(dag.tasks.map((t) => t.id));
  dag.tasks.forEach((task, n) => {
    if (task.gate !== undefined || knownActions.has(task.action)) return;
    // The instances of a matrix task share its action: one issue, at the document's task.
    const i = places[n] ?? n;
    if (seen.has(i)) return;
    seen.add(i);
    const known = [...knownActions].sort();
    const listed =
      known.length === 0 ? "no node offers any action" : `known: ${known.slice(0, 20).join(", ")}`;
    const more = known.length > 20 ? `, and ${known.length - 20} more` : "";
    issues.push({
      path: `tasks[${i}].action`,
      message: `unknown action ${quote(task.action)}${suggestion(task.action, known)} (${listed}${more})`,
    });
  });
  return issues;
}

/** One definition of an action and the nodes that registered it. */
export interface ActionOffer {
  template: ActionTemplate;
  nodes: string[];
}

/**
 * Issues for task arguments that the action's definition refuses (missing, unknown, not matching
 * the pattern, an option-like value): every definition the room's nodes registered for the action is
 * checked, since the task may run on any of them. Tasks whose action nobody defines are left to
 * checkActions. An argument that refers to another task's output is checked when the task runs.
 */
export function checkTaskArguments(
  dag: ParsedDag,
  offers: ReadonlyMap<string, readonly ActionOffer[]>,
): DagIssue[] {
  const issues: DagIssue[] = [];
  const places = documentIndexes(dag.tasks.map((t) => t.id));
  const seen = new Set<string>();
  dag.tasks.forEach((task, n) => {
    if (task.gate !== undefined) return;
    const defined = offers.get(task.action) ?? [];
    // An instance of a matrix task is placed at the document's task and named in the message.
    const i = places[n] ?? n;
    const instance = parseInstanceId(task.id) === null ? "" : ` (in ${task.id})`;
    for (const offer of defined) {
      const where = defined.length > 1 ? ` (as ${offer.nodes.slice(0, 3).join(", ")} define it)` : "";
      for (const problem of checkArgs(offer.template, task.args, deferredArgs(task.args)).problems) {
        const path = problem.arg === null ? `tasks[${i}].action` : `tasks[${i}].args.${problem.arg}`;
        const key = `${path}\0${problem.message}`;
        if (seen.has(key)) continue;
        seen.add(key);
        issues.push({ path, message: `${problem.message}${where}${instance}` });
      }
    }
  });
  return issues;
}

const EXPECTED_WORDS: Readonly<Record<string, string>> = {
  string: "a string",
  int: "an integer",
  number: "a number",
  boolean: "a boolean",
  array: "an array",
  object: "a table",
};

/** Our wording for zod's generic issues; null falls through to zod's own (never seen so far). */
function describeZodIssue(iss: z.core.$ZodRawIssue): string | undefined {
  const input: unknown = iss.input;
  switch (iss.code) {
    case "invalid_type": {
      if (input === undefined) return "is required";
      if ((iss.path ?? []).length === 0) {
        return `the document must be a table with "id" and "tasks", got ${describeValue(input)}`;
      }
      const shown = typeof input === "number" ? ` (${input})` : "";
      return `expected ${EXPECTED_WORDS[iss.expected] ?? iss.expected}, got ${describeValue(input)}${shown}`;
    }
    case "too_small":
    case "too_big": {
      const bound = iss.code === "too_small" ? `at least ${iss.minimum}` : `at most ${iss.maximum}`;
      if (iss.origin === "array" && Array.isArray(input))
        return `has ${input.length} items; ${bound} allowed`;
      if (iss.origin === "string" && typeof input === "string") {
        return `is ${input.length} characters long; ${bound} allowed`;
      }
      return `must be ${bound}, got ${String(input)}`;
    }
    default:
      return undefined;
  }
}

/** Common names people reach for, mapped to the key this schema calls them. */
const KEY_ALIASES: Readonly<Record<string, string>> = {
  depends_on: "needs",
  dependencies: "needs",
  deps: "needs",
  requires: "needs",
  after: "needs",
  name: "id",
  command: "action",
  cmd: "action",
  run: "action",
  params: "args",
  arguments: "args",
  labels: "on",
  node: "on",
  max_retries: "retries",
  retry: "retries",
  parallelism: "max_parallel",
};

function allowedKeysAt(path: readonly PropertyKey[]): readonly string[] {
  if (path.length === 0) return DOCUMENT_KEYS;
  if (path.length === 2 && path[0] === "tasks") return TASK_KEYS;
  if (path.length === 3 && path[0] === "tasks" && path[2] === "on") return PLACEMENT_KEYS;
  if (path.length === 3 && path[0] === "tasks" && path[2] === "approve") return GATE_KEYS;
  return [];
}

/** One DagIssue per zod issue, except unknown keys: one issue per key, placed at the key. */
function toDagIssues(issue: z.core.$ZodIssue): DagIssue[] {
  if (issue.code === "unrecognized_keys") {
    const allowed = allowedKeysAt(issue.path);
    return issue.keys.map((key) => {
      const alias = KEY_ALIASES[key];
      const hint =
        alias !== undefined && allowed.includes(alias)
          ? ` (did you mean ${quote(alias)}?)`
          : suggestion(key, allowed);
      return { path: formatPath([...issue.path, key]), message: `unknown key${hint}` };
    });
  }
  return [{ path: formatPath(issue.path), message: issue.message }];
}

/** Document-level issues first, then each task's issues in task order; stable within a task. */
function inDocumentOrder(issues: DagIssue[]): DagIssue[] {
  const taskIndex = (issue: DagIssue) => {
    const match = /^tasks\[(\d+)\]/.exec(issue.path);
    return match ? Number(match[1]) : -1;
  };
  return issues
    .map((issue, order) => ({ issue, order, task: taskIndex(issue) }))
    .sort((a, b) => a.task - b.task || a.order - b.order)
    .map((entry) => entry.issue);
}
