// What `dagbot logs --follow` prints from successive reads of a task's kept output tail.
import { describe, expect, it } from "vitest";
import { OutputPrinter } from "../../src/cli/subcommands/logs.js";
import type { TaskRecord } from "../../src/ports/store.js";

function read(
  output: string | null,
  outputBytes: number | null,
  extra: Partial<TaskRecord> = {},
): TaskRecord {
  return { attempt: 1, maxAttempts: 2, startedAt: 1000, output, outputBytes, ...extra } as TaskRecord;
}

function printer(): { p: OutputPrinter; out: string[] } {
  const out: string[] = [];
  const p = new OutputPrinter(
    (t) => out.push(`out:${t.toString()}`),
    (t) => out.push(`note:${t}`),
  );
  return { p, out };
}

describe("OutputPrinter", () => {
  it("prints only what is new, continuing a tail that moved on where the last one ended", () => {
    const { p, out } = printer();
    p.show(read(null, null));
    p.show(read("a\n", 2));
    p.show(read("a\nb\n", 4));
    p.show(read("a\nb\n", 4)); // nothing new
    // A 4-byte tail of 6 bytes written: it starts at byte 2, the last read ended at 4.
    p.show(read("b\nc\n", 6));
    // An older read than the last one shown (a slow store replica) prints nothing.
    p.show(read("a\nb\n", 4));
    p.end();
    expect(out).toEqual(["out:a\n", "out:b\n", "out:c\n"]);
  });

  it("says how much output was dropped between two reads, and ends an open line first", () => {
    const { p, out } = printer();
    p.show(read("start", 5));
    p.show(read("xyz\n", 100));
    expect(out).toEqual(["out:start", "out:\n", "note:(91 bytes of output were not kept)\n", "out:xyz\n"]);
  });

  it("starts again at a new attempt (a new claim), saying which", () => {
    const { p, out } = printer();
    p.show(read("first try\n", 10));
    p.show(read("first try\n", 10, { attempt: 2, status: "queued" }));
    p.show(read(null, null, { attempt: 2, startedAt: 5000 }));
    p.show(read("again\n", 6, { attempt: 2, startedAt: 5000 }));
    expect(out).toEqual(["out:first try\n", "note:(attempt 2/2)\n", "out:again\n"]);
  });

  it("splits nothing: multi-byte characters are counted in bytes", () => {
    const { p, out } = printer();
    p.show(read("é\n", 3));
    p.show(read("é\n€\n", 7));
    expect(out).toEqual(["out:é\n", "out:€\n"]);
  });
});
