/**
 * The checks and the expansion of the document's matrix tasks (matrix.ts, docs/dag-format.md
 * "Matrix"): what can only be judged across tasks (references, the bounds of the whole DAG) is
 * checked here before any instance is built, so a refused document costs no expansion.
 */
import type { ArgValue, TaskSpec } from "./model.js";
import type { Matrix } from "./matrix.js";
import {
  combinations,
  instanceCount,
  instanceId,
  MATRIX_LIMITS,
  MATRIX_REFERENCE,
  matrixReferences,
  putMatrixValues,
} from "./matrix.js";

/** What the checks need of one document task, after the schema read it. */
export interface MatrixTaskDocument {
  id: string;
  matrix?: Matrix | undefined;
  args?: Readonly<Record<string, ArgValue>> | undefined;
}

export interface MatrixIssue {
  path: Array<string | number>;
  message: string;
}

export interface ExpansionBounds {
  maxTasks: number;
  maxArgLength: number;
  maxArgsTotal: number;
}

/**
 * Every problem of the document's matrices and `{matrix.AXIS}` references, in document order: a
 * reference outside a matrix task, to an axis it does not have, or not written whole; an instance
 * id past its bound; more tasks than a DAG may hold once expanded; an instance argument, or all
 * the arguments together, longer than their bounds (computed from lengths, before any is built).
 */
export function matrixIssues(tasks: readonly MatrixTaskDocument[], bounds: ExpansionBounds): MatrixIssue[] {
  const issues: MatrixIssue[] = [];
  let expanded = 0;
  let argsTotal = 0;
  tasks.forEach((task, i) => {
    if (task.matrix !== undefined && !wellFormed(task.matrix)) return; // refused by the schema
    const axes = task.matrix === undefined ? null : Object.keys(task.matrix);
    let referencesOk = true;
    for (const [key, value] of Object.entries(task.args ?? {})) {
      if (typeof value !== "string") continue;
      const refs = matrixReferences(value);
      const place = ["tasks", i, "args", key];
      if (value.split("{matrix.").length - 1 > refs.length) {
        referencesOk = false;
        issues.push({
          path: place,
          message: `says "{matrix." but not as a matrix reference: write {matrix.AXIS}`,
        });
      }
      for (const axis of new Set(refs)) {
        if (axes === null) {
          referencesOk = false;
          issues.push({
            path: place,
            message: `refers to {matrix.${axis}}, but task "${task.id}" has no matrix (give it matrix = { ${axis} = [...] })`,
          });
        } else if (!axes.includes(axis)) {
          referencesOk = false;
          issues.push({
            path: place,
            message: `refers to {matrix.${axis}}, but the matrix of "${task.id}" has no axis "${axis}" (it has ${axes.join(", ")})`,
          });
        }
      }
    }
    if (task.matrix === undefined || axes === null) {
      expanded += 1;
      argsTotal += argsLength(task.args ?? {});
      return;
    }
    const count = instanceCount(task.matrix);
    if (count === 0 || count > MATRIX_LIMITS.maxInstances) return; // refused by the schema
    expanded += count;
    const longest =
      task.id.length +
      2 +
      axes.length -
      1 +
      axes.reduce(
        (n, axis) => n + axis.length + 1 + Math.max(...task.matrix![axis]!.map((v) => v.length)),
        0,
      );
    if (longest > MATRIX_LIMITS.maxInstanceIdLength)
      issues.push({
        path: ["tasks", i, "matrix"],
        message: `makes instance ids up to ${longest} characters long; at most ${MATRIX_LIMITS.maxInstanceIdLength} (shorten the task id, axis names or values)`,
      });
    if (!referencesOk) return;
    for (const combination of combinations(task.matrix)) {
      const values = new Map(combination);
      for (const [key, value] of Object.entries(task.args ?? {})) {
        const length = typeof value === "string" ? appliedLength(value, values) : primitiveLength(value);
        if (length > bounds.maxArgLength) {
          issues.push({
            path: ["tasks", i, "args", key],
            message: `is ${length} characters long in ${instanceId(task.id, combination)}, with its matrix values put in; at most ${bounds.maxArgLength}`,
          });
          return;
        }
        argsTotal += length;
      }
    }
  });
  if (expanded > bounds.maxTasks)
    issues.push({
      path: ["tasks"],
      message: `expands to ${expanded} tasks with its matrices; a DAG may have at most ${bounds.maxTasks}`,
    });
  if (argsTotal > bounds.maxArgsTotal)
    issues.push({
      path: ["tasks"],
      message: `expands to ${argsTotal} characters of task arguments with its matrices; at most ${bounds.maxArgsTotal} together`,
    });
  return issues;
}

/** A matrix the schema accepted: a table of non-empty lists of strings (checks run even when it did not). */
function wellFormed(matrix: unknown): matrix is Matrix {
  return (
    typeof matrix === "object" &&
    matrix !== null &&
    Object.values(matrix).every(
      (values) => Array.isArray(values) && values.length > 0 && values.every((v) => typeof v === "string"),
    )
  );
}

function argsLength(args: Readonly<Record<string, ArgValue>>): number {
  return Object.values(args).reduce<number>((n, v) => n + primitiveLength(v), 0);
}

/** The shown length of an argument; 0 for what is not one (the schema refused it: this still runs). */
function primitiveLength(value: unknown): number {
  return typeof value === "string"
    ? value.length
    : typeof value === "number" || typeof value === "boolean"
      ? String(value).length
      : 0;
}

function appliedLength(value: string, values: ReadonlyMap<string, string>): number {
  let length = value.length;
  for (const m of value.matchAll(MATRIX_REFERENCE)) {
    const put = values.get(m[1] ?? "");
    if (put !== undefined) length += put.length - m[0].length;
  }
  return length;
}

/**
 * The tasks of a checked document with every matrix task expanded: one instance per combination,
 * in order, each with its id, its arguments' `{matrix.AXIS}` put in, and the needs of its matrix
 * task. A need of a matrix task becomes a need of each of its instances. A document without a matrix
 * gives its tasks back unchanged, so its hash is the one it always had.
 */
export function expandTasks(
  documents: readonly MatrixTaskDocument[],
  specs: readonly TaskSpec[],
): TaskSpec[] {
  const instancesOf = new Map<string, string[]>();
  for (const doc of documents)
    if (doc.matrix !== undefined)
      instancesOf.set(
        doc.id,
        combinations(doc.matrix).map((c) => instanceId(doc.id, c)),
      );
  if (instancesOf.size === 0) return [...specs];
  return specs.flatMap((spec, i) => {
    const needs = spec.needs.flatMap((need) => instancesOf.get(need) ?? [need]);
    const matrix = documents[i]?.matrix;
    if (matrix === undefined) return [{ ...spec, needs }];
    return combinations(matrix).map((combination) => ({
      ...spec,
      id: instanceId(spec.id, combination),
      args: withValues(spec.args, combination),
      needs: [...needs],
    }));
  });
}

function withValues(
  args: Readonly<Record<string, ArgValue>>,
  combination: ReadonlyArray<readonly [string, string]>,
): Record<string, ArgValue> {
  const out: Record<string, ArgValue> = {};
  for (const key of Object.keys(args)) {
    const raw = args[key]!;
    const value = typeof raw === "string" ? putMatrixValues(raw, combination) : raw;
    Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true });
  }
  return out;
}
