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
    if (existing !== null && existing.hash === parsed.hash && isTerminalRun(existing.status))
      return handleRunAgain(ctx, parsed.dag.id);
  }
  const unknown = await unknownActions(ctx, parsed.dag);
  if (unknown.length > 0) return invalidDag(where, unknown);
  return createAndDescribe(ctx, parsed.dag, parsed.hash, null);
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
  const unknown = await unknownActions(ctx, dag);
  if (unknown.length > 0) return invalidDag(`for the retry of "${dagId}"`, unknown);
  return createAndDescribe(ctx, dag, dagHash(dag), from);
}

/**
 * `!dag run <id>`: a new run of the DAG run `id` ran (its stored, validated content), under the next
 * free id `<base>.2`, `<base>.3`, … (`base` is `id` without such a suffix), checked against what
 * the room's live nodes offer, confirmed as a publish would be.
 */
export async function handleRunAgain(ctx: HandlerContext, dagId: string): Promise<Outcome> {
  const from = await ctx.store.getRun(ctx.roomId, dagId);
  if (from === null) return notFoundRun(ctx, dagId);
  const newId = await freeId(ctx.store, ctx.roomId, runAgainCandidates(dagId));
  if (newId === null) {
    return {
      kind: "command-error",
      message: `no free run id is left for "${dagId}"`,
      helpLine: "usage: !dag run <id>",
    };
  }
  const dag: ParsedDag = { ...from.dag, id: newId };
  const unknown = await unknownActions(ctx, dag);
  if (unknown.length > 0) return invalidDag(`for the new run of "${dagId}"`, unknown);
  return createAndDescribe(ctx, dag, dagHash(dag), null);
}

/** `x.2`, `x.3`, ... (as `dagbot run` names a run of a DAG already in the store). */
function* runAgainCandidates(dagId: string): Generator<string> {
  const base = dagId.replace(/\.\d+$/, "");
  for (let n = 2; n <= 9999; n++) yield fit(base, `.${n}`);
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
