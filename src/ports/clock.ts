/** Time for the loops of one node: a monotonic clock for local deadlines and abortable sleeps. Types only. */

export interface Clock {
  /**
   * Milliseconds on a monotonic clock (performance.now): never jumps with the wall clock, so a
   * leader measures "TTL passed since my last renewal" correctly even across NTP steps or a pause.
   * Only differences between two readings mean anything.
   */
  monotonicMs(): number;
  /** Wall-clock epoch milliseconds, for display only; store times come from the store. */
  wallMs(): number;
  /**
   * Resolves after `ms`, or at once when `signal` aborts (it never rejects), so `stop()` does not
   * wait out a sleep.
   */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}
