/**
 * The SQLite change feed: in-process listeners hear of this connection's commits at once; commits
 * by other processes are noticed by polling PRAGMA data_version, fast for a while after a change and
 * backing off while the file is quiet, only while someone listens.
 */
import type { ChangeTopic } from "../../ports/store.js";
import type { ChangeListener } from "../store-common/change-listeners.js";
import { ChangeListeners } from "../store-common/change-listeners.js";

const MIN_POLL_MS = 5;
const MAX_POLL_MS = 100;
/**
 * How long after the last change the poll stays at MIN_POLL_MS before it backs off. A running task
 * commits nothing until it ends: backing off at once let its end wait for a poll up to 40 ms away,
 * the tail of dependency latency; a poll is one PRAGMA, about a microsecond.
 */
const ACTIVE_MS = 250;

export class ChangeFeed {
  private readonly listeners: ChangeListeners;
  private timer: NodeJS.Timeout | undefined;
  private delay = MIN_POLL_MS;
  private lastVersion: number | undefined;
  private lastChangeAt = 0;
  private closed = false;

  constructor(
    private readonly dataVersion: () => number,
    private readonly onError: (e: unknown) => void,
  ) {
    this.listeners = new ChangeListeners(onError);
  }

  emit(topic: ChangeTopic, roomId: string | null, targets?: readonly string[]): void {
    // This process's own commit: another process's answer to it (a claim after a schedule, a
    // schedule after a finish) is likely soon, so the poll comes back to its fastest.
    this.lastChangeAt = performance.now();
    if (this.delay > MIN_POLL_MS && this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
      this.delay = MIN_POLL_MS;
      this.schedule();
    }
    this.listeners.emit(topic, roomId, targets);
  }

  subscribe(listener: ChangeListener): () => void {
    this.listeners.add(listener);
    this.schedule();
    return () => {
      this.listeners.delete(listener);
      if (this.listeners.size === 0) this.stop();
    };
  }

  close(): void {
    this.closed = true;
    this.listeners.clear();
    this.stop();
  }

  private stop(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    this.lastVersion = undefined;
  }

  private schedule(): void {
    if (this.closed || this.timer !== undefined || this.listeners.size === 0) return;
    this.lastVersion ??= this.dataVersion();
    this.timer = setTimeout(() => this.poll(), this.delay);
    // The poll never keeps a process alive on its own.
    this.timer.unref();
  }

  private poll(): void {
    this.timer = undefined;
    if (this.closed || this.listeners.size === 0) return;
    let version: number;
    try {
      version = this.dataVersion();
    } catch (e) {
      this.onError(e);
      this.delay = MAX_POLL_MS;
      this.schedule();
      return;
    }
    if (version !== this.lastVersion) {
      this.lastVersion = version;
      this.lastChangeAt = performance.now();
      this.delay = MIN_POLL_MS;
      // Another process committed something; which tables, SQLite does not say.
      this.listeners.emitAll();
    } else if (performance.now() - this.lastChangeAt >= ACTIVE_MS) {
      this.delay = Math.min(this.delay * 2, MAX_POLL_MS);
    }
    this.schedule();
  }
}
