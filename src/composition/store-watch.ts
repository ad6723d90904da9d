/**
 * How a CLI command waits for the store to change (a run's progress, a task's output): woken early
 * by the store's change feed, else after the caller's poll interval. Wiring of app/wake.ts with the
 * system clock, so the CLI itself stays argument parsing and printing (docs/architecture.md, "Layers").
 */
import { setTimeout as sleep } from "node:timers/promises";
import { systemClock } from "../adapters/clock/system-clock.js";
import { endWait, Waker, wakeOnChange } from "../app/wake.js";
import type { ChangeTopic, Store } from "../ports/store.js";

export interface StoreWatch {
  /**
   * Resolves on a change of the watched tables in the room, after `pollMs`, or when `stop` aborts;
   * unless `stop` aborts, never before `atLeastMs` (a change meanwhile is kept and ends the wait
   * as soon as that time is up), or a change of an urgent table (WatchOptions) ends it at once.
   */
  wait(pollMs: number, stop?: AbortSignal, atLeastMs?: number): Promise<void>;
  close(): void;
}

// A burst of changes (a task finishing and its dependents queued) is one wake-up.
const DEBOUNCE_MS = 50;

export interface WatchOptions {
  /**
   * Tables whose change skips the debounce and ends a pause at once: those that change a few times
   * in a whole run (the run's own status), where the caller is waiting for exactly that change.
   */
  urgent?: readonly ChangeTopic[];
}

export function watchStore(
  store: Store,
  roomId: string,
  tables: readonly ChangeTopic[],
  { urgent = [] }: WatchOptions = {},
): StoreWatch {
  const waker = new Waker(systemClock, DEBOUNCE_MS);
  // An urgent change seen since the last wait began: the next pause is skipped or cut short.
  let urgentSeen = false;
  let pausing: AbortController | null = null;
  const unsubscribe =
    urgent.length === 0
      ? wakeOnChange(store, waker, tables, [roomId])
      : store.onChange((topic, changedRoom) => {
          if (!tables.includes(topic)) return;
          if (changedRoom !== null && changedRoom !== roomId) return;
          const now = urgent.includes(topic);
          if (now) {
            urgentSeen = true;
            endWait(pausing);
          }
          waker.wake(now);
        }, tables);
  const never = new AbortController().signal;
  return {
    wait: async (pollMs, stop, atLeastMs = 0) => {
      if (atLeastMs > 0 && !urgentSeen) {
        const pause = new AbortController();
        pausing = pause;
        const onStop = (): void => endWait(pause);
        stop?.addEventListener("abort", onStop, { once: true });
        try {
          if (stop?.aborted !== true)
            await sleep(atLeastMs, undefined, { signal: pause.signal }).catch(() => {});
        } finally {
          stop?.removeEventListener("abort", onStop);
          pausing = null;
        }
      }
      urgentSeen = false;
      await waker.wait(Math.max(0, pollMs - atLeastMs), stop ?? never);
      // An urgent change during that wait ended it; it is no reason to skip the next pause.
      urgentSeen = false;
    },
    close: unsubscribe,
  };
}
