/**
 * Runs started by another DAG's run: a definition may declare
 * `after = { dag = "build", status = "succeeded", params = { version = "params.version" } }`. When a
 * run of `build` ends in one of the statuses named, the room's leader starts one run of it, at most
 * once per upstream run (the store's key: definition and upstream run), with its parameters taken
 * from the upstream run. The rules of the declaration, of a firing and of a chain's length are
 * here; docs/architecture.md §3 ("Trigger") tells where each is applied.
 */
import type { AfterSpec, ParsedDag, RunStatus, RunTrigger } from "./model.js";
import { isListOutput, type OutputValue } from "./outputs.js";

// The declaration's shapes live with the rest of the model (model.ts); they are named here too.
export { AFTER_STATUSES } from "./model.js";
export type { AfterSpec, AfterStatus, RunTrigger } from "./model.js";

/** The end statuses a run can fire on: a rejected or expired run never ran, and fires nothing. */
export const FIRING_STATUSES: readonly RunStatus[] = ["succeeded", "failed", "canceled"];

/** Where a mapped value comes from in the upstream run. */
export type AfterSource = { kind: "param"; name: string } | { kind: "output"; task: string; name: string };

/**
 * The longest chain of runs started one after another. Publishing refuses a cycle of `after`
 * links; this bounds whatever a cycle could still do (a definition pruned and published again
 * between the check and a firing): the firing past it is recorded as skipped, with the reason.
 */
export const MAX_AFTER_DEPTH = 32;

const NAME = "[A-Za-z_][A-Za-z0-9_]*";
const ID = "[A-Za-z0-9_.-]{1,64}";
const PARAM_SOURCE = new RegExp(`^params\\.(${NAME})$`);
const OUTPUT_SOURCE = new RegExp(`^tasks\\.(${ID})\\.outputs\\.(${NAME})$`);

/** A mapping's source, or why it is not one. */
export function parseAfterSource(text: string): AfterSource | string {
  const p = PARAM_SOURCE.exec(text);
  if (p !== null) return { kind: "param", name: p[1]! };
  // A task id may hold dots; the outputs part is the last `.outputs.NAME`.
  const at = text.lastIndexOf(".outputs.");
  if (text.startsWith("tasks.") && at > 0) {
    const o = OUTPUT_SOURCE.exec(text);
    if (o !== null) return { kind: "output", task: o[1]!, name: o[2]! };
  }
  return `is not a value of the upstream run: write "params.NAME" (its parameter) or "tasks.TASK.outputs.NAME" (an output of its task)`;
}

/** Whether a run that ended in `status` fires a definition declaring `spec`. */
export function afterMatches(spec: Pick<AfterSpec, "status">, status: RunStatus): boolean {
  if (!FIRING_STATUSES.includes(status)) return false;
  return spec.status.some((s) => s === "finished" || s === status);
}

/** "succeeded", "succeeded or failed", "finished": how the declaration's statuses read in a sentence. */
export function afterStatusWords(spec: Pick<AfterSpec, "status">): string {
  if (spec.status.includes("finished")) return "finished";
  if (spec.status.length <= 1) return spec.status[0] ?? "succeeded";
  return `${spec.status.slice(0, -1).join(", ")} or ${spec.status.at(-1)}`;
}

/** "after build succeeded": the declaration in a few words. */
export function afterWords(spec: AfterSpec): string {
  return `after ${spec.dag} ${afterStatusWords(spec)}`;
}

/** "after build.3 succeeded": what started a run, for its picture's title and its card. */
export function triggerWords(trigger: RunTrigger): string {
  return `after ${trigger.run} ${trigger.status}`;
}

/** Outputs of the upstream run's tasks, by task then name; null where the store keeps none. */
export type UpstreamOutputs = ReadonlyMap<string, Readonly<Record<string, OutputValue>>> | null;

/**
 * The values the mapping gives, in the order declared, or why a value cannot be had (the firing is
 * then skipped with that reason). Each value is still checked against this DAG's pattern by the
 * caller (resolveParams), as any value given to a run.
 */
export function afterValues(
  spec: AfterSpec,
  upstream: { name: string; dag: ParsedDag },
  outputs: UpstreamOutputs,
): { ok: true; given: Array<[string, string]> } | { ok: false; reason: string } {
  const given: Array<[string, string]> = [];
  for (const [param, text] of Object.entries(spec.params)) {
    const source = parseAfterSource(text);
    if (typeof source === "string") return { ok: false, reason: `parameter "${param}": "${text}" ${source}` };
    if (source.kind === "param") {
      const values = upstream.dag.values ?? {};
      if (!Object.hasOwn(values, source.name))
        return {
          ok: false,
          reason: `parameter "${param}" maps to ${text}, but ${upstream.name} has no parameter "${source.name}"`,
        };
      given.push([param, values[source.name]!]);
      continue;
    }
    if (!upstream.dag.tasks.some((t) => t.id === source.task))
      return {
        ok: false,
        reason: `parameter "${param}" maps to ${text}, but ${upstream.name} has no task "${source.task}"`,
      };
    const published = outputs?.get(source.task);
    if (published === undefined || !Object.hasOwn(published, source.name))
      return {
        ok: false,
        reason: `parameter "${param}" maps to ${text}, but task ${source.task} of ${upstream.name} published no output "${source.name}"`,
      };
    const value = published[source.name]!;
    if (typeof value !== "string")
      return {
        ok: false,
        reason: `parameter "${param}" maps to ${text}, but "${source.name}" of task ${source.task} is a list output (${value.length} items); a parameter takes one value`,
      };
    given.push([param, value]);
  }
  return { ok: true, given };
}

/**
 * Problems of a mapping against the upstream definition, as far as its document tells (publish):
 * a parameter it does not declare, a task it does not have, an output that task does not declare.
 * The values themselves are known only once it ran.
 */
export function afterMappingProblems(
  spec: AfterSpec,
  upstream: ParsedDag,
): Array<{ param: string; message: string }> {
  const out: Array<{ param: string; message: string }> = [];
  for (const [param, text] of Object.entries(spec.params)) {
    const source = parseAfterSource(text);
    if (typeof source === "string") continue;
    if (source.kind === "param" && !Object.hasOwn(upstream.params ?? {}, source.name))
      out.push({
        param,
        message: `maps to ${text}, but ${upstream.id} declares no parameter "${source.name}"`,
      });
    if (source.kind !== "output") continue;
    const task = upstream.tasks.find((t) => t.id === source.task);
    if (task === undefined)
      out.push({ param, message: `maps to ${text}, but ${upstream.id} has no task "${source.task}"` });
    else if (!Object.hasOwn(task.outputs ?? {}, source.name))
      out.push({
        param,
        message: `maps to ${text}, but task ${source.task} of ${upstream.id} declares no output "${source.name}"`,
      });
    else if (isListOutput(task.outputs?.[source.name]))
      out.push({
        param,
        message: `maps to ${text}, but "${source.name}" of task ${source.task} of ${upstream.id} is a list output; a parameter takes one value`,
      });
  }
  return out;
}

/**
 * The cycle publishing `dagId` (declaring `after.dag`) would close, as its path
 * (`a → b → a`), or null. `afterOf` gives a published definition's upstream id. The walk follows
 * the links until it reaches `dagId` (a cycle), a definition without one (none), or one it saw
 * already (a cycle not through `dagId`, refused when it was published); it has no step limit, so a
 * cycle of any length is found: each definition has one upstream, and each is read once.
 */
export async function afterCycle(
  dagId: string,
  upstream: string,
  afterOf: (id: string) => Promise<string | undefined>,
): Promise<string[] | null> {
  const path = [dagId, upstream];
  const seen = new Set(path);
  let at = upstream;
  while (at !== dagId) {
    const next = await afterOf(at);
    if (next === undefined) return null;
    path.push(next);
    if (next === dagId) return path;
    if (seen.has(next)) return null; // a cycle not through dagId: not ours to refuse
    seen.add(next);
    at = next;
  }
  return path;
}

/** The run id of the n-th run of a definition (`<id>.N`, the id shortened to fit 64). */
export function numberedRunId(dagId: string, n: number): string {
  const suffix = `.${n}`;
  return dagId.slice(0, 64 - suffix.length) + suffix;
}

/**
 * A fired run's DAG: the definition's document without its own schedule and declaration, with the
 * values and what started it. The store names it (`<id>.N`).
 */
export function afterRunDag(
  def: ParsedDag,
  values: Record<string, string> | null,
  trigger: RunTrigger,
): ParsedDag {
  const { schedule: _schedule, after: _after, ...base } = def;
  return {
    ...base,
    definition: def.id,
    trigger,
    ...(values === null ? {} : { values }),
  };
}
