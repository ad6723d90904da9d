/** The listeners of a store's change feed, shared by both adapters' feeds (the way news arrives differs). */
import type { ChangeListener, ChangeTopic } from "../../ports/store.js";

export type { ChangeListener } from "../../ports/store.js";

export const ALL_CHANGE_TOPICS: readonly ChangeTopic[] = [
  "inbox",
  "tasks",
  "runs",
  "outbox",
  "lease",
  "cap",
  "ready",
  "wake",
  "done",
];

export class ChangeListeners {
  private readonly listeners = new Set<ChangeListener>();

  constructor(private readonly onError: (e: unknown) => void) {}

  get size(): number {
    return this.listeners.size;
  }

  add(listener: ChangeListener): void {
    this.listeners.add(listener);
  }

  delete(listener: ChangeListener): void {
    this.listeners.delete(listener);
  }

  clear(): void {
    this.listeners.clear();
  }

  emit(topic: ChangeTopic, roomId: string | null, targets?: readonly string[]): void {
    for (const l of [...this.listeners]) {
      try {
        l(topic, roomId, targets);
      } catch (e) {
        // A listener's bug must not hide a committed write from the others, nor undo it.
        this.onError(e);
      }
    }
  }

  /** Something changed but the feed cannot say what: every topic, every room. */
  emitAll(): void {
    for (const topic of ALL_CHANGE_TOPICS) this.emit(topic, null);
  }
}
