/**
 * What a task's kept output is: the tail of everything its attempt wrote to stdout and stderr, in
 * the order it arrived (one pipe per stream, read as one), bounded by the action's `output_limit`.
 * Every face that shows it says when the beginning was not kept (README, "Commands": `dagbot logs`).
 */

/** Bytes the attempt wrote before the kept tail begins: 0 when the whole output was kept. */
export function droppedOutputBytes(output: string | null, outputBytes: number | null): number {
  if (output === null || outputBytes === null) return 0;
  return Math.max(0, outputBytes - Buffer.byteLength(output, "utf8"));
}

/** `the first 1200 bytes of its 66736 were not kept (output_limit): this is the last 65536`. */
export function droppedWords(dropped: number, outputBytes: number): string {
  return `the first ${dropped} bytes of its ${outputBytes} were not kept (output_limit): this is the last ${
    outputBytes - dropped
  }`;
}
