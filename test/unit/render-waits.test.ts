// Why tasks wait, as chat shows it: a line per reason on the status card, the reason on each task
// line of `!dag status`, names as code, and a card edit when only a reason changed.
import { describe, expect, it } from "vitest";
import type { Outcome } from "../../src/app/commands/outcome.js";
import { renderOutcome } from "../../src/app/render/reply.js";
import { cardVersion } from "../../src/app/render/messages.js";
import { renderStatusCard, runView } from "../../src/app/render/status-card.js";
import type { TaskStatus } from "../../src/domain/model.js";
import type { WaitReason } from "../../src/domain/wait-reasons.js";
import { explainWaits } from "../../src/domain/wait-reasons.js";
import type { RunRecord, TaskRecord } from "../../src/ports/store.js";
import { taskFixture } from "../support/task-record.js";

const T0 = Date.UTC(2024, 4, 1, 12, 0, 0);

const run: RunRecord = {
  runId: "run-1",
  roomId: "!room:test",
  dagId: "ship",
  hash: "h",
  status: "running",
  description: null,
  maxParallel: null,
  publisher: "@alice:test",
  publishEventId: "$publish",
  confirmedBy: "@bob:test",
  confirmDeadline: null,
  createdAt: T0,
  updatedAt: T0,
  dag: { id: "ship", description: null, maxParallel: null, tasks: [] },
};

function task(taskId: string, status: TaskStatus, extra: Partial<TaskRecord> = {}): TaskRecord {
  return taskFixture({ taskId, status, action: "deploy", ...extra });
}

const tasks = [
  task("eu", "queued"),
  task("us", "queued"),
  task("upload", "blocked", { action: "echo", concurrencyKey: "s3" }),
  task("notify", "blocked", { action: "echo", needs: ["eu"] }),
];
const noNode: WaitReason = { kind: "no-node", action: "deploy", labels: [], node: null };
const waits = new Map<string, WaitReason>([
  ["eu", noNode],
  ["us", noNode],
  ["upload", { kind: "concurrency-key", key: "s3", holder: { dagId: "backup.2", taskId: "sync" } }],
  ["notify", { kind: "needs", tasks: ["eu"] }],
]);

describe("wait reasons in chat", () => {
  it("the card says, per reason, how many tasks wait and for what, with names as code; needs are left to the edges", () => {
    const card = renderStatusCard(run, tasks, T0, 16, waits);
    expect(card.body).toContain("⏳ 2 tasks wait (`eu`, `us`): no live node offers action `deploy`");
    expect(card.body).toContain("⏳ 1 task waits (`upload`): concurrency key `s3` held by `backup.2/sync`");
    expect(card.body).not.toContain("needs `eu`");
    expect(card.html).toContain(
      "⏳ 2 tasks wait (<code>eu</code>, <code>us</code>): no live node offers action <code>deploy</code>",
    );
  });

  it("a card without reasons (an old leader, a run that does not wait) has no such line", () => {
    expect(renderStatusCard(run, tasks, T0, 16).body).not.toContain("⏳");
  });

  it("`!dag status` puts the reason on each waiting task's line", () => {
    const view = runView(run, tasks, T0, 16, waits);
    const outcome: Outcome = { kind: "status", ...view, roomCap: 16 };
    const body = renderOutcome(outcome)!.body;
    expect(body).toContain("`eu` — queued · no live node offers action `deploy`");
    expect(body).toContain("`notify` — waiting · needs `eu`");
    expect(body).toContain("`upload` — waiting · concurrency key `s3` held by `backup.2/sync`");
  });

  it("a changed reason is a new card version, so the card is edited though no task moved", () => {
    const freed = new Map(waits);
    freed.set("eu", { kind: "nodes-busy", nodes: 1 });
    expect(cardVersion(run, tasks, 16, waits)).not.toBe(cardVersion(run, tasks, 16, freed));
    expect(cardVersion(run, tasks, 16, waits)).toBe(cardVersion(run, tasks, 16, new Map(waits)));
  });
});

describe("an open approval gate in chat", () => {
  it("the card names the open gate and who is awaited, with who approved so far", () => {
    const gate = {
      who: "operators" as const,
      approvers: 2,
      publisherMayApprove: false,
      timeoutMs: null,
      onTimeout: "fail" as const,
      description: null,
      form: {},
    };
    const state = {
      openedAt: T0,
      deadline: null,
      approvals: [{ by: "@ann:example.org", face: "chat" as const, at: T0, values: {} }],
      values: {},
      decision: null,
    };
    const gated = [
      task("build", "succeeded"),
      task("ok", "blocked", { action: "approve", needs: ["build"], gate, gateState: state }),
    ];
    const reasons = explainWaits({
      runStatus: "running",
      maxParallel: null,
      tasks: gated,
      roomCap: 16,
      roomActive: 0,
      keysHeld: [],
      nodes: [],
      now: T0,
    });
    expect(reasons.get("ok")).toEqual({
      kind: "approval",
      who: "the room's operators",
      approvedBy: ["@ann:example.org"],
      approvers: 2,
    });
    const card = renderStatusCard(run, gated, T0, 16, reasons);
    expect(card.body).toContain(
      "⏳ 1 task waits (`ok`): awaits approval by the room's operators (1 of 2: `@ann:example.org`)",
    );
    // Decided: no longer awaited.
    const decided = {
      ...state,
      decision: { kind: "approved" as const, by: "@bo:x", face: "chat" as const, at: T0, reason: null },
    };
    const after = explainWaits({
      runStatus: "running",
      maxParallel: null,
      tasks: [gated[0]!, { ...gated[1]!, gateState: decided }],
      roomCap: 16,
      roomActive: 0,
      keysHeld: [],
      nodes: [],
      now: T0,
    });
    expect(after.has("ok")).toBe(false);
  });
});
