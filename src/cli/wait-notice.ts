/**
 * When `dagbot run` says why its run waits: a wait line (domain/wait-reasons.ts waitsLine) is shown
 * once it has held for a moment, so the ordinary hand-over between tasks (a need just succeeded,
 * the leader about to queue) stays quiet, and again each time it changes.
 */
export const WAIT_MOMENT_MS = 1_000;

export class WaitNotice {
  private candidate = "";
  private since = 0;

  constructor(private readonly momentMs = WAIT_MOMENT_MS) {}

  /** The line to show at `nowMs` ("" while nothing has waited a moment), given the current one. */
  settle(line: string, nowMs: number): string {
    if (line !== this.candidate) {
      this.candidate = line;
      this.since = nowMs;
    }
    return line !== "" && nowMs - this.since >= this.momentMs ? line : "";
  }

  /** Ms until the current line has held a moment (the caller looks again then); null when none is due. */
  dueInMs(nowMs: number): number | null {
    if (this.candidate === "") return null;
    const left = this.since + this.momentMs - nowMs;
    return left > 0 ? left : null;
  }
}
