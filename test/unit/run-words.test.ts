// How a run's state is said in the plain-text faces (CLI, HTTP messages): a pending run is not
// "pending in 0ms", an ended one is not "it is succeeded", and a filtered list that found nothing
// does not read as a room without runs.
import { describe, expect, it } from "vitest";
import type { Outcome, RunSummary } from "../../src/app/commands/outcome.js";
import { plainTextOf } from "../../src/app/commands/outcome-table.js";
import { renderDecision } from "../../src/app/commands/run-decisions.js";
import { CHAT_IDIOM } from "../../src/app/commands/face.js";
import { CLI_IDIOM } from "../../src/cli/subcommands/verb-commands.js";
import { runTimeWords } from "../../src/domain/duration.js";
import type { RunStatus } from "../../src/domain/model.js";
import { RUN_STATUSES } from "../../src/domain/model.js";
import { summarizeTasks } from "../../src/domain/run-status.js";

const T0 = Date.UTC(2026, 10, 28, 12, 0, 0);

function run(status: RunStatus, dagId = "deploy"): RunSummary {
  return {
    runId: "8d2f8a7e-0000-4000-8000-000000000001",
    dagId,
    status,
    description: null,
    publisher: "local:ops",
    confirmedBy: null,
    publishEventId: null,
    confirmDeadline: null,
    createdAt: T0,
    // A pending run's row was written once, when it was created.
    updatedAt: status === "pending" ? T0 : T0 + 7_000,
    taskCount: 1,
  };
}

describe("a run's time in words", () => {
  it("a run that waits or runs is said for how long so far; one that ended, how long it took", () => {
    const now = T0 + 65_000;
    expect(runTimeWords("pending", T0, T0, now)).toBe("pending for 1m05s");
    expect(runTimeWords("running", T0, T0 + 1_000, now)).toBe("running for 1m05s");
    expect(runTimeWords("succeeded", T0, T0 + 7_000, now)).toBe("succeeded in 7s");
    expect(runTimeWords("failed", T0, T0 + 7_000, now)).toBe("failed in 7s");
    expect(runTimeWords("rejected", T0, T0 + 7_000, now)).toBe("rejected after 7s");
    // A run that has not ended was never "in" any time, whatever its row's times say.
    for (const s of ["pending", "running", "canceling"] as const)
      expect(runTimeWords(s, T0, T0, now)).toBe(`${s} for 1m05s`);
  });

  it("`dagbot status` of a pending run says how long it has waited, not `pending in 0ms`", () => {
    const o: Outcome = {
      kind: "status",
      run: run("pending"),
      summary: summarizeTasks(["blocked"]),
      tasks: [],
      at: T0 + 12_000,
    } as unknown as Outcome;
    const text = plainTextOf(o, CLI_IDIOM);
    expect(text).toContain("run deploy (8d2f8a7e-0000-4000-8000-000000000001) pending for 12s: 1 blocked");
    expect(text).not.toContain("in 0ms");
  });
});

describe("a run's state after `it`", () => {
  it("says `it succeeded`, `it was canceled`, `it is running` — never `it is succeeded`", () => {
    for (const status of RUN_STATUSES) {
      const exists = plainTextOf({ kind: "exists", run: run(status) }, CLI_IDIOM);
      const refused = plainTextOf(
        { kind: "decision", verb: "confirm", result: "wrong-status", run: run(status), by: "local:ops" },
        CLI_IDIOM,
      );
      const chat = renderDecision(
        {
          kind: "decision",
          verb: "confirm",
          result: "wrong-status",
          run: run(status),
          by: "@ops:example.org",
        },
        CHAT_IDIOM,
      ).body;
      for (const said of [exists, refused, chat])
        expect(said, status).not.toMatch(/[Ii]t is (succeeded|failed|canceled|rejected|expired)/);
    }
    expect(plainTextOf({ kind: "exists", run: run("succeeded") }, CLI_IDIOM)).toContain(
      "It succeeded (published by",
    );
    expect(
      plainTextOf(
        { kind: "decision", verb: "confirm", result: "wrong-status", run: run("canceled"), by: "local:ops" },
        CLI_IDIOM,
      ),
    ).toBe("deploy cannot be confirmed: it was canceled.");
  });
});

describe("an empty list", () => {
  const list = (extra: Partial<Extract<Outcome, { kind: "list" }>>): string =>
    plainTextOf({ kind: "list", runs: [], at: T0, room: "local", ...extra }, CLI_IDIOM);

  it("filtered by status with runs in other states says so, not `no runs in room local`", () => {
    const text = list({ statuses: ["failed"], others: { count: 3, more: false } });
    expect(text).toBe("no failed runs in room local (3 runs in other states)");
    expect(list({ statuses: ["failed", "canceled"], others: { count: 100, more: true } })).toBe(
      "no failed or canceled runs in room local (more than 100 runs in other states)",
    );
    expect(list({ statuses: ["failed"], others: { count: 1, more: false }, of: "deploy" })).toBe(
      "no failed runs of deploy (1 run in other states)",
    );
  });

  it("of a room without runs at all says that", () => {
    expect(list({})).toBe("no runs in room local");
    expect(list({ statuses: ["failed"], others: { count: 0, more: false } })).toBe(
      "no failed runs in room local",
    );
  });
});
