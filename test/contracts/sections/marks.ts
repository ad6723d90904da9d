/**
 * Store contract: an operator's mark of a task (src/domain/task-mark.ts, ops/mark-task.ts). A failed
 * task marked succeeded lets its skipped dependents be decided again and the run end succeeded; a
 * waiting task marked skipped skips what needs it; a running task, a task that succeeded and a task
 * of a run that ended are refused with nothing changed but the command's inbox row; a leader whose
 * lease lapsed changes nothing at all. Each mark is one fenced transaction with its inbox row.
 */
import { expect, it } from "vitest";
import type { MarkInput } from "../../../src/domain/task-mark.js";
import { ConflictError } from "../../../src/ports/errors.js";
import type { LeaderFence, Store } from "../../../src/ports/store.js";
import {
  becomeLeader,
  cmd,
  dag,
  failed,
  LEASE_TTL_MS,
  offer,
  ok,
  publishRunning,
  session,
  task,
} from "../../support/store-fixtures.js";
import type { ContractContext } from "../context.js";

const marked = (to: MarkInput["to"], reason: string | null = "flaky runner"): MarkInput => ({
  to,
  by: "local:ops",
  face: "cli",
  reason,
});

export function marksSection(ctx: ContractContext): void {
  /** build → test → deploy, and a parallel `side` that keeps the run running. */
  const setup = async () => {
    const store = await ctx.store();
    const room = ctx.uid("!marks");
    const fence = await becomeLeader(store, room);
    const d = dag(ctx.uid("rel"), [
      task("build"),
      task("test", { needs: ["build"] }),
      task("deploy", { needs: ["test"] }),
      task("side"),
    ]);
    const run = await publishRunning(store, fence, d);
    return { store, room, fence, run };
  };
  const inboxRow = async (store: Store, roomId: string): Promise<string> => {
    const eventId = ctx.uid("$mark");
    await store.insertInboxEvent({
      eventId,
      roomId,
      sender: "local:ops",
      originServerTs: 1,
      content: {},
      seenBy: "n",
    });
    return eventId;
  };
  const statuses = async (store: Store, runId: string): Promise<Record<string, string>> =>
    Object.fromEntries((await store.listTasks(runId)).map((t) => [t.taskId, t.status]));
  /** Claim the room's next queued task, which must be `id`, and finish it. */
  const claimAndFinish = async (store: Store, room: string, id: string, result = ok): Promise<void> => {
    const claimed = await store.claimTask(offer(session("worker"), [room]));
    expect(claimed?.task.taskId).toBe(id);
    await store.finishTask(claimed!.token, result);
  };
  /** build failed; the scheduler skipped test and deploy; side still queued. */
  const failedBuild = async () => {
    const s = await setup();
    await claimAndFinish(s.store, s.room, "build", failed);
    await s.store.scheduleStep(s.fence);
    expect(await statuses(s.store, s.run.runId)).toEqual({
      build: "failed",
      test: "skipped",
      deploy: "skipped",
      side: "queued",
    });
    return s;
  };
  /** The run's tasks and the room's log but for the inbox's own lines (a handled row logs one). */
  const snapshot = async (store: Store, room: string, runId: string) => ({
    tasks: await store.listTasks(runId),
    events: (await store.readEvents(room, 0)).filter((e) => !e.kind.startsWith("inbox.")),
  });

  it("a failed task marked succeeded: its dependents run again, the run ends succeeded, the mark is logged and kept", async () => {
    const { store, room, fence, run } = await failedBuild();
    const row = await inboxRow(store, room);
    const result = await store.markTask(cmd(fence, row), room, run.dagId, "build", marked("succeeded"));
    expect(result.verdict).toEqual({
      kind: "marked",
      from: "failed",
      to: "succeeded",
      revive: ["test", "deploy"],
    });
    expect(result.task.status).toBe("succeeded");
    expect(result.task.error).toMatch(/^marked succeeded by local:ops \(cli \d\d:\d\d UTC\): flaky runner$/);
    expect(await statuses(store, run.runId)).toEqual({
      build: "succeeded",
      test: "blocked",
      deploy: "blocked",
      side: "queued",
    });
    const handled = await store.getInboxEvent(row);
    expect(handled?.status).toBe("handled");
    // The row keeps the command's answer to what the store returned (store-fixtures.ts, answered).
    expect(handled?.result).toMatchObject({
      answered: {
        verdict: { kind: "marked", revive: ["test", "deploy"] },
        task: { taskId: "build", status: "succeeded" },
      },
    });
    const lines = (await store.readEvents(room, 0)).filter((e) => e.data["by"] === "local:ops");
    expect(lines.map((e) => [e.kind, e.taskId])).toEqual([
      ["task.succeeded", "build"],
      ["task.blocked", "test"],
      ["task.blocked", "deploy"],
    ]);
    expect(lines[0]!.data).toMatchObject({ mark: true, from: "failed", face: "cli", reason: "flaky runner" });
    expect(lines.every((e) => e.term === fence.term)).toBe(true);
    // The scheduler queues what the mark let go on; the run then ends succeeded.
    await store.scheduleStep(fence);
    expect((await statuses(store, run.runId))["test"]).toBe("queued");
    await claimAndFinish(store, room, "test");
    await claimAndFinish(store, room, "side");
    await store.scheduleStep(fence);
    await claimAndFinish(store, room, "deploy");
    expect((await store.deriveRunOutcomes(fence)).map((o) => o.to)).toEqual(["succeeded"]);
  });

  it("a waiting task marked skipped skips what needs it, as any skipped need does", async () => {
    const { store, room, fence, run } = await setup();
    const result = await store.markTask(cmd(fence), room, run.dagId, "test", marked("skipped", null));
    expect(result.verdict).toEqual({ kind: "marked", from: "blocked", to: "skipped", revive: [] });
    await store.scheduleStep(fence);
    expect(await statuses(store, run.runId)).toMatchObject({ test: "skipped", deploy: "skipped" });
    // A queued task marked succeeded leaves the queue: no worker gets it.
    const queued = await store.markTask(cmd(fence), room, run.dagId, "side", marked("succeeded"));
    expect(queued.verdict).toMatchObject({ kind: "marked", from: "queued" });
    await claimAndFinish(store, room, "build");
    expect(await store.claimTask(offer(session("w2"), [room]))).toBeNull();
    expect((await store.deriveRunOutcomes(fence)).map((o) => o.to)).toEqual(["succeeded"]);
  });

  const refusedLeavesAll = async (
    s: { store: Store; room: string; fence: LeaderFence; run: { runId: string; dagId: string } },
    taskId: string,
    input: MarkInput,
    kind: string,
  ): Promise<void> => {
    const row = await inboxRow(s.store, s.room);
    const before = await snapshot(s.store, s.room, s.run.runId);
    const result = await s.store.markTask(cmd(s.fence, row), s.room, s.run.dagId, taskId, input);
    expect(result.verdict.kind).toBe(kind);
    expect(await snapshot(s.store, s.room, s.run.runId)).toEqual(before);
    // The command is answered once: its row holds the refusal.
    expect((await s.store.getInboxEvent(row))?.result).toMatchObject({
      answered: { verdict: { kind }, task: { taskId } },
    });
  };

  it("refuses a running task, a task that succeeded, and any task of a run that ended, changing nothing", async () => {
    const s = await setup();
    const claimed = await s.store.claimTask(offer(session("worker"), [s.room]));
    expect(claimed?.task.taskId).toBe("build");
    await refusedLeavesAll(s, "build", marked("succeeded"), "running");
    await s.store.finishTask(claimed!.token, ok);
    await refusedLeavesAll(s, "build", marked("skipped"), "wrong-status");
    // The run ends failed: nothing of it may be marked any more.
    const f = await failedBuild();
    const side = await f.store.claimTask(offer(session("worker"), [f.room]));
    await f.store.finishTask(side!.token, ok);
    expect((await f.store.deriveRunOutcomes(f.fence)).map((o) => o.to)).toEqual(["failed"]);
    await refusedLeavesAll(f, "build", marked("succeeded"), "run-not-running");
  });

  it("a mark by a leader whose lease lapsed is refused and leaves the tasks, the log and its inbox row as they were", async () => {
    const { store, room, fence, run } = await failedBuild();
    const row = await inboxRow(store, room);
    const before = await snapshot(store, room, run.runId);
    ctx.clock.advance(LEASE_TTL_MS);
    const refused = await store.markTask(cmd(fence, row), room, run.dagId, "build", marked("succeeded")).then(
      () => null,
      (e: unknown) => e,
    );
    expect(refused).toBeInstanceOf(ConflictError);
    expect(await snapshot(store, room, run.runId)).toEqual(before);
    expect((await store.getInboxEvent(row))?.status).toBe("new");
    // The next leader's mark goes through.
    const next = await becomeLeader(store, room, "leader2");
    const result = await store.markTask(cmd(next, row), room, run.dagId, "build", marked("succeeded"));
    expect(result.verdict.kind).toBe("marked");
  });
}
