// A failed task's last printed line, as chat shows it (the final message and the card's task line):
// the last line that says anything, without terminal escapes or invisible characters, one short line.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { taskLine } from "../../src/app/commands/outcome.js";
import { renderStatusCard } from "../../src/app/render/status-card.js";
import { lastOutputLine, MAX_LAST_LINE_CHARS } from "../../src/domain/last-line.js";
import type { RunRecord } from "../../src/ports/store.js";
import { taskFixture } from "../support/task-record.js";

describe("lastOutputLine", () => {
  it("takes the last line with text, without colours, carriage returns or trailing blank lines", () => {
    expect(
      lastOutputLine('one\n\u001b[1;31mERROR: relation "orders" does not exist\u001b[0m\r\n\n  \n'),
    ).toBe('ERROR: relation "orders" does not exist');
    expect(lastOutputLine("progress 10%\rprogress 100%")).toBe("progress 100%");
    expect(lastOutputLine("a\u202eb\u0007c")).toBe("abc");
    expect(lastOutputLine("\n \n")).toBeNull();
    expect(lastOutputLine(null)).toBeNull();
    expect(lastOutputLine(`${"é".repeat(300)}`)).toBe(`${"é".repeat(MAX_LAST_LINE_CHARS - 1)}…`);
  });

  it("is always one line of at most MAX_LAST_LINE_CHARS printable code points (property)", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary", maxLength: 400 }), (output) => {
        const line = lastOutputLine(output);
        if (line === null) return;
        expect(Array.from(line).length).toBeLessThanOrEqual(MAX_LAST_LINE_CHARS);
        expect(line).not.toMatch(/[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/u);
        expect(line.trim()).toBe(line);
        expect(line).not.toBe("");
      }),
    );
  });
});

describe("a failed task's line on the card", () => {
  it("says why it failed with the last line it printed; other tasks' output stays out", () => {
    const failed = taskFixture({
      taskId: "migrate",
      status: "failed",
      exitCode: 1,
      error: "exited with status 1",
      output: 'ERROR: relation "orders" does not exist\n',
    });
    const done = taskFixture({ taskId: "fetch", status: "succeeded", output: "fetched 3 files\n" });
    expect(taskLine(failed).lastLine).toBe('ERROR: relation "orders" does not exist');
    expect(taskLine(done).lastLine).toBeUndefined();
    const run = {
      runId: "r",
      roomId: "!r:x",
      dagId: "deploy",
      hash: "h",
      status: "failed",
      description: null,
      maxParallel: null,
      publisher: "@a:x",
      publishEventId: "$p",
      confirmedBy: null,
      confirmDeadline: null,
      createdAt: 0,
      updatedAt: 0,
      dag: { id: "deploy", description: null, maxParallel: null, tasks: [] },
    } as unknown as RunRecord;
    const card = renderStatusCard(run, [done, failed], 0).body;
    expect(card).toMatch(/^❌ `migrate` — failed · .*exit 1 · ERROR: relation "orders" does not exist$/m);
    expect(card).not.toContain("fetched 3 files");
  });
});
