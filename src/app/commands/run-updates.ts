/**
 * Keeps the room's status cards current (DESIGN.md §4 step 7): the leader calls `step` once per
 * pass, after deriveRunOutcomes. It reads the event log since its last call to find the runs whose
 * tasks or status moved, and enqueues for each the card edit of its new state (or the card itself,
 * for a run published from the CLI or HTTP) and, once the run has ended, the final message that
 * mentions the publisher. Transaction ids come from the run's state, so enqueueing twice is harmless
 * and a new leader that refreshes everything sends nothing already sent.
 */
import { isTerminalRun } from "../../domain/run-states.js";
import type { RunStatus } from "../../domain/model.js";
import type {
  EventLogStore,
  LeaderFence,
  OutboxMessageInput,
  OutboxStore,
  RunRecord,
  RunStore,
} from "../../ports/store.js";
import { cardTxnId, cardUpdateMessages, finalMessage, finalTxnId } from "../render/messages.js";

export type RunUpdateStore = Pick<EventLogStore, "readEvents"> &
  Pick<RunStore, "getRunById" | "listRuns" | "listTasks"> &
  Pick<OutboxStore, "getOutbox" | "enqueueOutbox"> & { now(): Promise<number> };

const ACTIVE: RunStatus[] = ["pending", "running", "canceling"];
const ENDED: RunStatus[] = ["succeeded", "failed", "canceled", "rejected", "expired"];
/** Ended runs a new leader looks at, in case the last one died before their final message. */
const RECENTLY_ENDED = 20;
const PAGE = 1000;

export class RunUpdates {
  /** Per room: the term it was read under and the last event seen. */
  private readonly cursors = new Map<string, { term: number; seq: number }>();

  constructor(private readonly store: RunUpdateStore) {}

  /** Enqueues what changed since the last call; returns how many messages it enqueued (some may be duplicates). */
  async step(fence: LeaderFence): Promise<number> {
    const cursor = this.cursors.get(fence.roomId);
    let runIds: Set<string>;
    let seq: number;
    if (cursor === undefined || cursor.term !== fence.term) {
      // A new term: the previous leader may have died mid-way, so refresh every run that may need it.
      ({ seq } = await this.readSince(fence.roomId, cursor?.seq ?? 0, false));
      const active = await this.store.listRuns(fence.roomId, { statuses: ACTIVE });
      const ended = await this.store.listRuns(fence.roomId, { statuses: ENDED, limit: RECENTLY_ENDED });
      runIds = new Set([...active, ...ended].map((r) => r.runId));
    } else {
      ({ seq, runIds } = await this.readSince(fence.roomId, cursor.seq, true));
    }
    let enqueued = 0;
    for (const runId of runIds) {
      const run = await this.store.getRunById(runId);
      if (run !== null && run.roomId === fence.roomId) enqueued += await this.refresh(fence, run);
    }
    this.cursors.set(fence.roomId, { term: fence.term, seq });
    return enqueued;
  }

  /** The card (or its edit) for a run's current state, and its final message when it has ended. */
  async refresh(fence: LeaderFence, run: RunRecord): Promise<number> {
    const tasks = await this.store.listTasks(run.runId);
    const cardExists = (await this.store.getOutbox(cardTxnId(run.runId))) !== null;
    const messages: OutboxMessageInput[] = cardUpdateMessages(cardExists, run, tasks, await this.store.now());
    if (isTerminalRun(run.status) && (await this.store.getOutbox(finalTxnId(run.runId))) === null) {
      messages.push(finalMessage(run, tasks));
    }
    await this.store.enqueueOutbox(fence, messages);
    return messages.length;
  }

  private async readSince(
    roomId: string,
    since: number,
    collect: boolean,
  ): Promise<{ seq: number; runIds: Set<string> }> {
    const runIds = new Set<string>();
    let seq = since;
    for (;;) {
      const events = await this.store.readEvents(roomId, seq, PAGE);
      for (const e of events) {
        seq = Math.max(seq, e.seq);
        if (collect && e.runId !== null && (e.kind.startsWith("task.") || e.kind.startsWith("run.")))
          runIds.add(e.runId);
      }
      if (events.length < PAGE) return { seq, runIds };
    }
  }
}
