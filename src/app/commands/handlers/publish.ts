/**
 * `!dag publish` and `!dag retry`: validate a DAG (inline, from the library, or the failed part of
 * an ended run), check its actions against what live nodes offer, and create the run in one
 * transaction with the inbox mark. Same id and content → "exists"; same id, other content → a
 * conflict that names a free id; nothing is stored on any error.
 */
import { dagHash } from "../../../domain/canonical-hash.js";
import type { PublishSource } from "../../../domain/commands.js";
import type { DagIssue } from "../../../domain/dag.js";
import type { ActionOffer } from "../../../domain/dag.js";
import { checkActions, checkTaskArguments, formatIssue, parseDag } from "../../../domain/dag.js";
import type { ParsedDag } from "../../../domain/model.js";
import { appliedDag, definitionOf, resolveParams } from "../../../domain/params.js";
import { isTerminalRun } from "../../../domain/run-states.js";
import type { CreateRunResult, RunRecord } from "../../../ports/store.js";
import type { CommandPolicy, CommandStore, HandlerContext } from "../context.js";
import type { Outcome } from "../outcome.js";
import { summarizeRun } from "../outcome.js";
import { commandContext, notFoundRun } from "./shared.js";

/** Issues kept in an outcome; a 1000-task document with a typo in every task gets the gist. */
const MAX_STORED_ISSUES = 50;
const MAX_ID_LENGTH = 64;

export async function handlePublish(ctx: HandlerContext, source: PublishSource): Promise<Outcome> {
  let text: string;
  let format: "json" | "toml";
  let where: string;
  if (source.kind === "library") {
    const loaded = await ctx.loadDag(source.name);
    if (!loaded.ok) return { kind: "library-error", name: source.name, message: loaded.message };
    ({ text, format } = loaded);
    where = `from the library file "${source.name}" (${format})`;
  } else {
    ({ text, format } = source);
    where = `in the message (${format})`;
  }
  const parsed = parseDag(text, format);
  if (!parsed.ok) return invalidDag(where, parsed.issues);
  if (source.kind === "library") {
    // A library DAG is a definition: published again unchanged once its run ended, it runs again.
    const existing = await ctx.store.getRun(ctx.roomId, parsed.dag.id);
    if (
      existing !== null &&
      existing.hash === parsed.hash &&
      existing.dag.definition === undefined &&
      isTerminalRun(existing.status)
    )
      return startRun(ctx, existing, []);
  }
  let dag = parsed.dag;
  if (dag.params !== undefined) {
    // Publishing starts the definition's first run, with every parameter at its default.
    const resolved = resolveParams(dag, []);
    if (!resolved.ok) {
      return {
        kind: "command-error",
        message: `${resolved.message}. Publishing starts a run at once, so every parameter of a published DAG needs a default; \`!dag run\` then gives other values`,
        helpLine: "usage: !dag publish <name> | !dag publish + a code block",
      };
    }
    dag = { ...dag, values: resolved.values };
  }
  const unknown = await unknownActions(ctx, appliedDag(dag));
  if (unknown.length > 0) return invalidDag(where, unknown);
  return createAndDescribe(ctx, dag, parsed.hash, null);
}

const RUN_USAGE = "usage: !dag run <id> [<name>=<value> ...]";

/** `!dag run <id> [name=value ...]`: a new run of a published DAG, under the next free `<id>.N`. */
export async function handleRun(
  ctx: HandlerContext,
  dagId: string,
  params: ReadonlyArray<readonly [string, string]>,
): Promise<Outcome> {
  const named = await ctx.store.getRun(ctx.roomId, dagId);
  if (named === null) return notFoundRun(ctx, dagId);
  // A run started by `!dag run` names its published DAG: another run of that one (`x.2` → `x.3`).
  const of = named.dag.definition;
  const definition = of === undefined || of === named.dagId ? named : await ctx.store.getRun(ctx.roomId, of);
  if (definition === null) return notFoundRun(ctx, of ?? dagId);
  return startRun(ctx, definition, params);
}

/** Checks the values, then creates the run; nothing is stored when a value or an action is refused. */
async function startRun(
  ctx: HandlerContext,
  definition: RunRecord,
  params: ReadonlyArray<readonly [string, string]>,
): Promise<Outcome> {
  const base = definitionOf(definition.dag);
  const resolved = resolveParams(base, params);
  if (!resolved.ok) return { kind: "command-error", message: resolved.message, helpLine: RUN_USAGE };
  const newId = await freeId(ctx.store, ctx.roomId, runCandidates(definition.dagId));
  if (newId === null) {
    return {
      kind: "command-error",
      message: `no free run id is left for "${definition.dagId}"`,
      helpLine: RUN_USAGE,
    };
  }
  const dag: ParsedDag = {
    ...base,
    id: newId,
    definition: definition.dagId,
    ...(base.params === undefined ? {} : { values: resolved.values }),
  };
  const unknown = await unknownActions(ctx, appliedDag(dag));
  if (unknown.length > 0) return invalidDag(`for the new run of "${definition.dagId}"`, unknown);
  // The run's own hash covers its parameter values: a confirmation by hash confirms those values.
  return createAndDescribe(ctx, dag, dagHash(dag), null);
}

export async function handleRetry(ctx: HandlerContext, dagId: string): Promise<Outcome> {
  const from = await ctx.store.getRun(ctx.roomId, dagId);
  if (from === null) return notFoundRun(ctx, dagId);
  if (!isTerminalRun(from.status))
    return { kind: "nothing-to-retry", run: summarizeRun(from), why: "not-ended" };
  // Rejected, expired, or canceled before anyone confirmed it: nobody approved it, and a retry (a
  // new run its author may then confirm) would get round the confirmation it never had.
  if (from.confirmDeadline !== null && from.confirmedBy === null)
    return { kind: "nothing-to-retry", run: summarizeRun(from), why: "never-confirmed" };
  const tasks = await ctx.store.listTasks(from.runId);
  const again = new Set(tasks.filter((t) => t.status !== "succeeded").map((t) => t.taskId));
  if (again.size === 0) return { kind: "nothing-to-retry", run: summarizeRun(from), why: "succeeded" };
  const newId = await freeId(ctx.store, ctx.roomId, retryCandidates(dagId));
  if (newId === null) {
    return {
      kind: "command-error",
      message: `no free retry id is left for "${dagId}"`,
      helpLine: "usage: !dag retry <id>",
    };
  }
  const dag: ParsedDag = {
    ...from.dag,
    id: newId,
    // Needs on tasks that already succeeded are met: dropping them lets those tasks start at once.
    tasks: from.dag.tasks
      .filter((t) => again.has(t.id))
      .map((t) => ({ ...t, needs: t.needs.filter((n) => again.has(n)) })),
  };
  const unknown = await unknownActions(ctx, appliedDag(dag));
  if (unknown.length > 0) return invalidDag(`for the retry of "${dagId}"`, unknown);
  return createAndDescribe(ctx, dag, dagHash(dag), from);
}

async function createAndDescribe(
  ctx: HandlerContext,
  dag: ParsedDag,
  hash: string,
  retryOf: RunRecord | null,
): Promise<Outcome> {
  const cmd = commandContext(ctx);
  if (cmd === null) return { kind: "not-leader", roomId: ctx.roomId };
  const result = await ctx.store.createRun(cmd, {
    roomId: ctx.roomId,
    dag,
    hash,
    publisher: ctx.sender,
    // Only a chat event can root the status card's thread; a command typed on the CLI has a local id.
    publishEventId: ctx.eventId !== null && ctx.eventId.startsWith("$") ? ctx.eventId : null,
    needsConfirmation: !ctx.policy.autoConfirm.includes(ctx.sender),
    confirmTimeoutMs: ctx.policy.confirmTimeoutMs,
  });
  return describeCreate(ctx.store, ctx.roomId, ctx.policy, result, retryOf);
}

/**
 * The outcome of a createRun result. The inbox step calls it too when it rebuilds the outcome from
 * the result the store recorded, so the reply is the same on both paths.
 */
export async function describeCreate(
  store: Pick<CommandStore, "getRun">,
  roomId: string,
  policy: CommandPolicy,
  result: CreateRunResult,
  retryOf: RunRecord | null,
): Promise<Outcome> {
  switch (result.kind) {
    case "created": {
      const run = summarizeRun(result.run);
      const needsConfirmation = run.status === "pending";
      if (retryOf !== null) {
        const taskIds = result.run.dag.tasks.map((t) => t.id);
        return { kind: "retried", from: summarizeRun(retryOf), run, taskIds, needsConfirmation };
      }
      return { kind: "published", run, needsConfirmation, twoPersonRule: policy.twoPersonRule };
    }
    case "exists":
      return { kind: "exists", run: summarizeRun(result.run) };
    case "conflict": {
      const dagId = result.existing.dagId;
      const suggestion =
        (await freeId(store, roomId, renameCandidates(dagId))) ?? `${dagId.slice(0, 50)}-new`;
      return { kind: "conflict", dagId, existing: summarizeRun(result.existing), suggestion };
    }
  }
}

function invalidDag(where: string, issues: readonly DagIssue[]): Outcome {
  const shown = issues.slice(0, MAX_STORED_ISSUES).map(formatIssue);
  return { kind: "invalid-dag", source: where, issues: shown, moreIssues: issues.length - shown.length };
}

/**
 * Issues for actions no live node of this room offers, and for arguments the action's definition (as
 * the room's live nodes registered it) refuses: nobody is asked to confirm a run that cannot work.
 * With no live node at all the check is skipped: the run waits (and its queue timeout applies)
 * until a node that has them joins.
 */
async function unknownActions(ctx: HandlerContext, dag: ParsedDag): Promise<DagIssue[]> {
  const nodes = await ctx.store.listNodes();
  const live = nodes.filter(
    (n) => n.roomIds.includes(ctx.roomId) && n.heartbeatAgeMs <= ctx.policy.nodeStaleAfterMs,
  );
  if (live.length === 0) return [];
  const offers = new Map<string, ActionOffer[]>();
  for (const node of live) {
    for (const [name, template] of Object.entries(node.actionSpecs)) {
      const list = offers.get(name) ?? [];
      const same = list.find((o) => sameTemplate(o.template, template));
      if (same === undefined) list.push({ template: { ...template, name }, nodes: [node.session.nodeId] });
      else same.nodes.push(node.session.nodeId);
      offers.set(name, list);
    }
  }
  return [...checkActions(dag, new Set(live.flatMap((n) => n.actions))), ...checkTaskArguments(dag, offers)];
}

function sameTemplate(a: ActionOffer["template"], b: ActionOffer["template"]): boolean {
  return JSON.stringify([a.argv, a.args]) === JSON.stringify([b.argv, b.args]);
}

/** `x.retry1`, `x.retry2`, ... for x or x.retryN (a retry of a retry counts on from the same base). */
function* retryCandidates(dagId: string): Generator<string> {
  const base = dagId.replace(/\.retry\d+$/, "");
  for (let n = 1; n <= 999; n++) yield fit(base, `.retry${n}`);
}

/** `x.2`, `x.3`, ... (what `dagbot run` names a DAG run again, too). */
function* runCandidates(dagId: string): Generator<string> {
  for (let n = 2; n <= 9999; n++) yield fit(dagId, `.${n}`);
}

/** `x-2`, `x-3`, ... */
function* renameCandidates(dagId: string): Generator<string> {
  const base = dagId.replace(/-\d+$/, "");
  for (let n = 2; n <= 99; n++) yield fit(base, `-${n}`);
}

function fit(base: string, suffix: string): string {
  return base.slice(0, MAX_ID_LENGTH - suffix.length) + suffix;
}

async function freeId(
  store: Pick<CommandStore, "getRun">,
  roomId: string,
  candidates: Iterable<string>,
): Promise<string | null> {
  for (const id of candidates) if ((await store.getRun(roomId, id)) === null) return id;
  return null;
}
