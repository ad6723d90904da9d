/**
 * Writes a running action's output so far to the store (dagbot logs --follow, !dag logs): one
 * write at a time, only the newest waiting behind it, nothing after close. A refused write means
 * the claim is no longer ours; the worker's renewals decide what that means, here it only stops.
 */
import type { OutputSoFar } from "../ports/executor.js";
import type { Logger } from "../ports/logger.js";
import { isConflict } from "../ports/errors.js";

export class OutputWriter {
  private latest: OutputSoFar | null = null;
  private writing: Promise<void> | null = null;
  private closed = false;

  constructor(
    private readonly write: (soFar: OutputSoFar) => Promise<void>,
    private readonly log: Logger,
  ) {}

  offer(soFar: OutputSoFar): void {
    if (this.closed) return;
    this.latest = soFar;
    this.writing ??= this.drain();
  }

  /** Stops writing and waits for a write in flight, so the attempt's final record comes after it. */
  async close(): Promise<void> {
    this.closed = true;
    this.latest = null;
    await this.writing;
  }

  private async drain(): Promise<void> {
    while (this.latest !== null && !this.closed) {
      const next = this.latest;
      this.latest = null;
      try {
        await this.write(next);
      } catch (err) {
        if (isConflict(err)) {
          this.closed = true;
          this.log.debug({ reason: err.message }, "output write refused: the claim is no longer ours");
        } else {
          this.log.warn({ err: String(err) }, "could not write the task's output so far");
        }
      }
    }
    this.writing = null;
  }
}
