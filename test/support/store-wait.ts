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
