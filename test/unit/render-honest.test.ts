// Honest counts and quieter words (docs/chat.md), in the card, `!dag status` and `!dag list`: what
// succeeded over the total, then what else happened; a full bar only when every task succeeded;
// runs named by their id only; one way to say an exit status; one "Usage"; a neutral glyph for waiting.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { Outcome, RunSummary, TaskLine } from "../../src/app/commands/outcome.js";
import { renderOutcome } from "../../src/app/render/reply.js";
import { progressLine, renderRunView, renderTaskLine } from "../../src/app/render/status-card.js";
import { againWords } from "../../src/domain/failure-words.js";
import type { TaskStatus } from "../../src/domain/model.js";
import { TASK_STATUSES } from "../../src/domain/model.js";
import { summarizeTasks } from "../../src/domain/run-status.js";

const T0 = Date.UTC(2024, 4, 1, 12, 0, 0);
const FULL = "▰▰▰▰▰▰▰▰▰▰";
const RUN_ID = "3f2a9c1d-5b6e-4c1a-9d2f-0123456789ab";

const summary = (over: Partial<RunSummary> = {}): RunSummary => ({
  runId: RUN_ID,
  dagId: "backup",
  status: "failed",
  description: null,
  publisher: "@alice:test",
  confirmedBy: null,
  publishEventId: "$pub",
  confirmDeadline: null,
  createdAt: T0,
  updatedAt: T0,
  taskCount: 5,
  ...over,
});

const line = (over: Partial<TaskLine> = {}): TaskLine => ({
  taskId: "t",
  action: "echo",
  status: "failed",
  node: "n1",
  attempt: 1,
  maxAttempts: 1,
  startedAt: T0,
  finishedAt: T0 + 1_000,
  exitCode: 1,
  error: "exited with status 1",
  ...over,
});

const statuses = (spec: Partial<Record<TaskStatus, number>>): TaskStatus[] =>
  Object.entries(spec).flatMap(([s, n]) => Array<TaskStatus>(n).fill(s as TaskStatus));

describe("honest counts", () => {
  it("a failed run with skipped tasks: what succeeded, then the rest, never a full bar", () => {
    const s = summarizeTasks(statuses({ succeeded: 2, failed: 1, skipped: 2 }));
    expect(progressLine(s).body).toBe("▰▰▰▰▱▱▱▱▱▱ 2/5 succeeded · 1 failed · 2 skipped");
  });

  it("examples of every kind of mix", () => {
    const cases: [Partial<Record<TaskStatus, number>>, string][] = [
      [{ succeeded: 5 }, `${FULL} 5/5 succeeded`],
      [{ succeeded: 4, failed: 1 }, "▰▰▰▰▰▰▰▰▱▱ 4/5 succeeded · 1 failed"],
      [{ succeeded: 99, timed_out: 1 }, "▰▰▰▰▰▰▰▰▰▱ 99/100 succeeded · 1 timed out"],
      [{ canceled: 3 }, "▱▱▱▱▱▱▱▱▱▱ 0/3 succeeded · 3 canceled"],
      [
        { succeeded: 1, running: 1, queued: 1, blocked: 1 },
        "▰▰▱▱▱▱▱▱▱▱ 1/4 succeeded · 1 running · 1 queued · 1 waiting",
      ],
      [
        { succeeded: 1, canceling: 1, canceled: 1, skipped: 1 },
        "▰▰▱▱▱▱▱▱▱▱ 1/4 succeeded · 1 canceled · 1 skipped · 1 canceling",
      ],
    ];
    for (const [spec, want] of cases) expect(progressLine(summarizeTasks(statuses(spec))).body).toBe(want);
  });

  it("for every mix: the bar is full exactly when every task succeeded, and the counts add up", () => {
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...TASK_STATUSES), { minLength: 1, maxLength: 120 }), (mix) => {
        const text = progressLine(summarizeTasks(mix)).body;
        const ok = mix.filter((s) => s === "succeeded").length;
        expect(text.startsWith(FULL)).toBe(ok === mix.length);
        expect(text).toContain(`${ok}/${mix.length} succeeded`);
        const counted = [...text.matchAll(/ · (\d+) /g)].reduce((sum, m) => sum + Number(m[1]), ok);
        expect(counted).toBe(mix.length);
      }),
    );
  });

  it("!dag list shows the same counts, and no full bar for a failed run", () => {
    const failed = summarizeTasks(statuses({ succeeded: 2, failed: 1, skipped: 2 }));
    const ok = summarizeTasks(statuses({ succeeded: 3 }));
    const outcome: Outcome = {
      kind: "list",
      runs: [
        { run: summary(), summary: failed },
        { run: summary({ dagId: "nightly", status: "succeeded" }), summary: ok },
      ],
      at: T0,
    };
    const body = renderOutcome(outcome)!.body;
    expect(body).toContain("`backup` — failed · ▰▰▰▰▱▱▱▱▱▱ 2/5 succeeded · 1 failed · 2 skipped");
    expect(body).toContain(`\`nightly\` — succeeded · ${FULL} 3/3 succeeded`);
    expect(body).not.toContain("done");
  });
});

describe("quieter words", () => {
  it("cards name the run by its id (the title), never by a piece of its uuid, which no command accepts", () => {
    const view = { run: summary(), summary: summarizeTasks(["failed"]), tasks: [], at: T0 };
    const card = renderRunView(view);
    expect(card.body.split("\n")[0]).toContain("`backup`");
    expect(card.body).not.toContain("3f2a9c1d");
  });

  it("an exit status is said once", () => {
    // No retries: "attempt 1/1" is not said either.
    expect(renderTaskLine(line(), T0).body).toBe("❌ `t` — failed · on `n1` · 1s · exit 1");
    // Other errors stay.
    expect(renderTaskLine(line({ exitCode: null, error: "killed by signal SIGKILL" }), T0).body).toContain(
      "killed by signal SIGKILL",
    );
  });

  it("a task run again after its node was lost says so on the card, with where it runs now", () => {
    const again = line({
      status: "running",
      node: "n1",
      attempt: 2,
      maxAttempts: 2,
      finishedAt: null,
      exitCode: null,
      error: "node n2 was lost; running again",
    });
    expect(renderTaskLine(again, T0 + 5_000).body).toBe(
      "🔄 `t` — running · on `n1` · attempt 2/2 · for 5s · node n2 was lost; running again",
    );
    expect(againWords(again)).toBe("node n2 was lost; running again");
    // A first attempt, or a task that ended, has none: its end is said by endedWords.
    expect(againWords({ ...again, attempt: 1 })).toBeNull();
    expect(againWords({ ...again, status: "failed" })).toBeNull();
  });

  it("a waiting task has a neutral glyph, not a pause sign", () => {
    const waiting = renderTaskLine(
      line({ status: "blocked", node: null, startedAt: null, finishedAt: null, exitCode: null, error: null }),
      T0,
    );
    expect(waiting.body).toBe("⚪ `t` — waiting");
  });

  it("one Usage in a command error", () => {
    const out = renderOutcome({
      kind: "command-error",
      message: "bad",
      helpLine: "usage: !dag logs <id> <task>",
    });
    expect(out!.body).toBe("⚠️ bad\nUsage: `!dag logs <id> <task>`");
  });
});
