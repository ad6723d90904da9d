/**
 * The leader's trigger loop: while it leads a room, each run of the
 * room that ended is looked at once for every definition that declares `after` its DAG. A status
 * the declaration names starts a run of it (`<id>.N`, its parameters mapped from the upstream run,
 * checked against its own patterns); anything else — another status, a value that cannot be had or
 * does not match, an owner no longer allowed, a chain too long — is recorded as a skipped firing
 * with the reason. Either way one row keyed by (definition, upstream run) is written, in the same
 * fenced transaction as the run (AfterStore.recordAfterFiring): a repeated round, a second leader
 * or a new leader after a kill finds it and starts nothing. What is due is read from the store
 * (runs that ended with no firing yet), never from memory, so a leader killed between an upstream
 * run's end and its firing leaves it to the next one. docs/architecture.md §3 ("Trigger").
 */
import type { RunTrigger, UpstreamOutputs } from "../domain/after.js";
import {
  afterMatches,
  afterRunDag,
  afterStatusWords,
  afterValues,
  MAX_AFTER_DEPTH,
} from "../domain/after.js";
import { resolveParams } from "../domain/params.js";
import { definitionSource, runSource, runStartVerdict } from "../domain/run-authority.js";
import type { Clock } from "../ports/clock.js";
import type { Logger } from "../ports/logger.js";
import type {
  AfterFiringInput,
  AfterStore,
  ChangeFeed,
  DefinitionRecord,
  LeaderFence,
  OutboxStore,
  RunRecord,
  RunStore,
} from "../ports/store.js";
import type { ScheduleAuthority } from "./schedules.js";
import { runFencedRounds } from "./fenced-rounds.js";

/** The least time between two rounds: a burst of run ends costs one round per this. */
export const AFTER_TICK_MS = 200;
/** The longest a round waits with no run change heard (a lost notification). */
export const AFTER_IDLE_MS = 10_000;
/** Upstream runs looked at for one definition in one round; more are left for the next. */
const RUNS_PER_ROUND = 50;

/** What the loop reads and writes: the triggers, and an upstream run's tasks for their published outputs. */
export type TriggerStore = AfterStore & Pick<RunStore, "listTasks"> & Pick<OutboxStore, "enqueueOutbox">;

/** The values an upstream run's tasks published (task → name → value), read once a firing needs them. */
export async function upstreamOutputs(
  store: Pick<RunStore, "listTasks">,
  run: RunRecord,
): Promise<UpstreamOutputs> {
  const tasks = await store.listTasks(run.runId);
  return new Map(
    tasks.flatMap((t) => (t.outputValues === null ? [] : [[t.taskId, t.outputValues] as const])),
  );
}

/**
 * A definition whose first run (publishing's) was approved and not dropped: its `after` is in force.
 * Approved by the rule every new run asks (docs/architecture.md §3, "Authority").
 */
export function isApprovedAfter(def: DefinitionRecord): boolean {
  const origin = def.origin;
  if (def.dag.after === undefined || origin === null) return false;
  if (origin.status === "rejected" || origin.status === "expired" || origin.status === "canceled")
    return false;
  return runStartVerdict(true, [definitionSource(def)]).kind === "start";
}

/**
 * What to record for one upstream run: the run to start, or why none. Pure but for the outputs
 * read and the authority's question, which the caller has answered.
 */
export function afterFiring(
  def: DefinitionRecord,
  upstream: RunRecord,
  outputs: UpstreamOutputs,
  refusal: string | null,
): AfterFiringInput {
  const spec = def.dag.after!;
  const base = { roomId: def.roomId, dagId: def.dagId, upstream };
  const skip = (reason: string): AfterFiringInput => ({ ...base, fire: null, reason });
  if (!afterMatches(spec, upstream.status))
    return skip(
      `${upstream.dagId} ${upstream.status}; ${def.dagId} runs after ${spec.dag} ${afterStatusWords(spec)}`,
    );
  if (upstream.dag.registered === true)
    return skip(
      `${upstream.dagId} registered ${spec.dag} without running it; ${def.dagId} runs after its runs`,
    );
  const depth = (upstream.dag.trigger?.depth ?? 0) + 1;
  if (depth > MAX_AFTER_DEPTH)
    return skip(
      `${upstream.dagId} is the ${depth - 1}th run of a chain of runs started one after another; at most ${MAX_AFTER_DEPTH}`,
    );
  if (refusal !== null) return skip(refusal);
  // The firing carries the definition's content and the upstream run's values: both must have been
  // approved, so a run canceled (or rejected) before anyone confirmed it starts nothing.
  const authority = runStartVerdict(true, [definitionSource(def), runSource(upstream)]);
  if (authority.kind !== "start")
    return skip(`${authority.reason}; ${def.dagId} runs only after approved runs`);
  const mapped = afterValues(spec, { name: upstream.dagId, dag: upstream.dag }, outputs);
  if (!mapped.ok) return skip(mapped.reason);
  let values: Record<string, string> | null = null;
  if (def.dag.params !== undefined) {
    const resolved = resolveParams(def.dag, mapped.given);
    if (!resolved.ok) return skip(resolved.message);
    values = resolved.values;
  }
  const trigger: RunTrigger = {
    dag: spec.dag,
    run: upstream.dagId,
    runId: upstream.runId,
    status: upstream.status,
    depth,
  };
  const { id: _id, ...dag } = afterRunDag(def.dag, values, trigger);
  return { ...base, fire: { dag, publisher: def.publisher }, reason: null };
}

export async function runAfterLoop(
  deps: {
    store: TriggerStore;
    clock: Clock;
    onStoreError?: (() => void) | undefined;
    /** Run changes of the room wake the loop; without it the loop looks every AFTER_TICK_MS. */
    feed?: ChangeFeed;
    /** Asked before a run is started; absent, a definition runs on its approval alone. */
    authority?: ScheduleAuthority | null;
  },
  log: Logger,
  fence: LeaderFence,
  signal: AbortSignal,
  deposed: () => void,
): Promise<void> {
  const roomId = fence.roomId;
  const rounds = { roomId, tickMs: AFTER_TICK_MS, name: "trigger" };
  await runFencedRounds(deps, rounds, log, signal, deposed, round);

  async function round(): Promise<number | null> {
    let waitMs = deps.feed === undefined ? AFTER_TICK_MS : AFTER_IDLE_MS;
    const defs = (await deps.store.listAfterDefinitions(roomId)).filter(isApprovedAfter);
    for (const def of defs) {
      if (signal.aborted) return null;
      const runs = await deps.store.unfiredUpstreamRuns(
        roomId,
        def.dagId,
        def.dag.after!.dag,
        def.createdAt,
        {
          limit: RUNS_PER_ROUND,
        },
      );
      if (runs.length === RUNS_PER_ROUND) waitMs = AFTER_TICK_MS;
      for (const upstream of runs) await fire(def, upstream);
    }
    return waitMs;
  }

  async function fire(def: DefinitionRecord, upstream: RunRecord): Promise<void> {
    const matches = afterMatches(def.dag.after!, upstream.status);
    // The owner's standing is asked only for a run that would start; a throw (cannot tell) retries the round.
    const refusal = matches && deps.authority ? await deps.authority.refusal(def) : null;
    const mapsOutputs = Object.values(def.dag.after!.params).some((v) => v.startsWith("tasks."));
    const outputs = matches && mapsOutputs ? await upstreamOutputs(deps.store, upstream) : null;
    const input = afterFiring(def, upstream, outputs, refusal);
    const result = await deps.store.recordAfterFiring(fence, input);
    // A skip is said once, in the upstream run's thread (insert-or-ignore by its txnId). It is queued
    // after the firing's own transaction: a leader killed between the two leaves it unsaid.
    if (result.kind === "skipped" && input.reason !== null) {
      const notice = deps.authority?.afterSkippedNotice?.(def, upstream, input.reason) ?? null;
      if (notice !== null) await deps.store.enqueueOutbox(fence, [notice]);
    }
    log.info(
      {
        dag: def.dagId,
        upstream: upstream.dagId,
        status: upstream.status,
        result: result.kind,
        run: result.firing.runDagId,
        reason: result.firing.reason,
      },
      result.kind === "fired"
        ? "trigger fired"
        : result.kind === "skipped"
          ? "trigger skipped"
          : "trigger already recorded",
    );
  }
}
