/**
 * The leader's status-card keeper for one room (docs/architecture.md §4 step 5): whenever a run's tasks or
 * status change, it enqueues an edit of the run's card (render/messages.ts cardEditMessage, whose
 * txnId names the run's state, so one state is one edit however often it is enqueued), and when a
 * run ends, the final message that mentions the publisher, last in the run's thread (txnId
 * final.<run_id>: once, whichever leader gets there). The outbox coalesces a burst of edits and paces them (outbox-loop.ts).
 */
import { isTerminalRun } from "../domain/run-states.js";
import type { Clock } from "../ports/clock.js";
import type { Logger } from "../ports/logger.js";
import type {
  ChangeFeed,
  EventLogStore,
  InboxStore,
  LeaderFence,
  NodeStore,
  OutboxMessageInput,
  OutboxStore,
  PolicyStore,
  RunRecord,
  RunStore,
  Scheduler,
  TaskRecord,
} from "../ports/store.js";
import { isConflict } from "../ports/errors.js";
import { cardEditMessage, cardMessage, cardTxnId, cardVersion, finalMessage } from "./render/messages.js";
import {
  gateDecidedMessage,
  gateOpenMessage,
  gateProgressMessage,
  gateTxnId,
} from "./render/gate-messages.js";
import type { GateSpec, GateState } from "../domain/gates.js";
import { isMatrixUserId } from "./render/html.js";
import { Waker, wakeOnChange } from "./wake.js";
import type { RoomWaitFacts } from "./task-waits.js";
import { readRoomWaits, waitsOf } from "./task-waits.js";
import { CHAT_PASS_BACKOFF, backoffMs } from "../domain/backoff.js";
import { outputValueText } from "../domain/outputs.js";

export interface StatusCardDeps {
  store: Pick<RunStore, "listRuns" | "getRunById" | "listTasks"> &
    Pick<Scheduler, "getRoomCap" | "roomLoad"> &
    Pick<NodeStore, "listNodes"> &
    Pick<OutboxStore, "enqueueOutbox" | "getOutbox"> &
    Pick<InboxStore, "getInboxEvent" | "nextInboxEvent"> &
    Pick<PolicyStore, "getRoomPolicy"> &
    Pick<EventLogStore, "runEndedBy"> &
    ChangeFeed & { now(): Promise<number> };
  clock: Clock;
  logger: Logger;
  /**
   * The room's members at or above a power level (from its m.room.power_levels), for the people a
   * gate's message mentions; absent (no Matrix) or failing, the message names them in words.
   */
  members?: (roomId: string, level: number) => Promise<string[]>;
  /** The fleet's bot accounts: never named as a gate's approvers, whatever power they hold. */
  bots?: ReadonlySet<string>;
}

export interface StatusCardOptions {
  /** Lets a burst of task moves settle into one pass. */
  debounceMs?: number;
  /** A pass with no change announced (a lost notification). */
  safetyTickMs?: number;
  /** Recently created runs a new leader checks for a missing final message or edit. */
  recentRuns?: number;
  /** A node silent longer than this offers nothing to a waiting task (retention.node_gone_after). */
  nodeLiveWithinMs?: number;
}

const DEFAULTS = { debounceMs: 100, safetyTickMs: 5_000, recentRuns: 50, nodeLiveWithinMs: 30_000 };
const ACTIVE: RunRecord["status"][] = ["pending", "running", "canceling"];
/** How many of the room's newest runs each pass looks at besides the active ones (see CardKeeper.done). */
const NEWEST = 8;

/** Keeps the room's cards current until `signal` aborts. Never throws. */
export async function runStatusCardLoop(
  deps: StatusCardDeps,
  fence: LeaderFence,
  signal: AbortSignal,
  options: StatusCardOptions = {},
): Promise<void> {
  const o = { ...DEFAULTS, ...options };
  const log = deps.logger.child({ room: fence.roomId, term: fence.term, component: "cards" });
  const waker = new Waker(deps.clock, o.debounceMs);
  const unsubscribe = wakeOnChange(deps.store, waker, ["tasks", "runs", "outbox", "cap"], [fence.roomId]);
  const keeper = new CardKeeper(deps, fence, log, o.nodeLiveWithinMs);
  let first = true;
  let failures = 0;
  try {
    while (!signal.aborted) {
      try {
        await keeper.pass(first ? o.recentRuns : 0);
        first = false;
        failures = 0;
      } catch (err) {
        failures += 1;
        if (isConflict(err)) log.debug({ reason: err.message }, "card write rejected");
        else log.warn({ err: String(err) }, "card pass failed");
        await deps.clock.sleep(backoffMs(CHAT_PASS_BACKOFF, failures), signal);
        continue;
      }
      await waker.wait(o.safetyTickMs, signal);
    }
  } finally {
    unsubscribe();
  }
}

/** The card state of each run as this leader last enqueued it; one pass brings every card up to date. */
export class CardKeeper {
  /** runId → the card version last enqueued (or found current) in this term. */
  private readonly shown = new Map<string, string>();
  /** Gate messages (open, decided) already queued by this leader: (run, task, phase). */
  private readonly gatesDone = new Set<string>();
  /** Runs that were active at the last pass: when one is gone from the active list, it has ended. */
  private active = new Set<string>();
  /**
   * Ended runs whose card and final message are done. Every pass also looks at the room's newest
   * runs (NEWEST), which catches a run created and ended between two passes (an auto-confirmed run of
   * quick tasks ends within milliseconds): it was never active when a pass looked, yet needs its
   * card's last edit and its final message. The runs already done are skipped without a read.
   */
  private readonly done = new Set<string>();

  constructor(
    private readonly deps: StatusCardDeps,
    private readonly fence: LeaderFence,
    private readonly log: Logger,
    private readonly nodeLiveWithinMs = DEFAULTS.nodeLiveWithinMs,
  ) {}

  /**
   * Each opened gate's message (once: insert-or-ignore by its txnId), its edit after each approval
   * that did not pass it, and its edit once it is decided or timed out. Only gates whose state moved
   * since this leader looked cost a read.
   */
  private async gateMessages(run: RunRecord, tasks: readonly TaskRecord[]): Promise<OutboxMessageInput[]> {
    const { store } = this.deps;
    const out: OutboxMessageInput[] = [];
    // When the text is written: a message sent or edited late counts its "in 4h" from here.
    let now: number | null = null;
    for (const t of tasks) {
      if (t.gate === null || t.gateState === null) continue;
      const gate = t as TaskRecord & { gate: GateSpec; gateState: GateState };
      const state = gate.gateState;
      const phase = state.decision === null ? `open.${state.approvals.length}` : "decided";
      const key = `${run.runId}\u0000${t.taskId}\u0000${phase}`;
      if (this.gatesDone.has(key)) continue;
      const txn = gateTxnId(run.runId, t.taskId);
      const after = tasks.filter((d) => d.needs.includes(t.taskId)).map((d) => d.taskId);
      const inputs = inputsOf(gate, tasks);
      const opened = await store.getOutbox(txn);
      const approvers =
        opened === null || state.decision === null ? await this.approversOf(run, gate.gate) : [];
      now ??= await store.now();
      // A gate decided before its message went out still gets one, edited at once after it.
      if (opened === null) out.push(gateOpenMessage(run, gate, after, approvers, inputs, now));
      const progress = gateProgressMessage(run, gate, after, approvers, inputs, now);
      if (progress !== null && (await store.getOutbox(progress.txnId)) === null) out.push(progress);
      const decided = gateDecidedMessage(run, gate);
      if (decided !== null && (await store.getOutbox(decided.txnId)) === null) out.push(decided);
      this.gatesDone.add(key);
    }
    return out;
  }

  /** Exactly the people who may decide on the gate, as far as the room says (gates.ts rules). */
  private async approversOf(run: RunRecord, spec: GateSpec): Promise<string[]> {
    const { store, members } = this.deps;
    const stored = await store.getRoomPolicy(run.roomId);
    const policy = stored?.policy;
    let people: string[] = [];
    try {
      if (Array.isArray(spec.who)) people = [...(spec.who as readonly string[])];
      else if (spec.who === "operators")
        people = [
          ...((await members?.(run.roomId, policy?.powerLevel ?? 50)) ?? []),
          ...(policy?.allow ?? []),
        ];
      else people = (await members?.(run.roomId, spec.who as number)) ?? [];
    } catch (err) {
      this.log.warn({ room: run.roomId, err: String(err) }, "could not read who may approve a gate");
    }
    const ownersMay = spec.publisherMayApprove && policy?.twoPersonRule !== true;
    const owners = new Set([run.publisher, ...(run.confirmedBy === null ? [] : [run.confirmedBy])]);
    // The fleet's own accounts may hold operator power, but a bot never approves its own gates.
    const bots = this.deps.bots ?? new Set<string>();
    return [...new Set(people)]
      .filter((u) => isMatrixUserId(u) && !bots.has(u) && (ownersMay || !owners.has(u)))
      .sort()
      .slice(0, 50);
  }

  /** `recent` > 0 also looks at that many of the newest runs (a new leader catching up). */
  async pass(recent: number): Promise<void> {
    const { store } = this.deps;
    const roomId = this.fence.roomId;
    const runs = new Map<string, RunRecord>();
    for (const run of await store.listRuns(roomId, { statuses: ACTIVE })) runs.set(run.runId, run);
    for (const run of await store.listRuns(roomId, { limit: Math.max(recent, NEWEST) }))
      if (!this.done.has(run.runId)) runs.set(run.runId, run);
    for (const runId of this.active) {
      if (runs.has(runId)) continue;
      const run = await store.getRunById(runId);
      if (run !== null) runs.set(runId, run);
    }
    const unfinished = new Set<string>();
    // A paused room (cap 0) and why tasks wait are said on its active cards; read once per pass.
    const room = await readRoomWaits(store, roomId, this.nodeLiveWithinMs);
    for (const run of runs.values()) {
      const { messages, settled } = await this.update(run, room);
      if (!settled) unfinished.add(run.runId);
      if (messages.length > 0) await store.enqueueOutbox(this.fence, messages);
      if (settled && isTerminalRun(run.status)) this.remember(run.runId);
    }
    this.active = unfinished;
  }

  private remember(runId: string): void {
    this.done.add(runId);
    // Bounded: the oldest entries go first (a Set keeps insertion order); a run forgotten here is
    // read again only while it is among the NEWEST, and found settled.
    if (this.done.size > 4 * NEWEST)
      for (const id of [...this.done].slice(0, 2 * NEWEST)) this.done.delete(id);
  }

  /**
   * The messages that bring the run's card up to date. `settled`: nothing more is due for this
   * state; false while the run is active, or ended but its final message still waits for the card
   * to show the end (so the mention arrives after the card reads "succeeded", not before).
   */
  private async update(
    run: RunRecord,
    room: RoomWaitFacts,
  ): Promise<{ messages: OutboxMessageInput[]; settled: boolean }> {
    const { store } = this.deps;
    // A quiet scheduled run (its schedule fires more often than once a minute) stays out of the chat.
    if (run.dag.slot?.quiet === true) return { messages: [], settled: true };
    const tasks = await store.listTasks(run.runId);
    const gateMessages = await this.gateMessages(run, tasks);
    if (gateMessages.length > 0) await store.enqueueOutbox(this.fence, gateMessages);
    const roomCap = room.load.cap;
    const waits = waitsOf(run, tasks, room);
    const version = cardVersion(run, tasks, roomCap, waits);
    const ended = isTerminalRun(run.status);
    if (this.shown.get(run.runId) === version) return { messages: [], settled: ended };
    const messages: OutboxMessageInput[] = [];
    /** The message whose sending makes the card show this state. */
    let showing: string;
    const card = await store.getOutbox(cardTxnId(run.runId));
    if (card === null) {
      // A chat publish enqueues its card with the reply: leave it to the inbox step until that is done.
      if (run.publishEventId !== null) {
        const row = await store.getInboxEvent(run.publishEventId);
        if (row !== null && row.status !== "replied") return { messages: [], settled: false };
      }
      const message = cardMessage(run, tasks, await store.now(), roomCap, waits);
      messages.push(message);
      showing = message.txnId;
    } else if (run.status === "pending" && !this.shown.has(run.runId)) {
      // Nothing moves before a confirmation: the card as published is current.
      showing = card.txnId;
    } else {
      const edit = cardEditMessage(run, tasks, await store.now(), roomCap, waits);
      if ((await store.getOutbox(edit.txnId)) === null) messages.push(edit);
      showing = edit.txnId;
    }
    // Every end gets one final message, the last word of the run's thread. A reject or cancel answered
    // in that thread is that word itself (inbox-step.ts answerTxnId): while a handled command waits
    // for its answer, that answer may be it.
    if (ended) {
      const final = finalMessage(run, tasks);
      if ((await store.getOutbox(final.txnId)) === null) {
        if ((await store.nextInboxEvent(this.fence))?.status === "handled")
          return { messages, settled: false };
        const shown = messages.some((m) => m.txnId === showing) ? null : await store.getOutbox(showing);
        if (shown === null || shown.status === "pending") return { messages, settled: false };
        // Who canceled or rejected it, read once, when its final message is due.
        const by =
          run.status === "canceled" || run.status === "rejected"
            ? await store.runEndedBy(run.roomId, run.runId)
            : null;
        messages.push(by === null ? final : finalMessage(run, tasks, by));
        this.log.info(
          { run: run.runId, dag: run.dagId, status: run.status },
          "run ended: final message queued",
        );
      }
    }
    this.shown.set(run.runId, version);
    return { messages, settled: ended };
  }
}

/**
 * What a gate's approvers approve, as far as it is known when it opens: the values its needs
 * published (`version=2.7.0`), each named by itself, or `task.name` where two needs publish one name.
 */
export function inputsOf(gate: TaskRecord, tasks: readonly TaskRecord[]): Record<string, string> {
  const needs = tasks.filter((t) => gate.needs.includes(t.taskId) && t.outputValues !== null);
  const count = new Map<string, number>();
  for (const t of needs)
    for (const k of Object.keys(t.outputValues ?? {})) count.set(k, (count.get(k) ?? 0) + 1);
  const out: Record<string, string> = {};
  for (const t of needs)
    for (const [k, v] of Object.entries(t.outputValues ?? {}))
      out[(count.get(k) ?? 0) > 1 ? `${t.taskId}.${k}` : k] = outputValueText(v);
  return out;
}
