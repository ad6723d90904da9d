/**
 * One reader of a room's event log per node, fanned out to every listener (event-stream clients,
 * the metrics collector), so a hundred clients cost one read per change instead of a hundred.
 *
 * The store's readEvents returns a complete prefix (PostgreSQL waits out writers still holding a seq
 * they have not committed), so a reader that asks "after the last seq I saw" never skips an event.
 */
import type { Logger } from "../../ports/logger.js";
import type { ChangeFeed, EventLogStore, LogEvent, RunStore } from "../../ports/store.js";

export interface EventListener {
  /** Events after the tail's cursor, in seq order; called again only after the previous call returned. */
  onEvents(events: readonly LogEvent[]): void;
}

export type EventHubStore = Pick<EventLogStore, "readEvents"> &
  Pick<ChangeFeed, "onChange"> &
  Pick<RunStore, "getRunById">;

/** One page of the log; the tail reads pages until one comes back short. */
const PAGE = 500;
/** Run names kept; a page names at most PAGE runs, so a page's names are never evicted while it is sent. */
const MAX_RUN_NAMES = 20_000;

/**
 * The log's lines name a run by its uuid; the stream shows its canonical id (its name in the room)
 * too, as every other output does. A run's name never changes, so a learned name never goes stale.
 */
export class RunNames {
  private readonly names = new Map<string, string | null>();

  constructor(private readonly store: Pick<RunStore, "getRunById">) {}

  /** Looks up the names of the runs these events name that are not known yet. */
  async learn(events: readonly LogEvent[]): Promise<void> {
    for (const e of events) {
      if (e.runId === null || this.names.has(e.runId)) continue;
      const run = await this.store.getRunById(e.runId);
      if (this.names.size >= MAX_RUN_NAMES) this.names.delete(this.names.keys().next().value!);
      this.names.set(e.runId, run?.dagId ?? null);
    }
  }

  /** The run's name, null when the run is gone (or the event names none). */
  of(runId: string | null): string | null {
    return runId === null ? null : (this.names.get(runId) ?? null);
  }
}

class RoomTail {
  private readonly listeners = new Set<EventListener>();
  /** The seq of the last event delivered; known once `ready` resolved. */
  cursor = 0;
  readonly ready: Promise<void>;
  private wake: (() => void) | null = null;
  private dirty = true;
  private stopped = false;
  private readonly unsubscribe: () => void;
  private readonly loop: Promise<void>;

  constructor(
    private readonly store: EventHubStore,
    readonly roomId: string,
    private readonly pollMs: number,
    private readonly logger: Logger,
    names: RunNames,
    onError: () => void,
  ) {
    this.unsubscribe = store.onChange((_topic, room) => {
      if (room !== null && room !== roomId) return;
      this.dirty = true;
      this.wake?.();
    });
    let readyResolve!: () => void;
    this.ready = new Promise((resolve) => (readyResolve = resolve));
    this.loop = (async () => {
      // The head first: listeners start from "now", history is each stream's own replay.
      for (;;) {
        try {
          for (;;) {
            const page = await store.readEvents(roomId, this.cursor, PAGE);
            const last = page.at(-1);
            if (last !== undefined) this.cursor = last.seq;
            if (page.length < PAGE) break;
          }
          break;
        } catch (err) {
          onError();
          this.logger.warn({ room: roomId, err: String(err) }, "event stream: could not read the log head");
          if (await this.sleep(this.pollMs)) return;
        }
      }
      readyResolve();
      while (!this.stopped) {
        if (!this.dirty && (await this.sleep(this.pollMs))) return;
        this.dirty = false;
        try {
          for (;;) {
            const page = await store.readEvents(roomId, this.cursor, PAGE);
            if (page.length === 0) break;
            await names.learn(page);
            this.cursor = page[page.length - 1]!.seq;
            for (const l of this.listeners) l.onEvents(page);
            if (page.length < PAGE) break;
          }
        } catch (err) {
          onError();
          this.logger.warn({ room: roomId, err: String(err) }, "event stream: could not read the log");
          this.dirty = true;
          if (await this.sleep(this.pollMs)) return;
        }
      }
    })();
  }

  /** True when stopped while sleeping. */
  private async sleep(ms: number): Promise<boolean> {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
    this.wake = null;
    return this.stopped;
  }

  add(l: EventListener): void {
    this.listeners.add(l);
  }

  remove(l: EventListener): number {
    this.listeners.delete(l);
    return this.listeners.size;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.unsubscribe();
    this.wake?.();
    await this.loop;
  }
}

export class EventHub {
  private readonly tails = new Map<string, RoomTail>();
  /** Failed log reads, for the store-errors metric. */
  readErrors = 0;
  /** The names of the runs the log's lines name, learned before a page is handed to listeners. */
  readonly runNames: RunNames;

  constructor(
    private readonly store: EventHubStore,
    private readonly logger: Logger,
    /** A fallback poll: change notices can be coalesced or (on SQLite across processes) late. */
    private readonly pollMs = 1000,
  ) {
    this.runNames = new RunNames(store);
  }

  /** Adds a listener to the room's tail (starting it); resolves with the tail's cursor once the head is known. */
  async subscribe(roomId: string, listener: EventListener): Promise<{ head: () => number }> {
    let tail = this.tails.get(roomId);
    if (tail === undefined) {
      tail = new RoomTail(this.store, roomId, this.pollMs, this.logger, this.runNames, () => {
        this.readErrors += 1;
      });
      this.tails.set(roomId, tail);
    }
    tail.add(listener);
    await tail.ready;
    const t = tail;
    return { head: () => t.cursor };
  }

  unsubscribe(roomId: string, listener: EventListener): void {
    const tail = this.tails.get(roomId);
    if (tail === undefined) return;
    if (tail.remove(listener) === 0) {
      this.tails.delete(roomId);
      void tail.stop();
    }
  }

  async close(): Promise<void> {
    const tails = [...this.tails.values()];
    this.tails.clear();
    await Promise.all(tails.map((t) => t.stop()));
  }
}
