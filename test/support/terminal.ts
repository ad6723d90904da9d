/**
 * A small terminal for the live view: a screen of `rows` × `cols` cells with auto-wrap (the cursor
 * may sit after the last column until the next character, as xterm does), a scrollback of the
 * lines that scrolled off the top, and the escapes the view writes: CSI n F, CSI J, SGR.
 */
export class Terminal {
  readonly scrollback: string[] = [];
  private screen: string[];
  private row = 0;
  private col = 0;

  constructor(
    readonly rows: number,
    readonly cols: number,
    earlier: string[] = [],
  ) {
    this.screen = Array.from({ length: rows }, () => "");
    for (const line of earlier) this.write(`${line}\n`);
  }

  /** Columns a character takes: the wide ones this test uses (CJK, ⌛) take two. */
  private static width(ch: string): number {
    const cp = ch.codePointAt(0) ?? 0;
    return (cp >= 0x4e00 && cp <= 0x9fff) || cp === 0x231b ? 2 : 1;
  }

  write(text: string): void {
    const chars = [...text];
    for (let i = 0; i < chars.length; i += 1) {
      const ch = chars[i]!;
      if (ch === "\x1b") {
        let j = i + 1;
        if (chars[j] !== "[") throw new Error(`unexpected escape at ${i}`);
        let params = "";
        j += 1;
        while (j < chars.length && /[0-9;]/.test(chars[j]!)) params += chars[j++];
        const final = chars[j];
        if (final === "F") {
          this.row = Math.max(0, this.row - Number(params || "1"));
          this.col = 0;
        } else if (final === "J") {
          this.screen[this.row] = this.cells(this.row).slice(0, this.col);
          for (let r = this.row + 1; r < this.rows; r += 1) this.screen[r] = "";
        } else if (final !== "m") throw new Error(`escape the test does not model: CSI ${params}${final}`);
        i = j;
      } else if (ch === "\n") {
        this.newline();
      } else if (ch === "\r") {
        this.col = 0;
      } else if (ch.charCodeAt(0) < 0x20 || ch === "\x7f") {
        throw new Error(`control character ${JSON.stringify(ch)} written to the terminal`);
      } else {
        const w = Terminal.width(ch);
        if (this.col + w > this.cols) this.newline();
        const line = this.cells(this.row).padEnd(this.col, " ");
        this.screen[this.row] =
          line.slice(0, this.col) + ch + (w === 2 ? "\u0000" : "") + line.slice(this.col + w);
        this.col += w;
      }
    }
  }

  private cells(row: number): string {
    return this.screen[row] ?? "";
  }

  /** A pty turns "\n" into CR LF. */
  private newline(): void {
    this.col = 0;
    if (this.row < this.rows - 1) {
      this.row += 1;
      return;
    }
    this.scrollback.push(this.screen.shift() ?? "");
    this.screen.push("");
  }

  lines(): string[] {
    return this.screen.map((l) => l.replaceAll("\u0000", "").trimEnd());
  }
}
