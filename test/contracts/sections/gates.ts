/**
 * Store contract: approval gates (src/domain/gates.ts). The scheduler opens a gate whose needs
 * succeeded (it stays blocked, is never claimable, holds no slot); approvals by distinct people
 * count once each and the Nth with every form field filled makes the gate succeed with the form's
 * values kept; a deny fails it and skips what needs it while a parallel branch goes on; the reaper
 * times an open gate out (timed_out or skipped, as declared). Every decision is one fenced
 * transaction with its inbox row: a duplicate of the row changes nothing.
 */
import { expect, it } from "vitest";
import type { GateDecisionInput, GateSpec } from "../../../src/domain/gates.js";
import { ConflictError } from "../../../src/ports/errors.js";
import type { Store } from "../../../src/ports/store.js";
import {
  becomeLeader,
  cmd,
  dag,
  LEASE_TTL_MS,
  offer,
  publishRunning,
  session,
  task,
} from "../../support/store-fixtures.js";
import type { ContractContext } from "../context.js";

const GATE: GateSpec = {
  who: "operators",
  approvers: 2,
  publisherMayApprove: false,
  timeoutMs: 60_000,
  onTimeout: "fail",
  description: "roll out",
  form: { ticket: "^[A-Z]+-[0-9]+$" },
};

const approve = (by: string, values: Record<string, string> = {}): GateDecisionInput => ({
  decision: "approve",
  by,
  face: "cli",
  values,
  reason: null,
});

export function gatesSection(ctx: ContractContext): void {
  const setup = async (gate: Partial<GateSpec> = {}) => {
    const store = await ctx.store();
    const room = ctx.uid("!gates");
    const fence = await becomeLeader(store, room);
    // build → ok (gate) → deploy, and a parallel branch side.
    const d = dag(ctx.uid("rel"), [
      task("build"),
      task("ok", { action: "approve", needs: ["build"], gate: { ...GATE, ...gate }, outputs: GATE.form }),
      task("deploy", { needs: ["ok"] }),
      task("side"),
    ]);
    const run = await publishRunning(store, fence, d);
    return { store, room, fence, run, d };
  };
  const inboxRow = async (store: Store, roomId: string): Promise<string> => {
    const eventId = ctx.uid("$gate");
    await store.insertInboxEvent({
      eventId,
      roomId,
      sender: "local:a",
      originServerTs: 1,
      content: {},
      seenBy: "n",
    });
    return eventId;
  };
  const statuses = async (store: Store, runId: string): Promise<Record<string, string>> =>
    Object.fromEntries((await store.listTasks(runId)).map((t) => [t.taskId, t.status]));
  /** Claim and finish the room's queued tasks named, as a worker would. */
  const finish = async (store: Store, room: string, ids: string[]): Promise<void> => {
    const me = session("worker");
    for (let i = 0; i < ids.length; i++) {
      const claimed = await store.claimTask(offer(me, [room]));
      expect(claimed, `claim ${i}`).not.toBeNull();
      expect(ids).toContain(claimed!.task.taskId);
      await store.finishTask(claimed!.token, { outcome: "succeeded", exitCode: 0, output: "", error: null });
    }
  };

  it("opens a gate once its needs succeeded: blocked, never claimable, with its deadline and an event", async () => {
    const { store, room, fence, run } = await setup();
    expect(await statuses(store, run.runId)).toEqual({
      build: "queued",
      ok: "blocked",
      deploy: "blocked",
      side: "queued",
    });
    expect((await store.getTask(run.runId, "ok"))!.gateState).toBeNull();
    // Not open yet: nothing to decide.
    const early = await store.decideGate(cmd(fence), room, run.dagId, "ok", approve("local:a"));
    expect(early.verdict.kind).toBe("not-open");
    await finish(store, room, ["build", "side"]);
    const opened = await store.scheduleStep(fence);
    expect(opened.opened).toBe(1);
    expect(opened.queued).toBe(0);
    const gate = (await store.getTask(run.runId, "ok"))!;
    expect(gate.status).toBe("blocked");
    expect(gate.gate).toEqual(GATE);
    expect(gate.gateState).toMatchObject({ approvals: [], values: {}, decision: null });
    expect(gate.deadline).toBe(gate.gateState!.openedAt + 60_000);
    // Opened once: a second step does not open it again.
    expect((await store.scheduleStep(fence)).opened ?? 0).toBe(0);
    expect(await store.claimTask(offer(session("w2"), [room]))).toBeNull();
    const kinds = (await store.readEvents(room, 0)).map((e) => e.kind).filter((k) => k.startsWith("gate."));
    expect(kinds).toEqual(["gate.opened"]);
  });

  it("a decision by a leader whose lease lapsed is refused and leaves the gate and its inbox row as they were", async () => {
    const { store, room, fence, run } = await setup();
    await finish(store, room, ["build", "side"]);
    await store.scheduleStep(fence);
    const before = (await store.getTask(run.runId, "ok"))!;
    const row = await inboxRow(store, room);
    const eventsBefore = await store.readEvents(room, 0);
    ctx.clock.advance(LEASE_TTL_MS);
    const refused = await store
      .decideGate(cmd(fence, row), room, run.dagId, "ok", approve("local:a", { ticket: "OPS-7" }))
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect(refused).toBeInstanceOf(ConflictError);
    expect((refused as ConflictError).found).toMatchObject({ term: fence.term });
    expect(await store.getTask(run.runId, "ok")).toEqual(before);
    expect((await store.getInboxEvent(row))?.status).toBe("new");
    expect(await store.readEvents(room, 0)).toEqual(eventsBefore);
  });

  it("counts distinct approvers once each, keeps the form's values, and passes at the Nth", async () => {
    const { store, room, fence, run } = await setup();
    await finish(store, room, ["build", "side"]);
    await store.scheduleStep(fence);
    const row1 = await inboxRow(store, room);
    const first = await store.decideGate(
      cmd(fence, row1),
      room,
      run.dagId,
      "ok",
      approve("local:a", { ticket: "OPS-7" }),
    );
    expect(first.verdict).toMatchObject({ kind: "recorded", missing: 1 });
    expect((await store.getInboxEvent(row1))!.result).toMatchObject({
      answered: { verdict: { kind: "recorded", missing: 1 }, task: { taskId: "ok" } },
    });
    // The same inbox row again (a duplicate delivery, a replay): refused, nothing changes.
    await expect(
      store.decideGate(cmd(fence, row1), room, run.dagId, "ok", approve("local:a", { ticket: "OPS-7" })),
    ).rejects.toThrow();
    expect((await store.getTask(run.runId, "ok"))!.gateState!.approvals).toHaveLength(1);
    // The same person again, by another command: already counted.
    const again = await store.decideGate(cmd(fence), room, run.dagId, "ok", approve("local:a"));
    expect(again.verdict.kind).toBe("already");
    // The CLI and an HTTP token are one principal, the local operator: one approver, not two.
    const token = await store.decideGate(cmd(fence), room, run.dagId, "ok", approve("http:b"));
    expect(token.verdict.kind).toBe("already");
    const second = await store.decideGate(cmd(fence), room, run.dagId, "ok", {
      ...approve("@b:x"),
      face: "chat",
    });
    expect(second.verdict.kind).toBe("approved");
    const gate = (await store.getTask(run.runId, "ok"))!;
    expect(gate.status).toBe("succeeded");
    expect(gate.deadline).toBeNull();
    expect(gate.finishedAt).not.toBeNull();
    expect(gate.gateState!.values).toEqual({ ticket: "OPS-7" });
    // The form's values are the gate's outputs, what its dependents read.
    expect(gate.outputValues).toEqual({ ticket: "OPS-7" });
    expect(gate.gateState!.approvals.map((a) => [a.by, a.face])).toEqual([
      ["local:a", "cli"],
      ["@b:x", "chat"],
    ]);
    const late = await store.decideGate(cmd(fence), room, run.dagId, "ok", {
      ...approve("local:c"),
      decision: "deny",
    });
    expect(late.verdict.kind).toBe("closed");
    await store.scheduleStep(fence);
    expect(await statuses(store, run.runId)).toMatchObject({ ok: "succeeded", deploy: "queued" });
    const events = (await store.readEvents(room, 0)).filter((e) => e.kind.startsWith("gate."));
    expect(events.map((e) => [e.kind, e.data["by"] ?? null])).toEqual([
      ["gate.opened", null],
      ["gate.approval", "local:a"],
      ["gate.approval", "@b:x"],
      ["gate.approved", "@b:x"],
    ]);
    expect(events[1]!.data["values"]).toEqual({ ticket: "OPS-7" });
    expect(events.every((e) => e.term === fence.term)).toBe(true);
  });

  it("a deny fails the gate and skips what needs it, while a parallel branch finishes", async () => {
    const { store, room, fence, run } = await setup();
    await finish(store, room, ["build"]);
    await store.scheduleStep(fence);
    const denied = await store.decideGate(cmd(fence), room, run.dagId, "ok", {
      decision: "deny",
      by: "local:a",
      face: "cli",
      values: {},
      reason: "not today",
    });
    expect(denied.verdict.kind).toBe("denied");
    await store.scheduleStep(fence);
    expect(await statuses(store, run.runId)).toEqual({
      build: "succeeded",
      ok: "failed",
      deploy: "skipped",
      side: "queued",
    });
    expect((await store.getTask(run.runId, "ok"))!.error).toBe("denied by local:a: not today");
    expect(await store.deriveRunOutcomes(fence)).toEqual([]);
    await finish(store, room, ["side"]);
    const outcomes = await store.deriveRunOutcomes(fence);
    expect(outcomes.map((o) => o.to)).toEqual(["failed"]);
  });

  it.each([
    ["fail", "timed_out", "failed"],
    ["skip", "skipped", "succeeded"],
  ] as const)("times an open gate out (on_timeout %s → %s; the run %s)", async (onTimeout, to, runTo) => {
    const { store, room, fence, run } = await setup({ timeoutMs: 5_000, onTimeout });
    await finish(store, room, ["build", "side"]);
    await store.scheduleStep(fence);
    ctx.clock.advance(4_000);
    await store.reap(fence);
    expect((await store.getTask(run.runId, "ok"))!.status).toBe("blocked");
    ctx.clock.advance(2_000);
    await store.reap(fence);
    await store.scheduleStep(fence);
    expect(await statuses(store, run.runId)).toMatchObject({ ok: to, deploy: "skipped" });
    const gate = (await store.getTask(run.runId, "ok"))!;
    expect(gate.gateState!.decision).toMatchObject({ kind: "timed_out", by: null });
    const late = await store.decideGate(
      cmd(fence),
      room,
      run.dagId,
      "ok",
      approve("local:a", { ticket: "A-1" }),
    );
    expect(late.verdict.kind).toBe("closed");
    const kinds = (await store.readEvents(room, 0)).map((e) => e.kind).filter((k) => k.startsWith("gate."));
    expect(kinds).toEqual(["gate.opened", "gate.timed_out"]);
    expect((await store.deriveRunOutcomes(fence)).map((o) => o.to)).toEqual([runTo]);
  });

  it("an approval applied at or after the deadline does not pass the gate, though the reaper has not come yet", async () => {
    const { store, room, fence, run } = await setup({ timeoutMs: 5_000, approvers: 1 });
    await finish(store, room, ["build", "side"]);
    await store.scheduleStep(fence);
    // The leader handles its inbox before it reaps: the store's clock is past the deadline.
    ctx.clock.advance(5_000);
    const row = await inboxRow(store, room);
    const late = await store.decideGate(
      cmd(fence, row),
      room,
      run.dagId,
      "ok",
      approve("local:a", { ticket: "OPS-1" }),
    );
    expect(late.verdict).toMatchObject({
      kind: "closed",
      message: expect.stringContaining("deadline passed"),
    });
    const gate = (await store.getTask(run.runId, "ok"))!;
    expect(gate.status).toBe("blocked");
    expect(gate.gateState).toMatchObject({ approvals: [], decision: null });
    expect(gate.outputValues).toBeNull();
    expect((await store.getInboxEvent(row))?.result).toMatchObject({
      answered: { verdict: { kind: "closed" } },
    });
    // The reaper then times it out, and what needs it never runs.
    await store.reap(fence);
    await store.scheduleStep(fence);
    expect(await statuses(store, run.runId)).toMatchObject({ ok: "timed_out", deploy: "skipped" });
    const kinds = (await store.readEvents(room, 0)).map((e) => e.kind).filter((k) => k.startsWith("gate."));
    expect(kinds).toEqual(["gate.opened", "gate.timed_out"]);
  });

  it("refuses the last approval while the form has an empty field, and another value for a given field", async () => {
    const { store, room, fence, run } = await setup();
    await finish(store, room, ["build", "side"]);
    await store.scheduleStep(fence);
    expect((await store.decideGate(cmd(fence), room, run.dagId, "ok", approve("local:a"))).verdict.kind).toBe(
      "recorded",
    );
    const empty = await store.decideGate(cmd(fence), room, run.dagId, "ok", approve("@b:x"));
    expect(empty.verdict).toMatchObject({ kind: "form", message: expect.stringContaining("ticket=…") });
    expect((await store.getTask(run.runId, "ok"))!.gateState!.approvals).toHaveLength(1);
    expect(
      (await store.decideGate(cmd(fence), room, run.dagId, "ok", approve("@b:x", { ticket: "X-1" }))).verdict
        .kind,
    ).toBe("approved");
  });
}
