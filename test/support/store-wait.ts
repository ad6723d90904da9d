/** Wait for a state instead of sleeping for a guess: poll a probe until it passes, or fail with what was last seen. */
export async function waitFor<T>(
  what: string,
  probe: () => Promise<T> | T,
  accept: (value: T) => boolean,
  { timeoutMs = 10_000, intervalMs = 10 }: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: T | undefined;
  let lastError: unknown;
  for (;;) {
    try {
      last = await probe();
      if (accept(last)) return last;
    } catch (e) {
      lastError = e;
    }
    if (Date.now() > deadline) {
      const seen = lastError === undefined ? JSON.stringify(last) : String(lastError);
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; last saw: ${seen}`);
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/**
 * Until some node of the store has a heartbeat: submit, trigger and the decisions exit 3 while no
 * node is alive, so a test that starts a node waits for this before it sends a command.
 */
export function untilNodeBeats(store: { listNodes(): Promise<readonly unknown[]> }): Promise<unknown> {
  return waitFor(
    "a node heartbeat",
    () => store.listNodes(),
    (nodes) => nodes.length > 0,
    { timeoutMs: 15_000, intervalMs: 25 },
  );
}
