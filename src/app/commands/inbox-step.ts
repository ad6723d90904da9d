/**
 * The leader's inbox step (docs/architecture.md §4, §8): take the room's next inbox row and carry it through
 *   new → handled: run the command; a state-changing handler passes { fence, inboxEventId, answer }
 *                  so its effect and the mark commit in one transaction (the store keeps the
 *                  outcome `answer` builds); every other outcome is stored with markInboxHandled;
 *   handled → replied: render the reply from the STORED outcome and enqueue it (txnId reply.<event_id>)
 *                  together with a new run's status card (card.<run_id>) in one markInboxReplied.
 * A crash between the two halves leaves the row handled; the next leader repeats only the second
 * half, which renders the same reply under the same txnId. A ConflictError (deposed) propagates so
 * the leader loop stops leading; a StoreError propagates so it backs off and retries the row.
 * Before the first half the row records the term that starts it (startInboxHandling): a row that
 * took two leaders down is quarantined instead of handled (src/domain/inbox-handling.ts).
 */
import { isQuarantined } from "../../domain/inbox-handling.js";
import { helpLineFor } from "./verbs/index.js";
import { isConflict, StoreError } from "../../ports/errors.js";
import type { Command } from "./verbs/index.js";
import { parseCommand, parseCommandData } from "./verbs/index.js";
import type { Logger } from "../../ports/logger.js";
import type { PermissionOracle } from "../../ports/permissions.js";
import { hookPermission } from "./permissions.js";
import { INBOX_EVENT_TYPE_KEY } from "../../ports/store.js";
import type {
  InboxEvent,
  InboxStore,
  LeaderFence,
  OutboxMessageInput,
  OutboxStore,
} from "../../ports/store.js";
import type { Placement } from "../render/messages.js";
import { cardMessage, cardTxnId, finalTxnId, replyMessage, replyTxnId } from "../render/messages.js";
import { isTerminalRun } from "../../domain/run-states.js";
import { pictureRequestMessage, picturePlacement } from "../render/pictures.js";
import type { CommandPolicy, CommandStore, DagLibrary, HandlerContext } from "./context.js";
import { withRoomPolicy } from "./context.js";
import { findGateMessage } from "./gate-decisions.js";
import type { InboxIntent } from "./inbox-intent.js";
import {
  decodeInboxContent,
  findCardRun,
  SENDER_RELEASE_KEY,
  STRUCTURED_COMMAND_KEY,
  unreadableFrom,
} from "./inbox-intent.js";
import { RELEASE } from "../../domain/release.js";
import type { Outcome } from "./outcome.js";
import { storedThreadRoot, unwrapOutcome, wrapOutcome } from "./outcome.js";
import { outcomeOfOldResult, unreadable } from "./old-results.js";
import { commandErrorOutcome, executeCommand } from "./table.js";
import { PictureLimiter, pictureRefusal } from "../picture-budget.js";

export interface InboxDeps {
  store: CommandStore &
    Pick<
      InboxStore,
      "nextInboxEvent" | "startInboxHandling" | "markInboxHandled" | "markInboxReplied" | "getInboxEvent"
    > &
    Pick<OutboxStore, "getOutbox">;
  permissions: PermissionOracle;
  policy: CommandPolicy;
  loadDag: DagLibrary;
  logger?: Logger;
  /** Rate limits of `!dag graph`; by default one limiter per InboxDeps with PICTURE_LIMITS. */
  pictureLimiter?: PictureLimiter;
  /**
   * Whether anything sends this room's messages (a chat node leads it). False for an engine-only
   * room: replies and cards are not queued, since nothing would ever send them (the CLI renders
   * its answer from the row's stored outcome instead). Default true.
   */
  queueMessages?: boolean;
}

/** How much of a refused, malformed or ignored command's body the inbox keeps. */
export const KEPT_BODY_CHARS = 200;
/** Content keys a command is read from (inbox-intent.ts); a trimmed row keeps only these. */
// The event type stays: without it a trimmed reaction would read as a message (inbox-intent.ts).
const COMMAND_KEYS = [
  INBOX_EVENT_TYPE_KEY,
  STRUCTURED_COMMAND_KEY,
  SENDER_RELEASE_KEY,
  "msgtype",
  "body",
  "format",
  "m.relates_to",
  "relatesTo",
  "targetEventId",
  "key",
];
const MAX_RELATION_CHARS = 1_000;

/**
 * The content a command that did nothing keeps: its body cut to a short prefix, its relations (so
 * the reply still finds its thread) and nothing else. Null when there is nothing to cut. A refused
 * command costs its sender nothing to send, so it must cost the store little to remember.
 */
export function trimmedContent(content: Record<string, unknown>): Record<string, unknown> | null {
  const out: Record<string, unknown> = {};
  let cut = false;
  for (const [key, value] of Object.entries(content)) {
    if (!COMMAND_KEYS.includes(key)) {
      cut = true;
      continue;
    }
    if (key === STRUCTURED_COMMAND_KEY && JSON.stringify(value).length > KEPT_BODY_CHARS) {
      // A refused command given as data keeps its verb, as a refused message keeps its first words.
      const verb = (value as { verb?: unknown } | null)?.verb;
      out[key] = { verb: typeof verb === "string" ? verb.slice(0, 32) : null };
      cut = true;
    } else if (key === "body" && typeof value === "string" && value.length > KEPT_BODY_CHARS) {
      out[key] = `${value.slice(0, KEPT_BODY_CHARS)}…`;
      cut = true;
    } else if (typeof value === "object" && JSON.stringify(value).length > MAX_RELATION_CHARS) {
      cut = true;
    } else out[key] = value;
  }
  return cut ? out : null;
}

/** Outcomes that changed nothing: their command's full text is not worth keeping. */
const TRIMMED_OUTCOMES: ReadonlySet<string> = new Set([
  "refused",
  "command-error",
  "ignored",
  "quarantined",
  "rate-limited",
]);

/** One row: "idle" when the room's inbox has nothing new or unreplied. */
export async function processNextInboxEvent(
  deps: InboxDeps,
  fence: LeaderFence,
): Promise<"idle" | "processed"> {
  const row = await deps.store.nextInboxEvent(fence);
  if (row === null) return "idle";
  if (row.status === "new") await handleInboxEvent(deps, fence, row);
  await replyToInboxEvent(deps, fence, row.eventId);
  return "processed";
}

/** The leader loop's InboxStep: up to `max` rows per call, returning how many it moved. */
export function inboxStep(
  deps: InboxDeps,
  max = 20,
): (fence: LeaderFence, signal: AbortSignal) => Promise<number> {
  return async (fence, signal) => {
    let n = 0;
    while (n < max && !signal.aborted && (await processNextInboxEvent(deps, fence)) === "processed") n++;
    return n;
  };
}

/** One answer per sender and room per this window (by the events' server times). */
export const UNDECRYPTABLE_REPLY_WINDOW_MS = 10 * 60_000;
const undecryptableAnswered = new WeakMap<InboxDeps, Map<string, number>>();

/**
 * Whether to ask the sender of an undecryptable event to re-send: not when this leader asked them in
 * this room within the window. Kept in memory: a new leader may ask once more.
 */
function shouldAnswerUndecryptable(deps: InboxDeps, row: InboxEvent): boolean {
  let answered = undecryptableAnswered.get(deps);
  if (answered === undefined) {
    answered = new Map();
    undecryptableAnswered.set(deps, answered);
  }
  const key = `${row.roomId}\u0000${row.sender}`;
  const last = answered.get(key);
  if (last !== undefined && Math.abs(row.originServerTs - last) < UNDECRYPTABLE_REPLY_WINDOW_MS) return false;
  answered.set(key, row.originServerTs);
  return true;
}

const defaultPictureLimiters = new WeakMap<InboxDeps, PictureLimiter>();

/**
 * A picture ask within the room's and the member's rate limits (picture-budget.ts); over them, a
 * refusal saying when to try again, once, and a ⏳ reaction on each ask after it until then: every
 * command is answered, and a flood of asks adds no message to the room.
 */
async function withinPictureLimits(deps: InboxDeps, row: InboxEvent, outcome: Outcome): Promise<Outcome> {
  let limiter = deps.pictureLimiter ?? defaultPictureLimiters.get(deps);
  if (limiter === undefined) {
    limiter = new PictureLimiter();
    defaultPictureLimiters.set(deps, limiter);
  }
  const ask = limiter.ask(row.roomId, row.sender, await deps.store.now());
  if (ask.kind === "allowed") return outcome;
  if (!ask.tell) return { kind: "rate-limited", verb: "graph", retryAfterMs: ask.retryAfterMs };
  return { kind: "refused", verb: "graph", reason: pictureRefusal(ask), helpLine: helpLineFor("graph") };
}

/**
 * First half: new → handled, with the command's effect in the same transaction where it has one.
 * Whatever the row holds, its start is recorded first (committed before any of its work), so a
 * command that stalls or kills its leader is counted by the next one, and not run a third time.
 */
export async function handleInboxEvent(deps: InboxDeps, fence: LeaderFence, row: InboxEvent): Promise<void> {
  const { losses } = await deps.store.startInboxHandling(fence, row.eventId);
  let outcome: Outcome;
  let threadRoot: string | null;
  if (isQuarantined(losses)) {
    deps.logger?.warn(
      { event: row.eventId, sender: row.sender, losses },
      "command quarantined: leaders lost their lease while handling it",
    );
    outcome = { kind: "quarantined", losses };
    threadRoot = null;
  } else {
    ({ outcome, threadRoot } = await runIntent(
      deps,
      fence,
      row,
      decodeInboxContent(row.content, row.sender),
    ));
  }
  const after = await deps.store.getInboxEvent(row.eventId);
  // Still new: the outcome had no store effect that marked it (a read, an error, a refusal, a cap).
  if (after?.status === "new") {
    const content = TRIMMED_OUTCOMES.has(outcome.kind) ? trimmedContent(row.content) : null;
    await deps.store.markInboxHandled(
      fence,
      row.eventId,
      wrapOutcome(outcome, threadRoot),
      content === null ? {} : { content },
    );
  }
  deps.logger?.debug({ event: row.eventId, outcome: outcome.kind }, "command handled");
}

async function runIntent(
  deps: InboxDeps,
  fence: LeaderFence,
  row: InboxEvent,
  intent: InboxIntent,
): Promise<{ outcome: Outcome; threadRoot: string | null }> {
  if (intent.kind === "other") return { outcome: { kind: "ignored", why: intent.why }, threadRoot: null };
  if (intent.kind === "undecryptable") {
    const answer = shouldAnswerUndecryptable(deps, row);
    return {
      outcome: answer
        ? { kind: "undecryptable" }
        : { kind: "ignored", why: "undecryptable (its sender was asked to re-send within 10 minutes)" },
      threadRoot: null,
    };
  }
  // The leader acts on a command as first sent; clients show the latest edit, so say it was not applied.
  if (intent.kind === "edit") return { outcome: { kind: "edit-not-applied" }, threadRoot: null };
  let command: Command;
  let threadRoot: string | null;
  if (intent.kind === "message") {
    const parsed = parseCommand(intent.input);
    if (parsed.kind === "not-a-command")
      return { outcome: { kind: "ignored", why: "not a !dag command" }, threadRoot: null };
    threadRoot = intent.threadRoot;
    if (parsed.kind === "error") {
      return {
        outcome: commandErrorOutcome(await handlerContext(deps, fence, row), parsed.error),
        threadRoot,
      };
    }
    command = parsed.command;
  } else if (intent.kind === "data") {
    // The CLI's and HTTP API's commands: data, checked by the same rules as typed text.
    threadRoot = null;
    const unreadable = unreadableFrom(intent.from);
    if (unreadable !== null)
      return { outcome: { kind: "command-error", message: unreadable, helpLine: "" }, threadRoot };
    const parsed = parseCommandData(intent.data);
    if (parsed.kind === "error") {
      const outcome = commandErrorOutcome(await handlerContext(deps, fence, row), parsed.error);
      // Written by another release of the same protocol (a verb this one lacks): say which.
      if (outcome.kind === "command-error" && intent.from !== null && intent.from.release !== RELEASE)
        outcome.message += ` (the command came from dagbot ${intent.from.release}; the leader runs dagbot ${RELEASE})`;
      return { outcome, threadRoot };
    }
    command = parsed.command;
    const allowed = hookPermission(row.sender, command.verb);
    if (!allowed.ok)
      return {
        outcome: {
          kind: "refused",
          verb: command.verb,
          reason: allowed.reason,
          helpLine: helpLineFor(command.verb),
        },
        threadRoot,
      };
  } else {
    const found = await findCardRun(deps.store, row.roomId, intent.targetEventId);
    if (found === null) return gateReaction(deps, fence, row, intent);
    const { run, shownHash } = found;
    // A ✅ confirms the content the card showed, as `!dag confirm <id> <hash>` would.
    command =
      intent.decision === "confirm"
        ? { verb: "confirm", id: run.dagId, hash: shownHash }
        : { verb: "reject", id: run.dagId };
    threadRoot = run.publishEventId;
  }
  const ctx = await handlerContext(deps, fence, row);
  try {
    const outcome = await executeCommand(ctx, command);
    if (outcome.kind === "graph")
      return { outcome: await withinPictureLimits(deps, row, outcome), threadRoot };
    return { outcome, threadRoot };
  } catch (err) {
    // Deposed or store trouble: leave the row for the next pass. Anything else is a bug that this
    // row would hit on every retry; answer it so the commands behind it are not stuck.
    if (isConflict(err) || err instanceof StoreError) throw err;
    deps.logger?.error(
      { event: row.eventId, verb: command.verb, err: String(err) },
      "command handler failed",
    );
    const message = `internal error while handling !dag ${command.verb}; the node's log has the details`;
    return { outcome: { kind: "command-error", message, helpLine: helpLineFor(command.verb) }, threadRoot };
  }
}

const gateRefusals = new WeakMap<InboxDeps, Set<string>>();

/**
 * ✅ / ❌ on a gate's message: approve or deny it, as the sender's own command would. A reaction on
 * a decided gate's message does nothing; one from someone the gate does not let decide is refused
 * once per person and gate (this leader's memory), then ignored.
 */
async function gateReaction(
  deps: InboxDeps,
  fence: LeaderFence,
  row: InboxEvent,
  intent: Extract<InboxIntent, { kind: "reaction" }>,
): Promise<{ outcome: Outcome; threadRoot: string | null }> {
  const gate = await findGateMessage(deps.store, row.roomId, intent.targetEventId);
  if (gate === null)
    return {
      outcome: { kind: "ignored", why: "not a card awaiting confirmation, nor an open gate's message" },
      threadRoot: null,
    };
  const threadRoot = gate.run.publishEventId;
  const command = {
    verb: intent.decision === "confirm" ? ("approve" as const) : ("deny" as const),
    id: gate.run.dagId,
    gate: gate.taskId,
    values: [] as Array<[string, string]>,
    reason: null,
  };
  const ctx = await handlerContext(deps, fence, row);
  const outcome = await executeCommand(ctx, command);
  if (outcome.kind === "refused") {
    let told = gateRefusals.get(deps);
    if (told === undefined) gateRefusals.set(deps, (told = new Set()));
    const key = `${row.roomId}\u0000${row.sender}\u0000${gate.run.runId}\u0000${gate.taskId}`;
    if (told.has(key)) return { outcome: { kind: "ignored", why: "refused once already" }, threadRoot };
    told.add(key);
  }
  return { outcome, threadRoot };
}

async function handlerContext(deps: InboxDeps, fence: LeaderFence, row: InboxEvent): Promise<HandlerContext> {
  // The room's policy as the store holds it, not this node's config: every node enforces the same
  // rules. A room without one (never started by a node) keeps the config's.
  const stored = await deps.store.getRoomPolicy(row.roomId);
  const policy = stored === null ? deps.policy : withRoomPolicy(deps.policy, stored.policy);
  const standing = await deps.permissions.standing(row.roomId, row.sender);
  return {
    store: deps.store,
    fence,
    roomId: row.roomId,
    sender: row.sender,
    eventId: row.eventId,
    standing:
      standing.kind === "room-member"
        ? { ...standing, allowlisted: policy.allowlist.includes(row.sender) }
        : standing,
    policy,
    loadDag: deps.loadDag,
  };
}

/** The key of the reaction that answers an ask over a rate limit. */
export const RATE_LIMITED_KEY = "⏳";

/** ⏳ on the ask itself, under the ask's answer txnId (sent once, like any answer). */
function rateLimitedReaction(roomId: string, eventId: string): OutboxMessageInput {
  return {
    txnId: replyTxnId(eventId),
    roomId,
    eventType: "m.reaction",
    content: { "m.relates_to": { rel_type: "m.annotation", event_id: eventId, key: RATE_LIMITED_KEY } },
  };
}

/** Second half: handled → replied, rendering from the stored result. Idempotent by txnId. */
export async function replyToInboxEvent(deps: InboxDeps, fence: LeaderFence, eventId: string): Promise<void> {
  const row = await deps.store.getInboxEvent(eventId);
  if (row === null || row.status !== "handled") return;
  if (deps.queueMessages === false) {
    await deps.store.markInboxReplied(fence, eventId, []);
    return;
  }
  const intent = decodeInboxContent(row.content, row.sender);
  const outcome = (await readOutcome(deps, row)) ?? { kind: "ignored", why: "not handled" };
  const messages: OutboxMessageInput[] = [];
  const placement = placementOf(row, intent, outcome);
  if (intent.kind === "reaction" && answeredOnGateMessage(outcome)) {
    // A ✅ / ❌ on a gate's message is answered by that message's edit (status-cards.ts): who
    // approved so far, or the decision. A reply beside it would announce it twice.
    await deps.store.markInboxReplied(fence, eventId, []);
    return;
  }
  if (outcome.kind === "rate-limited") {
    messages.push(rateLimitedReaction(row.roomId, eventId));
  } else if (outcome.kind === "graph") {
    // The picture is drawn and uploaded when the outbox sends it (app/pictures.ts): the answer itself
    // where it was asked in the run's thread, else in the thread with a short answer here.
    const picture = picturePlacement(outcome.run, eventId, placement);
    if (picture.pointer) {
      const reply = replyMessage(row.roomId, eventId, outcome, placement);
      if (reply !== null) messages.push(reply);
    }
    messages.push(
      pictureRequestMessage(row.roomId, eventId, outcome.run, picture.placement, picture.pointer),
    );
  } else {
    const reply = replyMessage(
      row.roomId,
      eventId,
      outcome,
      placement,
      answerTxnId(eventId, outcome, placement),
    );
    if (reply !== null) messages.push(reply);
  }
  // A new run's card follows the acknowledgement, in the publish's thread: clients without threads
  // show it as a reply to the acknowledgement. A run without a publish message has its card as the
  // root of its thread, so the card goes first and the answer under it. The outbox sends in order.
  if (outcome.kind === "published" || outcome.kind === "retried") {
    const run = await deps.store.getRunById(outcome.run.runId);
    if (run !== null) {
      const card = cardMessage(run, await deps.store.listTasks(run.runId), await deps.store.now());
      if (placement.kind === "card-thread") messages.unshift(card);
      else messages.push(card);
    }
  }
  await deps.store.markInboxReplied(fence, eventId, messages);
}

/** A gate outcome that the gate message's own edit shows: an approval counted, a decision. */
function answeredOnGateMessage(outcome: Outcome): boolean {
  return (
    outcome.kind === "gate" &&
    (outcome.result === "recorded" ||
      outcome.result === "approved" ||
      outcome.result === "denied" ||
      outcome.result === "already")
  );
}

/**
 * The answer's txnId: `reply.<event id>`, except for a decision that ended its run at once (a reject,
 * a cancel with nothing running) answered in the run's own thread — a ❌ on the card, a command typed
 * there. That answer is the thread's last word on the run, so it is also the run's final message
 * (`final.<run id>`), and the status-card keeper sends no second one.
 */
function answerTxnId(eventId: string, outcome: Outcome, placement: Placement): string {
  if (
    outcome.kind === "decision" &&
    outcome.result === "done" &&
    isTerminalRun(outcome.run.status) &&
    placement.kind === "thread" &&
    placement.root === outcome.run.publishEventId
  )
    return finalTxnId(outcome.run.runId);
  return replyTxnId(eventId);
}

/**
 * Every command is answered where it was typed: in its thread, or as a reply in the main timeline; a
 * reaction in the thread of the message it reacts to. A new run's card, its final message and a
 * picture asked for in the main timeline live in the run's thread, and the answer here points there.
 */
function placementOf(row: InboxEvent, intent: InboxIntent, outcome: Outcome): Placement {
  const storedRoot = storedThreadRoot(row.result);
  if (intent.kind === "reaction") {
    const root =
      typeof storedRoot === "string"
        ? storedRoot
        : outcome.kind === "decision"
          ? outcome.run.publishEventId
          : outcome.kind === "gate"
            ? outcome.publishEventId
            : null;
    if (root !== null) return { kind: "thread", root, to: intent.targetEventId };
    // A run without a publish message: its card is its thread's root. A ✅ / ❌ on the card is
    // answered in that thread; one on a gate's message (in the card's thread) there too.
    if (outcome.kind === "decision")
      return { kind: "thread", root: intent.targetEventId, to: intent.targetEventId };
    if (outcome.kind === "gate")
      return { kind: "card-thread", cardTxn: cardTxnId(outcome.runId), to: intent.targetEventId };
    return { kind: "reply", to: intent.targetEventId };
  }
  // A command that is no Matrix event (a webhook's delivery, the CLI, HTTP) cannot be replied to. A
  // run it started is answered in that run's thread, under its card; anything else in the room.
  if (!row.eventId.startsWith("$")) {
    if ((outcome.kind === "published" || outcome.kind === "retried") && outcome.run.publishEventId === null)
      return { kind: "card-thread", cardTxn: cardTxnId(outcome.run.runId) };
    return { kind: "room" };
  }
  if (intent.kind === "edit") return { kind: "reply", to: intent.editedEventId };
  const root = intent.kind === "message" ? intent.threadRoot : null;
  return root === null ? { kind: "reply", to: row.eventId } : { kind: "thread", root, to: row.eventId };
}

/**
 * The outcome of a handled (or replied) row, whoever marked it: the app, or the store in the same
 * transaction as the command's effect, both keep the outcome (wrapOutcome); a row that 0.3.1 or
 * earlier handled may hold its store's own result, read by old-results.ts. The CLI and HTTP API
 * read answers with it; null while the row is new.
 */
export async function readOutcome(
  deps: Pick<InboxDeps, "store" | "policy">,
  row: InboxEvent,
): Promise<Outcome | null> {
  if (row.status === "new") return null;
  return (
    unwrapOutcome(row.result) ??
    (await outcomeOfOldResult(deps, row)) ??
    unreadable(row, `unknown result ${JSON.stringify(row.result).slice(0, 200)}`)
  );
}
