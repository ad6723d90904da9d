/**
 * A core's group commit of its edges' heartbeats (docs/operations.md, "Edge nodes"): the beats that
 * arrive within a short window go to the store as ONE heartbeats() call, one commit, and each
 * caller is answered once the commit that holds its beat is done (or failed, with that batch's
 * error). A thousand edges beating every 10 s would otherwise cost a hundred commits a second and
 * hold the store pool that claims wait for.
 */
import type { Clock } from "../ports/clock.js";
import type { NodeHeartbeat, NodeStore } from "../ports/store.js";
import { endWait } from "./wake.js";

/**
 * How long the first beat of a batch waits for others. An edge's beat only has to land well within
 * the liveness window (tens of seconds), so 50 ms of delay costs nothing and gathers every beat of
 * a burst.
 */
export const HEARTBEAT_BATCH_WINDOW_MS = 50;

/**
 * The most beats one commit writes: a full batch goes at once. Each beat is up to a few KiB of JSON
 * (its labels, actions and their specs), so a batch stays one modest statement parameter.
 */
export const HEARTBEAT_BATCH_MAX = 200;

interface Pending {
  beat: NodeHeartbeat;
  /** When it arrived (monotonic): the batch it opens waits at most the window from then. */
  at: number;
  resolve: () => void;
  reject: (e: unknown) => void;
}

export class HeartbeatBatcher implements Pick<NodeStore, "heartbeat"> {
  private pending: Pending[] = [];
  /** The loop writing batches while beats wait; null when none do. */
  private draining: Promise<void> | null = null;
  /** Ends the current window early (a full batch, or close). */
  private cut: AbortController | null = null;
  private closed = false;
  /** Store calls made (tests and the bench read it). */
  batches = 0;

  constructor(
    private readonly store: Pick<NodeStore, "heartbeats">,
    private readonly clock: Pick<Clock, "monotonicMs" | "sleep">,
    private readonly windowMs = HEARTBEAT_BATCH_WINDOW_MS,
    private readonly maxBeats = HEARTBEAT_BATCH_MAX,
  ) {}

  /** Resolves once the batch holding this beat committed; rejects with that batch's error. */
  heartbeat(beat: NodeHeartbeat): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.pending.push({ beat, at: this.clock.monotonicMs(), resolve, reject });
      if (this.closed || this.pending.length >= this.maxBeats) endWait(this.cut);
      this.draining ??= this.drain();
    });
  }

  /**
   * Writes what waits at once and every batch after it as it comes, without a window: a core
   * stopping answers the beats it accepted. Resolves when nothing is left to write.
   */
  async close(): Promise<void> {
    this.closed = true;
    endWait(this.cut);
    while (this.draining !== null) await this.draining;
  }

  /**
   * One batch at a time: beats that arrive while a batch commits wait for the next one, so a core
   * holds at most one store connection for heartbeats however many edges beat.
   */
  private async drain(): Promise<void> {
    while (this.pending.length > 0) {
      const first = this.pending[0]!;
      const wait = first.at + this.windowMs - this.clock.monotonicMs();
      if (!this.closed && this.pending.length < this.maxBeats && wait > 0) {
        this.cut = new AbortController();
        await this.clock.sleep(wait, this.cut.signal);
        this.cut = null;
      }
      await this.write(this.pending.splice(0, this.maxBeats));
    }
    this.draining = null;
  }

  private async write(batch: Pending[]): Promise<void> {
    this.batches += 1;
    try {
      await this.store.heartbeats(batch.map((p) => p.beat));
    } catch (e) {
      for (const p of batch) p.reject(e);
      return;
    }
    for (const p of batch) p.resolve();
  }
}
