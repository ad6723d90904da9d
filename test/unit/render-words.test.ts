// Words inside lines (docs/chat.md): a failed run's failures named with how each ended, card
// lines without noise: no "attempt 1/1", no durations under a second, and a fourth name
// where "and 1 more" would take the same space; a typo's answer gives the command to copy.
import { describe, expect, it } from "vitest";
import type { TaskLine } from "../../src/app/commands/outcome.js";
import { parseCommand } from "../../src/app/commands/verbs/index.js";
import { finalMessage } from "../../src/app/render/messages.js";
import { renderOutcome } from "../../src/app/render/reply.js";
import { renderStatusCard, renderTaskLine } from "../../src/app/render/status-card.js";
import { correctedCommand } from "../../src/domain/command-grammar.js";
import { shownDuration } from "../../src/domain/duration.js";
import { endedWords, failureText } from "../../src/domain/failure-words.js";
import type { TaskStatus } from "../../src/domain/model.js";
import { fitList, nameLine } from "../../src/domain/name-list.js";
import type { RunRecord, TaskRecord } from "../../src/ports/store.js";
import { taskFixture } from "../support/task-record.js";

const T0 = Date.UTC(2024, 4, 1, 12, 0, 0);

function run(extra: Partial<RunRecord> = {}): RunRecord {
  return {
    runId: "run-1",
    roomId: "!room:test",
    dagId: "deploy_prod",
    hash: "h",
    status: "failed",
    description: null,
    maxParallel: null,
    publisher: "@alice:test",
    publishEventId: "$publish",
    confirmedBy: "@bob:test",
    confirmDeadline: null,
    createdAt: T0,
    updatedAt: T0,
    dag: { id: "deploy_prod", description: null, maxParallel: null, tasks: [] },
    ...extra,
  };
}

function task(taskId: string, status: TaskStatus, extra: Partial<TaskRecord> = {}): TaskRecord {
  return taskFixture({ taskId, status, ...extra });
}

const line = (over: Partial<TaskLine> = {}): TaskLine => ({
  taskId: "t",
  action: "echo",
  status: "running",
  node: "n1",
  attempt: 1,
  maxAttempts: 1,
  startedAt: T0,
  finishedAt: null,
  exitCode: null,
  error: null,
  ...over,
});

const exit = (code: number) => ({ exitCode: code, error: `exited with status ${code}` });

describe("a failed run's failures in words", () => {
  it("the issue's example: the failed task with its exit status, then its skipped dependents", () => {
    const tasks = [
      task("fetch", "succeeded"),
      task("migrate", "failed", exit(1)),
      task("rollout", "skipped"),
      task("smoke_test", "skipped"),
    ];
    expect(failureText(tasks)).toBe("`migrate` failed (exit 1); `rollout`, `smoke_test` skipped");
  });

  it("each recorded way a task ends is said in words", () => {
    const said = (status: TaskStatus, exitCode: number | null, error: string | null) =>
      endedWords({ taskId: "x", status, exitCode, error });
    expect(said("failed", 1, "exited with status 1")).toBe("failed (exit 1)");
    expect(said("failed", null, "killed by signal SIGKILL")).toBe("failed (killed by signal SIGKILL)");
    expect(said("timed_out", null, "timed out after 5s")).toBe("timed out after 5s");
    expect(said("timed_out", 143, "timed out after 5s")).toBe("timed out after 5s (exit 143)");
    expect(said("failed", null, "lease expired")).toBe("failed (its node was lost)");
    expect(said("timed_out", null, "deadline passed")).toBe("timed out (its deadline passed)");
    expect(said("timed_out", null, "queue timeout")).toBe(
      "timed out (no node took it within its queue timeout)",
    );
    expect(said("failed", null, 'executable "deploy" not found')).toBe(
      'failed (executable "deploy" not found)',
    );
    expect(said("failed", null, null)).toBe("failed");
    // Exit 0 with outputs that break their rule (domain/outputs.ts): the rule, not "exit 0".
    expect(said("failed", 0, 'outputs refused: output "v" is not declared by task build')).toBe(
      'failed (outputs refused: output "v" is not declared by task build)',
    );
    // A long or many-line error is cut to one short line; the rest is in the logs.
    const long = said("failed", null, `${"e".repeat(300)}\nsecond line`);
    expect(long).toBe(`failed (${"e".repeat(80)}…)`);
  });

  it("many failures and skips: each list is one bounded line that says how many it leaves out", () => {
    const tasks = [
      ...Array.from({ length: 30 }, (_, i) => task(`shard_${i}`, "failed", exit(2))),
      ...Array.from({ length: 1000 }, (_, i) => task(`after_${i}`, "skipped")),
    ];
    const text = failureText(tasks);
    const [failed, skipped] = text.split("; ");
    const failedNamed = [...(failed ?? "").matchAll(/`shard_\d+` failed \(exit 2\)/g)].length;
    const skippedNamed = [...(skipped ?? "").matchAll(/`after_\d+`/g)].length;
    expect(failedNamed).toBeGreaterThan(0);
    expect(failed).toMatch(new RegExp(` and ${30 - failedNamed} more$`));
    expect(skipped).toMatch(new RegExp(` and ${1000 - skippedNamed} more skipped$`));
    expect(text.length).toBeLessThan(250);
  });

  it("the final message starts with the outcome: each failure with why and its last printed line, then what it skipped", () => {
    const tasks = [
      task("fetch", "succeeded", { startedAt: T0, finishedAt: T0 + 2_000 }),
      task("migrate", "failed", {
        startedAt: T0 + 2_000,
        finishedAt: T0 + 3_000,
        ...exit(1),
        output: 'applying 0042_orders.sql\n\u001b[31mERROR: relation "orders" does not exist\u001b[0m\n\n',
      }),
      task("rollout", "skipped"),
      task("smoke_test", "skipped"),
    ];
    const message = finalMessage(run(), tasks);
    expect(message.content["body"]).toBe(
      '❌ `deploy_prod` failed — `migrate`: exit 1, ERROR: relation "orders" does not exist · `rollout`, `smoke_test` skipped · 1/4 succeeded in 3s. ' +
        "See `!dag logs deploy_prod migrate`; `!dag retry deploy_prod` runs the rest again. cc @alice:test",
    );
    // The publisher is reached through m.mentions; their pill comes last, after the outcome.
    expect(message.content["m.mentions"]).toEqual({ user_ids: ["@alice:test"] });
    expect(String(message.content["formatted_body"])).toMatch(/^❌ <code>deploy_prod<\/code> failed — /);
    expect(String(message.content["formatted_body"])).toContain(
      "<code>migrate</code>: exit 1, ERROR: relation &quot;orders&quot; does not exist · <code>rollout</code>, <code>smoke_test</code> skipped",
    );
  });

  it("a failed task's last line is one short line, and a timeout or a lost node says so", () => {
    const long = task("load", "failed", { ...exit(2), output: `${"x".repeat(500)}\n` });
    const body = String(finalMessage(run(), [long]).content["body"]);
    expect(body).toContain(`\`load\`: exit 2, ${"x".repeat(119)}… · 0/1 succeeded`);
    const late = task("load", "timed_out", { error: "timed out after 5s", output: "still loading\n" });
    expect(String(finalMessage(run(), [late]).content["body"])).toMatch(
      /^❌ `deploy_prod` failed — `load`: timed out after 5s, still loading · 0\/1 succeeded\./,
    );
    const lost = task("load", "failed", { error: "lease expired" });
    expect(String(finalMessage(run(), [lost]).content["body"])).toMatch(
      /^❌ `deploy_prod` failed — `load`: its node was lost · 0\/1 succeeded\./,
    );
  });

  it("a run canceled or rejected by a person says who", () => {
    const tasks = [task("a", "canceled"), task("b", "canceled")];
    expect(finalMessage(run({ status: "canceled" }), tasks, "@bob:test").content["body"]).toBe(
      "🚫 `deploy_prod` canceled by @bob:test — 0/2 succeeded · 2 canceled. cc @alice:test",
    );
    expect(finalMessage(run({ status: "expired" }), tasks).content["body"]).toMatch(
      /^⌛ `deploy_prod` expired \(not confirmed in time\) — 0\/2 succeeded/,
    );
  });

  it("a run that ended within a second does not say how long it took", () => {
    const tasks = [task("a", "succeeded", { startedAt: T0, finishedAt: T0 + 59 })];
    expect(finalMessage(run({ status: "succeeded" }), tasks).content["body"]).toBe(
      "✅ `deploy_prod` succeeded — 1/1 succeeded. cc @alice:test",
    );
  });
});

describe("card lines without noise", () => {
  it("no attempts without retries; attempts with retries, or after a retry", () => {
    expect(renderTaskLine(line({ startedAt: T0 - 5_000 }), T0).body).toBe(
      "🔄 `t` — running · on `n1` · for 5s",
    );
    expect(renderTaskLine(line({ maxAttempts: 3, startedAt: T0 - 5_000 }), T0).body).toBe(
      "🔄 `t` — running · on `n1` · attempt 1/3 · for 5s",
    );
    expect(renderTaskLine(line({ attempt: 2, maxAttempts: 2, startedAt: T0 - 5_000 }), T0).body).toContain(
      "attempt 2/2",
    );
  });

  it("durations under a second are not shown; longer ones are rounded to the second", () => {
    expect(renderTaskLine(line({ startedAt: T0 - 59 }), T0).body).toBe("🔄 `t` — running · on `n1`");
    expect(
      renderTaskLine(line({ status: "succeeded", startedAt: T0, finishedAt: T0 + 850 }), T0 + 1_000).body,
    ).toBe("✅ `t` — succeeded · on `n1`");
    expect(shownDuration(999)).toBeNull();
    expect(shownDuration(1_000)).toBe("1s");
    expect(shownDuration(2_600)).toBe("3s");
    expect(shownDuration(65_400)).toBe("1m05s");
    expect(shownDuration(3_725_000)).toBe("1h02m");
  });

  it("a fourth name instead of 'and 1 more'; more names than fit are counted", () => {
    const four = ["fetch", "build", "test", "deploy"].map((id) => task(id, "succeeded"));
    const card = renderStatusCard(run({ status: "succeeded" }), four, T0).body;
    expect(card).toContain("✅ 4 succeeded: `fetch`, `build`, `test`, `deploy`");
    expect(card).not.toContain("and 1 more");
    // While the run goes on, a line names what fits one short line and counts the rest.
    const many = Array.from({ length: 40 }, (_, i) => task(`step_${i}`, "succeeded"));
    const folded = renderStatusCard(run({ status: "running" }), many, T0).body.split("\n");
    const succeeded = folded.find((l) => l.startsWith("✅ 40 succeeded: ")) ?? "";
    const named = [...succeeded.matchAll(/`step_\d+`/g)].length;
    expect(named).toBeGreaterThan(1);
    expect(succeeded).toMatch(new RegExp(` and ${40 - named} more$`));
  });

  it("an ended run's card names every task it lists: no name hides behind 'and N more'", () => {
    const tasks = [
      ...["build", "migrate_database_schema", "package", "publish_artifacts"].map((id) =>
        task(id, "succeeded"),
      ),
      task("rollout", "failed", exit(1)),
      ...["smoke_test_eu_west", "smoke_test_us_east", "notify_release_channel"].map((id) =>
        task(id, "skipped"),
      ),
    ];
    const card = renderStatusCard(run({ status: "failed" }), tasks, T0).body;
    expect(card).not.toMatch(/and \d+ more/);
    for (const t of tasks) expect(card).toContain(`\`${t.taskId}\``);
    expect(card).toContain(
      "⏭️ 3 skipped: `smoke_test_eu_west`, `smoke_test_us_east`, `notify_release_channel`",
    );
  });
});

describe("fitList", () => {
  it("names every item that fits, never leaves exactly one known name out, and counts the rest", () => {
    const w = (s: string) => s.length;
    expect(fitList(["a", "b", "c"], 3, w, 20)).toEqual({ shown: ["a", "b", "c"], more: 0 });
    for (let n = 1; n <= 60; n += 1) {
      const items = Array.from({ length: n }, (_, i) => `name_${i}`);
      for (const budget of [10, 30, 72]) {
        const { shown, more } = fitList(items, n, w, budget);
        expect(shown.length + more).toBe(n);
        expect(shown.length).toBeGreaterThan(0);
        expect(more).not.toBe(1);
        expect(shown).toEqual(items.slice(0, shown.length));
      }
    }
    // Fewer known than counted: the unknown ones are counted.
    expect(fitList(["a"], 2, w, 20)).toEqual({ shown: ["a"], more: 1 });
    expect(nameLine(["x", "y"], 5)).toBe("`x`, `y` and 3 more");
  });
});

describe("the answer to a mistyped verb", () => {
  it("offers the whole command as meant when it is one plain line, else its start and to send the rest again", () => {
    expect(correctedCommand("confirm", " deploy_prod   4847e234 ")).toEqual({
      command: "!dag confirm deploy_prod 4847e234",
      partial: false,
    });
    expect(correctedCommand("status", "")).toEqual({ command: "!dag status", partial: false });
    for (const rest of ["\n```json\n{}\n```", " a `b` c", ` ${"x".repeat(201)}`, " a\u202eb"])
      expect(correctedCommand("publish", rest)).toEqual({ command: "!dag publish", partial: true });
    const parsed = parseCommand({ body: "!dag pubish\n```json\n{}\n```" });
    expect(parsed.kind === "error" && parsed.error.corrected).toEqual({
      command: "!dag publish",
      partial: true,
    });
    const partial = renderOutcome({
      kind: "command-error",
      message: 'unknown command "pubish"',
      helpLine: "",
      corrected: { command: "!dag publish", partial: true },
    });
    expect(partial?.body).toBe(
      '⚠️ unknown command "pubish"\nDid you mean `!dag publish`? Send it again with the rest of your message.',
    );
  });

  it("escapes what was typed in the HTML of the correction", () => {
    const parsed = parseCommand({ body: "!dag stauts <b>x</b>" });
    expect(parsed.kind).toBe("error");
    if (parsed.kind !== "error") return;
    const out = renderOutcome({
      kind: "command-error",
      message: parsed.error.message,
      helpLine: parsed.error.helpLine,
      ...(parsed.error.corrected === undefined ? {} : { corrected: parsed.error.corrected }),
    });
    expect(out?.html).toContain("<code>!dag status &lt;b&gt;x&lt;/b&gt;</code>");
    expect(out?.html).not.toContain("<b>x</b>");
  });
});
