// Approval gates with real processes (docs/architecture.md §3, "Gate"): decided from the CLI through
// the room's inbox like every command; a leader killed while a gate is open, the decision recorded
// once; a deny skipping what needs the gate while a parallel branch finishes; timeouts (fail, skip).
import { beforeAll, describe, expect, it } from "vitest";
import type { NodeProcess } from "../support/engine-cluster.js";
import {
  allEvents,
  cli,
  createTarget,
  killAll,
  requireBuild,
  startNode,
  waitForRunStatus,
  waitForTasks,
  writeDag,
  writeNodeConfig,
} from "../support/engine-cluster.js";
import { untilNodeBeats } from "../support/store-wait.js";

beforeAll(() => {
  requireBuild();
});

const gateKinds = (events: { kind: string; runId: string | null }[], runId: string): string[] =>
  events.filter((e) => e.runId === runId && e.kind.startsWith("gate.")).map((e) => e.kind);

describe.each(["sqlite", "postgres"] as const)("an approval gate on a fleet on %s", (kind) => {
  it("a leader killed while a gate is open: the approval is recorded once, and the run goes on", async () => {
    const target = await createTarget(kind, "gates-failover");
    const nodes: NodeProcess[] = [];
    let failed = true;
    try {
      const configs = ["g1", "g2"].map((id) => writeNodeConfig(target, { nodeId: id }));
      const run = (args: string[]) =>
        cli([...args, "--config", configs[1]!], { cwd: target.dir, timeoutMs: 90_000 });
      const file = writeDag(target, {
        id: "release",
        tasks: [
          { id: "build", action: "echo", args: { message: "built" } },
          {
            id: "ok",
            needs: ["build"],
            approve: { who: "operators", description: "roll out", form: { ticket: "^[A-Z]+-[0-9]+$" } },
          },
          // The form's value is the gate's output: it reaches this task's argv.
          {
            id: "deploy",
            action: "echo",
            args: { message: "deploying {tasks.ok.outputs.ticket}" },
            needs: ["ok"],
          },
        ],
      });
      nodes.push(startNode(target, configs[0]!, "g1"));
      const store = await target.open();
      try {
        await untilNodeBeats(store);
        nodes.push(startNode(target, configs[1]!, "g2"));
        const submitted = await run(["submit", file, "--confirm"]);
        expect(submitted.code, submitted.stderr).toBe(0);
        const runRecord = (await store.getRun("local", "release"))!;
        // The gate opens once build succeeded; it waits, blocked, for a person.
        await waitForTasks(store, runRecord.runId, "the gate open", (ts) =>
          ts.some((t) => t.taskId === "ok" && t.gateState !== null),
        );
        const status = await run(["status", "release"]);
        expect(status.stdout).toContain("awaits approval by the room's operators");
        // Kill the leader while the gate is open, and approve at once: the next leader handles it.
        const lease = (await store.getLease("local"))!;
        const leader = nodes.find((n) => n.nodeId === lease.holder?.nodeId)!;
        leader.kill("SIGKILL");
        await leader.exited;
        const [first, second] = await Promise.all([
          run(["approve", "release", "ok", "ticket=OPS-42"]),
          run(["approve", "release", "ok", "ticket=OPS-42"]),
        ]);
        expect(first.code, first.stdout + first.stderr).toBe(0);
        expect(second.code, second.stdout + second.stderr).toBe(0);
        const answers = [first.stdout, second.stdout].join("\n");
        expect(answers).toMatch(/approved release\/ok with ticket=OPS-42/);
        expect(answers).toMatch(/already approved release\/ok/);
        expect(await waitForRunStatus(store, "release", (s) => s === "succeeded" || s === "failed")).toBe(
          "succeeded",
        );
        const events = await allEvents(store);
        expect(gateKinds(events, runRecord.runId)).toEqual(["gate.opened", "gate.approval", "gate.approved"]);
        const approval = events.find((e) => e.kind === "gate.approval")!;
        expect(approval.data).toMatchObject({ face: "cli", values: { ticket: "OPS-42" } });
        expect(String(approval.data["by"])).toMatch(/^local:/);
        // A leader of a later term recorded it (the killed one held the term before).
        expect(approval.term).toBeGreaterThan(lease.term);
        const shown = await run(["status", "release"]);
        expect(shown.stdout).toMatch(/ok\s+succeeded.*approved by local:\S+ \(cli \d\d:\d\d UTC\)/);
        const okDone = events.filter(
          (e) => e.runId === runRecord.runId && e.taskId === "ok" && e.kind === "task.succeeded",
        );
        expect(okDone).toHaveLength(1);
        const gate = (await store.getTask(runRecord.runId, "ok"))!;
        expect(gate.gateState!.values).toEqual({ ticket: "OPS-42" });
        expect(gate.outputValues).toEqual({ ticket: "OPS-42" });
        // What the action itself printed: echo got the approver's value as its argument.
        expect((await store.getTask(runRecord.runId, "deploy"))!.output).toBe("deploying OPS-42\n");
        failed = false;
      } finally {
        await store.close();
      }
    } finally {
      await killAll(nodes);
      await target.cleanup(failed);
    }
  }, 180_000);
});

describe("approval gates on a node", () => {
  it("a deny skips what needs the gate while a parallel branch finishes; timeouts fail or skip", async () => {
    const target = await createTarget("sqlite", "gates-deny");
    const nodes: NodeProcess[] = [];
    let failed = true;
    try {
      const config = writeNodeConfig(target, { nodeId: "solo" });
      const run = (args: string[]) =>
        cli([...args, "--config", config], { cwd: target.dir, timeoutMs: 90_000 });
      const denied = writeDag(target, {
        id: "denied",
        tasks: [
          { id: "ok", approve: { approvers: 1 } },
          { id: "deploy", action: "echo", args: { message: "never" }, needs: ["ok"] },
          { id: "after", action: "echo", args: { message: "never" }, needs: ["deploy"] },
          { id: "side", action: "work", args: { ms: "6000" } },
        ],
      });
      const late = writeDag(target, {
        id: "late",
        tasks: [
          { id: "ok", approve: { timeout: "1500ms" } },
          { id: "deploy", action: "echo", args: { message: "never" }, needs: ["ok"] },
        ],
      });
      const optional = writeDag(target, {
        id: "optional",
        tasks: [
          { id: "canary", approve: { timeout: "1500ms", on_timeout: "skip" } },
          { id: "canary-deploy", action: "echo", args: { message: "never" }, needs: ["canary"] },
          { id: "main", action: "echo", args: { message: "main" } },
        ],
      });
      nodes.push(startNode(target, config, "solo"));
      const store = await target.open();
      try {
        await untilNodeBeats(store);
        for (const f of [denied, late, optional]) {
          const s = await run(["submit", f, "--confirm"]);
          expect(s.code, s.stderr).toBe(0);
        }
        const deniedRun = (await store.getRun("local", "denied"))!;
        await waitForTasks(store, deniedRun.runId, "the gate open", (ts) =>
          ts.some((t) => t.taskId === "ok" && t.gateState !== null),
        );
        // A value for a gate without a form is refused, and changes nothing.
        const bad = await run(["approve", "denied", "ok", "ticket=X-1"]);
        expect(bad.code).toBe(1);
        expect(bad.stdout + bad.stderr).toContain("this gate has no form");
        const no = await run(["deny", "denied", "ok", "the", "window", "closed", "--json"]);
        expect(no.code, no.stdout + no.stderr).toBe(0);
        expect(JSON.parse(no.stdout)).toMatchObject({ ok: true, answer: "gate", result: "denied" });
        // The parallel branch still runs to its end; the denied one's dependents are skipped.
        expect(await waitForRunStatus(store, "denied", (s) => s === "failed" || s === "succeeded")).toBe(
          "failed",
        );
        const tasks = Object.fromEntries(
          (await store.listTasks(deniedRun.runId)).map((t) => [t.taskId, t.status]),
        );
        expect(tasks).toEqual({ ok: "failed", deploy: "skipped", after: "skipped", side: "succeeded" });
        const sideTask = (await store.getTask(deniedRun.runId, "side"))!;
        const okTask = (await store.getTask(deniedRun.runId, "ok"))!;
        expect(okTask.error).toMatch(/^denied by local:\S+: the window closed$/);
        // The side branch finished after the deny: it was not held or stopped by it.
        expect(sideTask.finishedAt!).toBeGreaterThan(okTask.finishedAt!);
        const again = await run(["approve", "denied", "ok"]);
        expect(again.code).toBe(1);
        expect(again.stdout + again.stderr).toContain("decided already");

        expect(await waitForRunStatus(store, "late", (s) => s !== "running")).toBe("failed");
        expect(await waitForRunStatus(store, "optional", (s) => s !== "running")).toBe("succeeded");
        const lateRun = (await store.getRun("local", "late"))!;
        const optRun = (await store.getRun("local", "optional"))!;
        const statusOf = async (runId: string) =>
          Object.fromEntries((await store.listTasks(runId)).map((t) => [t.taskId, t.status]));
        expect(await statusOf(lateRun.runId)).toEqual({ ok: "timed_out", deploy: "skipped" });
        expect(await statusOf(optRun.runId)).toEqual({
          canary: "skipped",
          "canary-deploy": "skipped",
          main: "succeeded",
        });
        const events = await allEvents(store);
        expect(gateKinds(events, deniedRun.runId)).toEqual(["gate.opened", "gate.denied"]);
        expect(gateKinds(events, lateRun.runId)).toEqual(["gate.opened", "gate.timed_out"]);
        expect(gateKinds(events, optRun.runId)).toEqual(["gate.opened", "gate.timed_out"]);
        const opened = events.find((e) => e.runId === lateRun.runId && e.kind === "gate.opened")!;
        const timedOut = events.find((e) => e.runId === lateRun.runId && e.kind === "gate.timed_out")!;
        // Timed out after its 1.5 s, not long after (the reaper wakes for it).
        expect(timedOut.at - opened.at).toBeGreaterThanOrEqual(1500);
        expect(timedOut.at - opened.at).toBeLessThan(6000);
        failed = false;
      } finally {
        await store.close();
      }
    } finally {
      await killAll(nodes);
      await target.cleanup(failed);
    }
  }, 180_000);
});
