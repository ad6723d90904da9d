/**
 * The last line a task's action printed, as chat shows why it failed without `!dag logs` (which the
 * reader may not be allowed to read): the kept output tail's last line that says anything, without
 * terminal escapes or control characters, cut to one short line. The tail is already masked by the
 * node that ran the action (app/masking-executor.ts), so no secret of that node reaches it.
 */

/** Characters of the line shown; the rest is in `!dag logs`. */
export const MAX_LAST_LINE_CHARS = 120;

// ESC [ … final byte (CSI: colours, cursor moves) and ESC ] … BEL or ESC \ (OSC: titles, links).
// eslint-disable-next-line no-control-regex
const TERMINAL_ESCAPES = /\u001b\[[0-?]*[ -/]*[@-~]|\u001b\][^\u0007\u001b]*(?:\u0007|\u001b\\)?|\u001b./g;
const INVISIBLE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Co}\p{Cn}]/gu;

/** The last line of `output` with printable text, cut to `max` code points ("…" when cut); null when none. */
export function lastOutputLine(output: string | null, max = MAX_LAST_LINE_CHARS): string | null {
  if (output === null || output === "") return null;
  const lines = output.replace(TERMINAL_ESCAPES, "").split(/\r\n|\r|\n/);
  for (let i = lines.length - 1; i >= 0; i--) {
    const line = (lines[i] ?? "").replace(/\t/g, " ").replace(INVISIBLE, "").trim();
    if (line === "") continue;
    const points = Array.from(line);
    return points.length > max ? `${points.slice(0, max - 1).join("")}…` : line;
  }
  return null;
}
