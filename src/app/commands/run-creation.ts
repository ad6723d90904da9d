/**
 * What publish, run and retry share: a DAG becomes a run in one transaction with the inbox mark, after
 * its actions are checked against what live nodes offer. Same id and content → "exists"; same id,
 * other content → a conflict that names a free id; nothing is stored on any error. Also the replies
 * to these outcomes.
 */
import { dagHash } from "../../domain/canonical-hash.js";
import type { ActionOffer, DagIssue } from "../../domain/dag.js";
import { checkActions, checkTaskArguments, formatIssue } from "../../domain/dag.js";
import type { ParsedDag } from "../../domain/model.js";
import { appliedDag, resolveParams } from "../../domain/params.js";
import type { ContentSource } from "../../domain/run-authority.js";
import { definitionSource, runStartVerdict } from "../../domain/run-authority.js";
import type { HookOrigin } from "../../domain/webhook.js";
import { hookOfSender } from "../../domain/webhook.js";
import type { CreateRunResult, DefinitionRecord, RunRecord } from "../../ports/store.js";
import type { Rendered } from "../render/html.js";
import { escapeHtml, r, text } from "../render/html.js";
import { dateTime, plural, RUN_SAID, RUN_WORD } from "../render/words.js";
import type { CommandPolicy, CommandStore, HandlerContext } from "./context.js";
import type { Outcome, RunSummary } from "./outcome.js";
import { summarizeRun } from "./outcome.js";
import { commandContext } from "./shared.js";
import type { Idiom } from "./face.js";
import { codeIn, commandIn, markIn, sentencesIn, userIn } from "./face.js";
import { shortHash } from "../../domain/command-grammar.js";
import { formatDuration } from "../../domain/duration.js";

/** Issues kept in an outcome; a 1000-task document with a typo in every task gets the gist. */
const MAX_STORED_ISSUES = 50;
const MAX_ID_LENGTH = 64;

/** Checks the values, then creates the run; nothing is stored when a value or an action is refused. */
export async function startRun(
  ctx: HandlerContext,
  definition: DefinitionRecord,
  params: ReadonlyArray<readonly [string, string]>,
  helpLine: string,
  /** The webhook delivery that asked for the run, kept on it for its card. */
  hook?: HookOrigin,
): Promise<Outcome> {
  const base = definition.dag;
  const resolved = resolveParams(base, params);
  if (!resolved.ok) return { kind: "command-error", message: resolved.message, helpLine };
  // The store keeps the highest N given so far: the next id is found at once, not by trying 2, 3, ...
  const newId = await freeId(
    ctx.store,
    ctx.roomId,
    runCandidates(definition.dagId, definition.lastRunNumber + 1),
  );
  if (newId === null) {
    return {
      kind: "command-error",
      message: `no free run id is left for "${definition.dagId}"`,
      helpLine,
    };
  }
  const dag: ParsedDag = {
    ...base,
    id: newId,
    definition: definition.dagId,
    ...(base.params === undefined ? {} : { values: resolved.values }),
    ...(hook === undefined ? {} : { hook }),
  };
  const unknown = await unknownActions(ctx, appliedDag(dag));
  if (unknown.length > 0) {
    // A value the action refuses (a leading "-", its pattern) is the caller's parameter, not the DAG.
    const blamed = blameParameter(dag, unknown);
    if (blamed !== null) return { kind: "command-error", message: blamed, helpLine };
    return invalidDag(`for the new run of "${definition.dagId}"`, unknown);
  }
  // The run's own hash covers its parameter values: a confirmation by hash confirms those values.
  // It carries the definition's content: auto-confirmation holds only where that was approved.
  return createAndDescribe(ctx, dag, dagHash(dag), null, [definitionSource(definition)]);
}

/**
 * The first issue found in a task argument that a given parameter fills, said of that parameter:
 * `parameter "tag" (value "-rf"): ...`. Null when no issue is in such an argument.
 */
function blameParameter(dag: ParsedDag, issues: readonly DagIssue[]): string | null {
  const values = dag.values ?? {};
  for (const issue of issues) {
    const at = /^tasks\[(\d+)\]\.args\.([A-Za-z0-9_]+)$/.exec(issue.path);
    if (at === null) continue;
    const template = dag.tasks[Number(at[1])]?.args[at[2] ?? ""];
    if (typeof template !== "string") continue;
    for (const [name, value] of Object.entries(values)) {
      if (template.includes(`{params.${name}}`))
        return `parameter "${name}" (value ${JSON.stringify(value.slice(0, 70))}): ${issue.message}`;
    }
  }
  return null;
}

export async function createAndDescribe(
  ctx: HandlerContext,
  dag: ParsedDag,
  hash: string,
  retryOf: RunRecord | null,
  /** The runs whose content the new run carries (none for newly published content). */
  sources: readonly ContentSource[],
): Promise<Outcome> {
  // A conflict stored nothing: its answer names a free id, read after it (the inbox step marks it).
  const answer = (result: CreateRunResult): Outcome | null =>
    result.kind === "conflict" ? null : creationOutcome(result, retryOf, ctx.policy);
  const cmd = commandContext(ctx, answer);
  if (cmd === null) return { kind: "not-leader", roomId: ctx.roomId };
  const result = await ctx.store.createRun(cmd, {
    roomId: ctx.roomId,
    dag,
    hash,
    publisher: ctx.sender,
    // Only a chat event can root the status card's thread; a command typed on the CLI has a local id.
    publishEventId: ctx.eventId !== null && ctx.eventId.startsWith("$") ? ctx.eventId : null,
    needsConfirmation: needsConfirmation(ctx.policy, ctx.sender, sources),
    confirmTimeoutMs: ctx.policy.confirmTimeoutMs,
  });
  return result.kind === "conflict"
    ? conflictOutcome(ctx.store, ctx.roomId, result.existing)
    : creationOutcome(result, retryOf, ctx.policy);
}

/**
 * Whether the room's policy auto-confirms this principal: a person on auto_confirm, a webhook on
 * hook_auto_confirm (a webhook is a principal of its own: its runs await confirmation like anyone's
 * unless the room's policy says otherwise).
 */
export function isAutoConfirmed(policy: CommandPolicy, sender: string): boolean {
  const hook = hookOfSender(sender);
  if (hook !== null) return (policy.hookAutoConfirm ?? []).includes(hook);
  return policy.autoConfirm.includes(sender);
}

/**
 * Whether a new run of this sender, carrying the content of `sources`, awaits confirmation: the
 * one authority rule (runStartVerdict; docs/architecture.md §3, "Authority").
 */
export function needsConfirmation(
  policy: CommandPolicy,
  sender: string,
  sources: readonly ContentSource[] = [],
): boolean {
  return runStartVerdict(isAutoConfirmed(policy, sender), sources).kind !== "start";
}

/**
 * The outcome of a createRun result that stored a run or found the same content: pure, so the store
 * keeps it on the command's inbox row in the transaction that created the run (shared.ts).
 */
export function creationOutcome(
  result: Exclude<CreateRunResult, { kind: "conflict" }>,
  retryOf: RunRecord | null,
  policy: Pick<CommandPolicy, "twoPersonRule">,
): Outcome {
  if (result.kind === "exists") return { kind: "exists", run: summarizeRun(result.run) };
  const run = summarizeRun(result.run);
  const needsConfirmation = run.status === "pending";
  if (retryOf !== null) {
    const taskIds = result.run.dag.tasks.map((t) => t.id);
    return { kind: "retried", from: summarizeRun(retryOf), run, taskIds, needsConfirmation };
  }
  return { kind: "published", run, needsConfirmation, twoPersonRule: policy.twoPersonRule };
}

/** A publish that met other content under its id: the answer names a free id to publish under. */
export async function conflictOutcome(
  store: Pick<CommandStore, "getRun">,
  roomId: string,
  existing: RunRecord,
): Promise<Outcome> {
  const dagId = existing.dagId;
  const suggestion = (await freeId(store, roomId, renameCandidates(dagId))) ?? `${dagId.slice(0, 50)}-new`;
  return { kind: "conflict", dagId, existing: summarizeRun(existing), suggestion };
}

export function invalidDag(where: string, issues: readonly DagIssue[]): Outcome {
  const shown = issues.slice(0, MAX_STORED_ISSUES).map(formatIssue);
  return { kind: "invalid-dag", source: where, issues: shown, moreIssues: issues.length - shown.length };
}

/**
 * Issues for actions no live node of this room offers, and for arguments the action's definition (as
 * the room's live nodes registered it) refuses: nobody is asked to confirm a run that cannot work.
 * With no live node at all the check is skipped: the run waits (and its queue timeout applies)
 * until a node that has them joins.
 */
export async function unknownActions(ctx: HandlerContext, dag: ParsedDag): Promise<DagIssue[]> {
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
export function* retryCandidates(dagId: string): Generator<string> {
  const base = dagId.replace(/\.retry\d+$/, "");
  for (let n = 1; n <= 999; n++) yield fit(base, `.retry${n}`);
}

/** `x.<from>`, `x.<from+1>`, ... up to `x.9999` (what `dagbot run` names a DAG run again, too). */
function* runCandidates(dagId: string, from: number): Generator<string> {
  for (let n = Math.max(2, from); n <= 9999; n++) yield fit(dagId, `.${n}`);
}

/** `x-2`, `x-3`, ... */
function* renameCandidates(dagId: string): Generator<string> {
  const base = dagId.replace(/-\d+$/, "");
  for (let n = 2; n <= 99; n++) yield fit(base, `-${n}`);
}

function fit(base: string, suffix: string): string {
  return base.slice(0, MAX_ID_LENGTH - suffix.length) + suffix;
}

export async function freeId(
  store: Pick<CommandStore, "getRun">,
  roomId: string,
  candidates: Iterable<string>,
): Promise<string | null> {
  for (const id of candidates) if ((await store.getRun(roomId, id)) === null) return id;
  return null;
}

/**
 * The replies to a new run (published, or a new run of a published DAG), an existing one, a conflict
 * and an invalid DAG: one renderer each, in the face's idiom (face.ts).
 */
export const CREATION_RENDERERS = {
  published: (o: Extract<Outcome, { kind: "published" }>, say: Idiom): Rendered => renderPublished(o, say),
  exists: (o: Extract<Outcome, { kind: "exists" }>, say: Idiom): Rendered =>
    sentencesIn(say, [
      r`${codeIn(say, o.run.dagId)} already exists with the same content: nothing new was stored.`,
      r`It ${RUN_SAID[o.run.status]} (published by ${userIn(say, o.run.publisher)} at ${dateTime(
        o.run.createdAt,
      )}). See ${commandIn(say, "status", [o.run.dagId])}.`,
    ]),
  conflict: (o: Extract<Outcome, { kind: "conflict" }>, say: Idiom): Rendered =>
    sentencesIn(say, [
      r`${markIn(say, "⚠️")}${codeIn(say, o.dagId)} already exists with different content (${
        RUN_WORD[o.existing.status]
      }, published by ${userIn(say, o.existing.publisher)}): nothing was stored.`,
      r`To publish this DAG, give it a new ${codeIn(say, "id")} (for example ${codeIn(
        say,
        o.suggestion,
      )}); to run the failed part of the existing one again, use ${commandIn(say, "retry", [o.dagId])}.`,
    ]),
  "invalid-dag": (o: Extract<Outcome, { kind: "invalid-dag" }>, say: Idiom): Rendered =>
    renderInvalidDag(o.source, o.issues, o.moreIssues, say),
} as const;

/** The command that confirms a run as it was shown: with its hash when it has one. */
function confirmArgs(run: RunSummary): string[] {
  return run.hash === undefined ? [run.dagId] : [run.dagId, shortHash(run.hash)];
}

/** How a new run that awaits confirmation is confirmed (or dropped), in plain words. */
export function awaiting(run: RunSummary, twoPersonRule: boolean, say: Idiom): string {
  const expiry =
    run.confirmDeadline === null
      ? ""
      : ` within ${formatDuration(Math.max(0, run.confirmDeadline - run.createdAt))}`;
  const who = twoPersonRule ? "someone other than the publisher" : "an operator";
  return `It awaits confirmation${expiry} by ${who}: ${say.command("confirm", confirmArgs(run))} (or ${say.command(
    "reject",
    [run.dagId],
  )} to drop it).`;
}

/**
 * One line: what was stored. In chat its card is in this message's thread, and the card says what to
 * do (confirm with its hash, react ✅) and keeps saying what is true; elsewhere no card is shown, so
 * the answer says how to confirm it.
 */
function renderPublished(o: Extract<Outcome, { kind: "published" }>, say: Idiom): Rendered {
  const { run, needsConfirmation } = o;
  const id = codeIn(say, run.dagId);
  const values = Object.entries(run.params ?? {});
  const given = values.length === 0 ? "" : r`; ${codeIn(say, values.map(([n, v]) => `${n}=${v}`).join(" "))}`;
  const what = r`${id} (${plural(run.taskCount, "task")}${given})`;
  const head =
    run.registered === true
      ? needsConfirmation
        ? r`Registered ${id} without running it, for confirmation: once confirmed, its schedule, after and webhooks start its runs`
        : r`Registered ${id} without running it: no task runs now; its schedule, after and webhooks start its runs`
      : run.definition === undefined
        ? needsConfirmation
          ? r`Published ${what} for confirmation`
          : r`Published ${what}; it started`
        : needsConfirmation
          ? r`New run of ${run.definition}: ${what}, for confirmation`
          : r`New run of ${run.definition}: ${what}; it started`;
  if (say.chat !== true)
    return needsConfirmation ? r`${head}. ${awaiting(run, o.twoPersonRule, say)}` : r`${head}.`;
  // A run without a publish message (a webhook's) is answered under its card, in the card's thread.
  return run.publishEventId === null ? r`📥 ${head}.` : r`📥 ${head}. Its card is in the thread.`;
}

const MAX_SHOWN_ISSUES = 20;

function renderInvalidDag(source: string, issues: readonly string[], more: number, say: Idiom): Rendered {
  const shown = issues.slice(0, MAX_SHOWN_ISSUES);
  const extra = more + issues.length - shown.length;
  const head = r`${markIn(say, "⚠️")}The DAG ${source} is not valid (${plural(issues.length + more, "problem")}); nothing was stored.`;
  const tail = extra > 0 ? [text(`… and ${plural(extra, "more problem")}.`)] : [];
  return {
    body: [head.body, ...shown.map((i) => `- ${i}`), ...tail.map((t) => t.body)].join("\n"),
    html:
      `<p>${head.html}</p><ul>${shown.map((i) => `<li><code>${escapeHtml(i)}</code></li>`).join("")}</ul>` +
      tail.map((t) => `<p>${t.html}</p>`).join(""),
  };
}
