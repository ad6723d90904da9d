/** A run with a matrix task on its faces: the card, the `!dag status` reply and the picture group its instances. */
import { describe, expect, it } from "vitest";
import { cardMessage } from "../../src/app/render/messages.js";
import { renderStatusCard } from "../../src/app/render/status-card.js";
import { parseDag } from "../../src/domain/dag.js";
import { buildRunGraph } from "../../src/domain/run-graph.js";
import { renderSummary } from "../../src/cli/progress.js";
import type { TaskStatus } from "../../src/domain/model.js";
import type { RunRecord, TaskRecord } from "../../src/ports/store.js";
import { taskFixture } from "../support/task-record.js";

const T0 = Date.UTC(2024, 4, 1, 12, 0, 0);

const parsed = parseDag(
  `id = "rollout"
[[tasks]]
id = "build"
action = "echo"
[[tasks]]
id = "deploy"
action = "echo"
needs = ["build"]
matrix = { region = ["eu", "us"], tier = ["web", "db", "cache"] }
args = { message = "{matrix.region}" }
`,
  "toml",
);
if (!parsed.ok) throw new Error("the matrix DAG must parse");
const dag = parsed.dag;

function run(extra: Partial<RunRecord> = {}): RunRecord {
  return {
    runId: "run-1",
    roomId: "!room:test",
    dagId: "rollout",
    hash: parsed.ok ? parsed.hash : "h",
    status: "running",
    description: null,
    maxParallel: null,
    publisher: "@alice:test",
    publishEventId: "$publish",
    confirmedBy: "@alice:test",
    confirmDeadline: null,
    createdAt: T0,
    updatedAt: T0,
    dag,
    ...extra,
  };
}

const STATES: TaskStatus[] = ["succeeded", "succeeded", "failed", "succeeded", "running", "succeeded"];

function tasks(): TaskRecord[] {
  const instances = dag.tasks.slice(1);
  return [
    taskFixture({ taskId: "build", status: "succeeded", startedAt: T0, finishedAt: T0 + 1_000 }),
    ...instances.map((t, i) =>
      taskFixture({
        taskId: t.id,
        status: STATES[i]!,
        startedAt: T0 + 1_000,
        finishedAt: STATES[i] === "running" ? null : T0 + 3_000,
        ...(STATES[i] === "failed" ? { exitCode: 1 } : {}),
      }),
    ),
  ];
}

describe("a matrix task on the status card", () => {
  it("is one line counting its instances by state, with the instances that need eyes listed", () => {
    const card = renderStatusCard(run(), tasks(), T0 + 8_000);
    const lines = card.body.split("\n");
    expect(lines).toContain("`deploy` × 6: 4 ✅ 1 ❌ 1 🔄");
    expect(card.html).toContain("<code>deploy</code> × 6: 4 ✅ 1 ❌ 1 🔄");
    // The progress line still counts every task, the build too.
    expect(card.body).toContain("5/7 succeeded · 1 failed · 1 running");
    expect(lines.some((l) => l.startsWith("❌ `deploy[region=eu,tier=cache]`"))).toBe(true);
    expect(lines.some((l) => l.startsWith("🔄 `deploy[region=us,tier=db]`"))).toBe(true);
  });

  it("is the same line in the message the bot sends", () => {
    const message = cardMessage(run(), tasks(), T0 + 8_000);
    expect(String(message.content["body"])).toContain("`deploy` × 6: 4 ✅ 1 ❌ 1 🔄");
  });

  it("says nothing of groups for a run without a matrix", () => {
    const plain = tasks().map((t) => ({ ...t, taskId: t.taskId.replace(/\[.*\]$/, `_${t.version}`) }));
    expect(renderStatusCard(run(), plain, T0 + 8_000).body).not.toContain(" × ");
  });
});

describe("a matrix task in the picture of a run", () => {
  const input = (states: readonly TaskStatus[]) =>
    buildRunGraph({
      dagId: "rollout",
      runLabel: "12345678",
      runStatusWord: "running",
      tasks: dag.tasks.map((t, i) => ({
        id: t.id,
        action: t.action,
        needs: t.needs,
        status: i === 0 ? "succeeded" : states[i - 1]!,
      })),
    });

  it("is one box named after the task, edged from what it needs, however few its instances", () => {
    const graph = input(["succeeded", "succeeded", "succeeded", "succeeded", "queued", "queued"]);
    expect(graph.boxes.map((b) => [b.kind, b.caption, b.taskIds.length])).toEqual([
      ["task", "echo", 1],
      ["group", "deploy × 6", 6],
    ]);
    expect(graph.boxes[1]!.counts).toMatchObject({ succeeded: 4, queued: 2 });
    expect(graph.edges).toEqual([[graph.boxes[0]!.key, graph.boxes[1]!.key]]);
  });

  it("keeps an instance that failed in sight beside the box, which says how many it holds", () => {
    const graph = input(STATES);
    expect(graph.boxes.map((b) => [b.kind, b.caption, b.taskIds])).toEqual([
      ["task", "echo", ["build"]],
      [
        "group",
        "deploy × 6 (4 here)",
        [
          "deploy[region=eu,tier=web]",
          "deploy[region=eu,tier=db]",
          "deploy[region=us,tier=web]",
          "deploy[region=us,tier=cache]",
        ],
      ],
      ["task", "echo", ["deploy[region=eu,tier=cache]"]],
      ["task", "echo", ["deploy[region=us,tier=db]"]],
    ]);
  });
});

describe("a matrix task in the CLI's table of a run", () => {
  it("is one line of words after the instances' own lines", () => {
    const lines = renderSummary(run(), tasks(), T0 + 8_000)
      .trimEnd()
      .split("\n");
    expect(lines.at(-2)).toBe("deploy × 6: 4 succeeded, 1 failed, 1 running");
    expect(lines.filter((l) => l.startsWith("  deploy["))).toHaveLength(6);
  });
});
