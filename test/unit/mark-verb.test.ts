// The mark verb's grammar, its command as data, its answers in each face's words, and its record
// read back from an inbox row (src/app/commands/verbs/mark.ts, outcome.ts).
import { describe, expect, it } from "vitest";
import { unwrapOutcome, wrapOutcome } from "../../src/app/commands/outcome.js";
import { plainTextOf } from "../../src/app/commands/outcome-faces.js";
import { markOutcome } from "../../src/app/commands/verbs/mark.js";
import { parseCommand, parseCommandData } from "../../src/app/commands/verbs/index.js";
import type { MarkRecord } from "../../src/domain/task-mark.js";

const cli = { command: (verb: string, args: readonly string[]) => ["dagbot", verb, ...args].join(" ") };

const record = (extra: Partial<MarkRecord>): MarkRecord => ({
  kind: "marked",
  runId: "u1",
  dagId: "ship",
  taskId: "build",
  to: "succeeded",
  by: "local:ops",
  reason: "flaky runner",
  status: "failed",
  revived: ["test", "deploy"],
  ...extra,
});

describe("mark's grammar", () => {
  it("reads the run, the task, succeeded or skipped, and the rest of the line as the reason", () => {
    expect(parseCommand({ body: "!dag mark ship build succeeded flaky  runner, again" })).toEqual({
      kind: "command",
      command: { verb: "mark", id: "ship", task: "build", to: "succeeded", reason: "flaky runner, again" },
    });
    expect(parseCommand({ body: "!dag mark ship build skipped" })).toMatchObject({
      command: { to: "skipped", reason: null },
    });
    // A matrix instance is marked by its own id (src/domain/matrix.ts).
    expect(parseCommand({ body: "!dag mark ship deploy[region=eu,tier=web] succeeded" })).toMatchObject({
      command: { task: "deploy[region=eu,tier=web]", to: "succeeded" },
    });
  });

  it("refuses another target, a missing one, and a reason too long, naming the problem", () => {
    const bad = parseCommand({ body: "!dag mark ship build failed" });
    expect(bad.kind === "error" && bad.error.message).toMatch(/"failed" is not succeeded or skipped/);
    const missing = parseCommand({ body: "!dag mark ship build" });
    expect(missing.kind === "error" && missing.error.message).toMatch(/missing succeeded or skipped/);
    const long = parseCommand({ body: `!dag mark ship build skipped ${"x".repeat(501)}` });
    expect(long.kind === "error" && long.error.message).toMatch(/at most 500/);
  });

  it("takes the same command as data, by the same rules, and nothing else", () => {
    expect(
      parseCommandData({ verb: "mark", id: "ship", task: "build", to: "skipped", reason: "n/a" }),
    ).toEqual({
      kind: "command",
      command: { verb: "mark", id: "ship", task: "build", to: "skipped", reason: "n/a" },
    });
    expect(parseCommandData({ verb: "mark", id: "ship", task: "build", to: "done" }).kind).toBe("error");
    expect(
      parseCommandData({ verb: "mark", id: "ship", task: "build", to: "skipped", values: [] }).kind,
    ).toBe("error");
  });
});

describe("mark's answers", () => {
  it("says what the mark did and what it let go on, or why it was refused and what to do instead", () => {
    const say = (r: MarkRecord): string => plainTextOf(markOutcome(r, null), cli);
    expect(say(record({}))).toBe(
      "local:ops marked ship/build succeeded (flaky runner): what needs it may run now; test, deploy are no longer skipped.",
    );
    expect(say(record({ to: "skipped", reason: null, revived: [] }))).toBe(
      "local:ops marked ship/build skipped: what needs it is skipped.",
    );
    expect(say(record({ kind: "running", status: "running", revived: [] }))).toContain(
      "a mark would not stop its action. Wait for it to end, or cancel the run (dagbot cancel ship)",
    );
    expect(say(record({ kind: "wrong-status", status: "succeeded", revived: [] }))).toContain(
      "ship/build succeeded: only a task that failed, timed out, was denied or waits can be marked succeeded",
    );
    expect(say(record({ kind: "run-not-running", runStatus: "failed", revived: [] }))).toBe(
      "ship/build cannot be marked: its run failed. A mark cannot change how a run ended; dagbot retry ship runs again what did not succeed. Nothing changed.",
    );
  });

  it("is read back from the inbox row the store marked as the same outcome, and a malformed one is not", () => {
    const o = markOutcome(record({ kind: "run-not-running", runStatus: "failed", revived: [] }), "$publish");
    const stored = JSON.parse(JSON.stringify(wrapOutcome(o))) as Record<string, unknown>;
    expect(unwrapOutcome(stored)).toEqual(o);
    expect(unwrapOutcome({ dagbotOutcome: "not an outcome" })).toBeNull();
  });
});
