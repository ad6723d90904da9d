/**
 * How a CLI command waits for the store to change (a run's progress, a task's output): woken early
 * by the store's change feed, else after the caller's poll interval. Wiring of app/wake.ts with the
 * system clock, so the CLI itself stays argument parsing and printing (docs/architecture.md, "Layers").
 */
import { setTimeout as sleep } from "node:timers/promises";
import { systemClock } from "../adapters/clock/system-clock.js";
import { Waker, wakeOnChange } from "../app/wake.js";
import type { ChangeTopic, Store } from "../ports/store.js";

export interface StoreWatch {
  /**
   * Resolves on a change of the watched tables in the room, after `pollMs`, or when `stop` aborts;
   * unless `stop` aborts, never before `atLeastMs` (a change meanwhile is kept and ends the wait
   * as soon as that time is up).
   */
  wait(pollMs: number, stop?: AbortSignal, atLeastMs?: number): Promise<void>;
  close(): void;
}

// A burst of changes (a task finishing and its dependents queued) is one wake-up.
const DEBOUNCE_MS = 50;

export function watchStore(store: Store, roomId: string, tables: readonly ChangeTopic[]): StoreWatch {
  const waker = new Waker(systemClock, DEBOUNCE_MS);
  const unsubscribe = wakeOnChange(store, waker, tables, [roomId]);
  const never = new AbortController().signal;
  return {
    wait: async (pollMs, stop, atLeastMs = 0) => {
      if (atLeastMs > 0) await sleep(atLeastMs, undefined, { signal: stop ?? never }).catch(() => {});
      await waker.wait(Math.max(0, pollMs - atLeastMs), stop ?? never);
    },
    close: unsubscribe,
  };
}
