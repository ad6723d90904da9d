import { describe, expect, it } from "vitest";
import { createProgress, pickVisible, renderSummary } from "../../src/cli/progress.js";
import type { TaskStatus } from "../../src/domain/model.js";
import type { RunRecord, TaskRecord } from "../../src/ports/store.js";
import { Terminal } from "../support/terminal.js";

const run = (status: RunRecord["status"]): RunRecord =>
  ({ runId: "r1", roomId: "local", dagId: "demo", status, createdAt: 1_000, updatedAt: 4_500 }) as RunRecord;

const task = (taskId: string, status: TaskStatus, extra: Partial<TaskRecord> = {}): TaskRecord =>
  ({
    runId: "r1",
    taskId,
    status,
    attempt: 1,
    maxAttempts: 1,
    executor: status === "blocked" || status === "queued" ? null : { nodeId: "n1", bootId: "b" },
    startedAt: status === "blocked" || status === "queued" ? null : 2_000,
    finishedAt: ["succeeded", "failed"].includes(status) ? 3_500 : null,
    exitCode: status === "failed" ? 2 : null,
    error: status === "failed" ? "exited with status 2" : null,
    ...extra,
  }) as TaskRecord;

function sink(isTTY: boolean) {
  const chunks: string[] = [];
  return { out: { isTTY, rows: 10, columns: 80, write: (t: string) => chunks.push(t) }, chunks };
}

describe("progress", () => {
  it("prints one plain line per task change, skipping tasks still blocked at the start", () => {
    const { out, chunks } = sink(false);
    const view = createProgress(out);
    view.update(run("running"), [task("a", "running"), task("b", "blocked")], 2_500);
    view.update(run("running"), [task("a", "running"), task("b", "blocked")], 2_600);
    view.update(run("running"), [task("a", "succeeded"), task("b", "queued")], 3_600);
    const text = chunks.join("");
    expect(text.match(/task a running/g)).toHaveLength(1);
    expect(text).toContain("task a succeeded (1.5s, on n1)");
    expect(text).toContain("task b queued");
    expect(text).not.toContain("task b blocked");
    expect(text).not.toContain("\x1b[");
  });

  it("says the run's end after its last task's line, and its start before its first", () => {
    const { out, chunks } = sink(false);
    const view = createProgress(out);
    view.update(run("running"), [task("a", "running")], 2_500);
    // The read that sees the run ended also sees its last task's end, for the first time.
    view.finish(run("succeeded"), [task("a", "succeeded")], 3_600);
    const lines = chunks.join("").trimEnd().split("\n");
    expect(lines.map((l) => l.slice(9))).toEqual([
      "run demo running",
      "task a running (500ms, on n1)",
      "task a succeeded (1.5s, on n1)",
      "run demo succeeded",
    ]);
  });

  it("redraws the list in place on a terminal", () => {
    const { out, chunks } = sink(true);
    const view = createProgress(out);
    view.update(run("running"), [task("a", "running"), task("b", "blocked")], 2_500);
    view.update(run("running"), [task("a", "succeeded"), task("b", "running")], 3_600);
    expect(chunks[0]?.startsWith("\x1b[0J")).toBe(true);
    // Three lines drawn (header + two tasks): the next frame moves up three lines first.
    expect(chunks[1]?.startsWith("\x1b[3F\x1b[0J")).toBe(true);
    expect(chunks[1]).toContain("run demo running — 1 succeeded, 1 running");
  });

  it("keeps active and failed tasks in view when the list is taller than the terminal", () => {
    const tasks = [
      ...Array.from({ length: 20 }, (_, i) => task(`done${i}`, "succeeded")),
      task("bad", "failed"),
      task("now", "running"),
    ];
    const shown = pickVisible(tasks, 5).map((t) => t.taskId);
    expect(shown).toHaveLength(5);
    expect(shown).toContain("bad");
    expect(shown).toContain("now");
  });

  it("summarises every task with its duration, node, attempts and first error line, then the run", () => {
    const text = renderSummary(
      run("failed"),
      [task("a", "succeeded"), task("b", "failed", { attempt: 2 })],
      9_000,
    );
    expect(text).toMatch(/a\s+succeeded\s+1\.5s\s+n1/);
    // One way to say an exit status, as in chat: "exit 2", not also "exited with status 2".
    expect(text).toMatch(/b\s+failed\s+1\.5s\s+n1\s+attempts 2\s+exit 2\n/);
    expect(text).not.toContain("exited with status");
    // An error that says more comes after it, its first line only.
    const timedOut = renderSummary(
      run("failed"),
      [task("c", "timed_out", { exitCode: null, error: "timed out after 1s\nmore" })],
      9_000,
    );
    expect(timedOut).toMatch(/c\s+timed_out\s+.*timed out after 1s\n/);
    expect(text).toContain("run demo (r1) failed in 3.5s: 1 succeeded, 1 failed");
  });
});

describe("the live view on a terminal shorter than the DAG", () => {
  const many = (over: (i: number) => Partial<TaskRecord>): TaskRecord[] =>
    Array.from({ length: 40 }, (_, i) => task(`step_${String(i).padStart(2, "0")}`, "blocked", over(i)));
  const longRun = { ...run("running"), dagId: "nightly_warehouse_rebuild_with_a_long_name" } as RunRecord;

  for (const [rows, cols] of [
    [12, 40],
    [5, 40],
    [3, 30],
  ] as const) {
    it(`${rows} rows × ${cols} columns: frames replace each other, none reaches the scrollback`, () => {
      const earlier = Array.from({ length: rows }, (_, i) => `$ earlier output ${i}`);
      const term = new Terminal(rows, cols, earlier);
      const view = createProgress({ isTTY: true, rows, columns: cols, write: (t: string) => term.write(t) });
      for (let frame = 0; frame < 6; frame += 1) {
        const tasks = many((i) => {
          if (i < frame * 5)
            return {
              status: "succeeded",
              startedAt: 2_000,
              finishedAt: 3_000,
              executor: { nodeId: "n1", bootId: "b" },
            };
          if (i < frame * 5 + 3)
            return {
              status: i % 2 === 0 ? "running" : "timed_out",
              startedAt: 2_000,
              finishedAt: i % 2 === 0 ? null : 3_000,
              executor: { nodeId: "n1", bootId: "b" },
              // Wide characters, a tab and an escape from an action's error text.
              error: i % 2 === 0 ? null : "超时了\t终止 \x1b[31mred\x1b[0m 进程 with a long tail of text",
            };
          return {};
        });
        view.update(longRun, tasks, 4_000 + frame * 100);
      }
      // Only what was on screen before the view started scrolled away; no frame did.
      expect(term.scrollback.every((l) => l.startsWith("$ earlier output"))).toBe(true);
      const shown = term.lines();
      expect(shown.filter((l) => l.startsWith("run nightly"))).toHaveLength(1);
      expect(shown.filter((l) => l.includes("step_")).length).toBe(
        new Set(shown.filter((l) => l.includes("step_"))).size,
      );
    });
  }
});
