/**
 * Fan-out (`for_each`, docs/architecture.md §6, "Fan-out"): a task run once per item of a list output an
 * earlier task published. It is a matrix expanded at run time: when the producer succeeds, the
 * leader writes one ordinary task per item, `deploy[item=0]`, `deploy[item=1]`, ... (the matrix's id
 * grammar, so every face groups them as it groups a matrix's instances), each with the template's
 * action, placement, retries and timeouts and its own item put into its arguments where they say
 * `{item}` (and `{item.index}`, its position from 0). This module holds the pure parts: the
 * references, the checks a document is held to, and the instances' ids and arguments.
 */
import type { ArgValue, ForEachSpec, ParsedDag, TaskStatus } from "./model.js";
import {
  FAN_OUT_LIMITS,
  isListOutput,
  outputReferences,
  type OutputDeclaration,
  type OutputValue,
} from "./outputs.js";
import { ITEM_REFERENCE_SOURCE, OUTPUT_REFERENCE } from "./references.js";

/** The axis name of a fan-out instance's id: `deploy[item=3]`. */
export const ITEM_AXIS = "item";

/** `{item}` (the instance's item) or `{item.index}` (its position, from 0) in a for_each task's argument. */
export const ITEM_REFERENCE = new RegExp(ITEM_REFERENCE_SOURCE, "g");

/** `deploy[item=3]`: the id of item 3's instance of fan-out `deploy`. */
export function fanOutInstanceId(taskId: string, index: number): string {
  return `${taskId}[${ITEM_AXIS}=${index}]`;
}

/** How many `{item}` / `{item.index}` references a string holds. */
export function itemReferenceCount(text: string): number {
  return [...text.matchAll(ITEM_REFERENCE)].length;
}

/** The producer and output `for_each.items` names, when it is exactly one output reference; else null. */
export function parseItems(items: string): { producer: string; output: string } | null {
  const m = new RegExp(`^${OUTPUT_REFERENCE.source}$`).exec(items);
  return m === null ? null : { producer: m[1] ?? "", output: m[2] ?? "" };
}

/** What the checks need of one document task, after the schema read it. */
export interface FanOutTaskDocument {
  id: string;
  needs?: readonly string[] | undefined;
  args?: Readonly<Record<string, ArgValue>> | undefined;
  outputs?: Readonly<Record<string, OutputDeclaration>> | undefined;
  matrix?: unknown;
  approve?: unknown;
  when?: string | undefined;
  for_each?:
    { items: string; max_parallel?: number | undefined; fail_fast?: boolean | undefined } | undefined;
}

export interface FanOutIssue {
  path: Array<string | number>;
  message: string;
}

/**
 * Every problem of the document's fan-outs, in document order: `for_each` beside `matrix` or on an
 * approval gate; `items` that is not one output reference, or names a task that is not among the
 * task's needs, that is itself fanned out or a matrix task, or an output that is not a declared list;
 * `{item}` in a task without `for_each`, or a `{item` that is not a whole reference.
 */
export function fanOutIssues(tasks: readonly FanOutTaskDocument[]): FanOutIssue[] {
  const issues: FanOutIssue[] = [];
  const byId = new Map(tasks.map((t) => [t.id, t]));
  let instances = 0;
  let firstFanOut: number | null = null;
  tasks.forEach((task, i) => {
    const place = (...rest: Array<string | number>): Array<string | number> => ["tasks", i, ...rest];
    for (const [key, value] of Object.entries(task.args ?? {})) {
      if (typeof value !== "string") continue;
      const refs = itemReferenceCount(value);
      if (value.split("{item").length - 1 > refs)
        issues.push({
          path: place("args", key),
          message: `says "{item" but not as an item reference: write {item} or {item.index}`,
        });
      else if (refs > 0 && task.for_each === undefined)
        issues.push({
          path: place("args", key),
          message: `refers to the fan-out's item, but task "${task.id}" has no for_each (give it for_each = { items = "{tasks.TASK.outputs.LIST}" })`,
        });
    }
    const spec = task.for_each;
    if (spec === undefined) return;
    if (task.matrix !== undefined)
      issues.push({
        path: place("for_each"),
        message: "a task has a matrix or a for_each, not both: fan out over one list, or expand one matrix",
      });
    if (task.approve !== undefined)
      issues.push({
        path: place("for_each"),
        message: "an approval gate cannot fan out: it runs nothing (fan out the task after it)",
      });
    // A fan-out runs over what its producer published, so it runs only when its needs succeeded.
    if (task.when !== undefined && task.when !== "succeeded")
      issues.push({
        path: place("when"),
        message: `a fan-out runs over its producer's list, so only when its needs succeeded: give the condition to a task after it, not to "${task.id}"`,
      });
    const items = parseItems(spec.items);
    if (items === null) {
      issues.push({
        path: place("for_each", "items"),
        message: `must be exactly one list output reference, "{tasks.TASK.outputs.LIST}"; got ${JSON.stringify(spec.items.slice(0, 80))}`,
      });
      return;
    }
    const ref = spec.items;
    const producer = byId.get(items.producer);
    let problem: string | null = null;
    if (producer === undefined) problem = `refers to ${ref}, but the DAG has no task "${items.producer}"`;
    else if (producer.id === task.id) problem = `refers to ${ref}, the task's own output`;
    else if (!(task.needs ?? []).includes(producer.id))
      problem = `refers to ${ref}, but "${producer.id}" is not among the needs of "${task.id}": a fan-out needs its producer directly (add it to needs)`;
    else if (producer.matrix !== undefined || producer.for_each !== undefined)
      problem = `refers to ${ref}, but "${producer.id}" is a ${producer.matrix !== undefined ? "matrix task" : "fan-out"}, whose instances each publish their own list: no one list is its`;
    else if (!Object.hasOwn(producer.outputs ?? {}, items.output)) {
      const names = Object.keys(producer.outputs ?? {});
      const has = names.length === 0 ? "it declares no outputs" : `it declares ${names.join(", ")}`;
      problem = `refers to ${ref}, but task "${producer.id}" declares no output "${items.output}" (${has})`;
    } else if (!isListOutput(producer.outputs?.[items.output]))
      problem = `refers to ${ref}, but "${items.output}" of task "${producer.id}" is one value, not a list: declare it { pattern = "...", list = true }`;
    if (problem !== null) {
      issues.push({ path: place("for_each", "items"), message: problem });
      return;
    }
    const list = producer?.outputs?.[items.output];
    if (isListOutput(list)) instances += list.maxItems;
    firstFanOut ??= i;
  });
  if (instances > FAN_OUT_LIMITS.maxRunInstances && firstFanOut !== null)
    issues.push({
      path: ["tasks", firstFanOut, "for_each"],
      message: `the DAG's fan-outs may add up to ${instances} instances (the sum of their lists' max_items); a run may have at most ${FAN_OUT_LIMITS.maxRunInstances}: lower max_items`,
    });
  return issues;
}

/** A fan-out's spec as the parsed DAG keeps it: where its items come from, its limit, fail_fast. */
export function toForEachSpec(spec: NonNullable<FanOutTaskDocument["for_each"]>): ForEachSpec {
  const items = parseItems(spec.items);
  if (items === null) throw new Error(`for_each.items was checked: ${spec.items}`);
  return {
    producer: items.producer,
    output: items.output,
    maxParallel: spec.max_parallel ?? null,
    failFast: spec.fail_fast ?? false,
  };
}

/**
 * An instance's arguments: the template's with `{item}` and `{item.index}` put in, in one pass (an
 * item is never read for references again; outputs refuse values that hold any).
 */
export function instanceArgs(
  args: Readonly<Record<string, ArgValue>>,
  item: string,
  index: number,
): Record<string, ArgValue> {
  const out: Record<string, ArgValue> = {};
  for (const key of Object.keys(args)) {
    const raw = args[key]!;
    const value =
      typeof raw === "string"
        ? raw.replace(ITEM_REFERENCE, (_whole, dotIndex: string | undefined) =>
            dotIndex === undefined ? item : String(index),
          )
        : raw;
    Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true });
  }
  return out;
}

/** One instance the leader writes: its id, its arguments with its item put in, and its item. */
export interface PlannedInstance {
  id: string;
  args: Record<string, ArgValue>;
  item: string;
}

/**
 * The instances of fan-out `templateId` once its producer succeeded: one per item of the list the
 * producer published (`published`: its output values, null when it published none, as a producer an
 * operator marked succeeded), in order. A producer without the list gives no item, as an empty list
 * does: the fan-out's dependents then go on without it. More items than the bound (the worker
 * refuses them, so only a store written otherwise could hold them) expands nothing: the reason is
 * the answer, and the leader skips the template with it rather than stop scheduling the room.
 */
export function planExpansion(
  templateId: string,
  spec: ForEachSpec,
  args: Readonly<Record<string, ArgValue>>,
  published: Readonly<Record<string, OutputValue>> | null,
): PlannedInstance[] | string {
  const value =
    published !== null && Object.hasOwn(published, spec.output) ? published[spec.output] : undefined;
  const items = Array.isArray(value) ? value : [];
  if (items.length > FAN_OUT_LIMITS.maxItems)
    return `list output "${spec.output}" of task ${spec.producer} holds ${items.length} items; a fan-out may have at most ${FAN_OUT_LIMITS.maxItems}`;
  return items.map((item, index) => ({
    id: fanOutInstanceId(templateId, index),
    args: instanceArgs(args, item, index),
    item,
  }));
}

/**
 * A task's needs once fan-out `templateId` was replaced by `instances` (in place of the template, in
 * order; none for an empty list), or null when it did not need the template.
 */
export function needsAfterExpansion(
  needs: readonly string[],
  templateId: string,
  instances: readonly string[],
): string[] | null {
  if (!needs.includes(templateId)) return null;
  return needs.flatMap((n) => (n === templateId ? instances : [n]));
}

/**
 * The tasks of `dag` a retry runs again (`!dag retry`), by the ids the document gave them: each that
 * did not succeed, and a fan-out, with its producer, when any of its instances did not succeed (or
 * it was never expanded), or when a task run again reads its outputs. A retry re-expands a fan-out
 * from a list its producer publishes again: the instances a run made are not the document's tasks,
 * and the list they came from may have changed since (docs/architecture.md §6, "Fan-out").
 */
export function retriedTaskIds(
  dag: ParsedDag,
  tasks: ReadonlyArray<{ taskId: string; status: TaskStatus; fanOut: string | null }>,
): Set<string> {
  const again = new Set(
    tasks.filter((t) => t.status !== "succeeded" && t.fanOut === null).map((t) => t.taskId),
  );
  const fanOuts = dag.tasks.filter((t) => t.forEach !== undefined);
  for (const t of tasks) if (t.status !== "succeeded" && t.fanOut !== null) again.add(t.fanOut);
  // A fan-in run again needs its fan-out's instances: they are run again with it.
  for (let grew = true; grew;) {
    grew = false;
    for (const f of fanOuts) {
      if (again.has(f.id)) continue;
      const read = dag.tasks.some(
        (t) =>
          again.has(t.id) &&
          Object.values(t.args).some(
            (v) => typeof v === "string" && outputReferences(v).some((r) => r.taskId === f.id),
          ),
      );
      if (read) {
        again.add(f.id);
        grew = true;
      }
    }
  }
  for (const f of fanOuts) if (again.has(f.id)) again.add(f.forEach!.producer);
  return again;
}
