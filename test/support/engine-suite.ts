/**
 * The engine's end-to-end suite, run once per store (test/e2e/engine-sqlite.test.ts and
 * engine-postgres.test.ts): real `dagbot node` processes sharing one store, killed with SIGKILL,
 * and every claim checked from the store's event log rather than from timing.
 */
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { ConflictError } from "../../src/ports/errors.js";
import type { LogEvent, Store, TaskRecord } from "../../src/ports/store.js";
import type { NodeProcess, StoreKind, Target } from "./engine-cluster.js";
import {
  ROOM,
  allEvents,
  cli,
  createTarget,
  isAlive,
  killAll,
  markerExists,
  marksDir,
  readPid,
  replayCaps,
  requireBuild,
  startNode,
  successCounts,
  termRegressions,
  waitForRunStatus,
  waitForTasks,
  writeDag,
  writeNodeConfig,
} from "./engine-cluster.js";
import { untilNodeBeats, waitFor } from "./store-wait.js";
import { join } from "node:path";

const TTL_MS = 2_000;

interface Ctx {
  target: Target;
  store: Store;
  nodes: NodeProcess[];
}

async function submit(ctx: Ctx, dagPath: string, config: string): Promise<string> {
  // `submit` refuses to wait for a room with no live node (exit 3): let a spawned node beat first.
  await untilNodeBeats(ctx.store);
  const r = await cli(["submit", dagPath, "--config", config, "--confirm"]);
  expect(r.code, r.stderr).toBe(0);
  // It prints the run's id (its name); the tests follow its tasks by uuid.
  const run = await ctx.store.getRun(ROOM, r.stdout.trim());
  expect(run, r.stdout).not.toBeNull();
  return run!.runId;
}

function spawnNodes(
  ctx: Ctx,
  ids: string[],
  options: { labels?: string[]; capacity?: number; ttl?: string; renewEvery?: string } = {},
): string[] {
  return ids.map((nodeId) => {
    const config = writeNodeConfig(ctx.target, { nodeId, ...options });
    ctx.nodes.push(startNode(ctx.target, config, nodeId));
    return config;
  });
}

function nodeOf(ctx: Ctx, nodeId: string): NodeProcess {
  const n = ctx.nodes.find((p) => p.nodeId === nodeId);
  if (n === undefined) throw new Error(`no node process ${nodeId}`);
  return n;
}

async function leaderId(store: Store): Promise<string> {
  const lease = await waitFor(
    "a leader",
    () => store.getLease(ROOM),
    (l) => l !== null && l.holder !== null && l.expiresAt > l.now,
    { timeoutMs: 15_000, intervalMs: 25 },
  );
  return lease!.holder!.nodeId;
}

const taskMap = (tasks: readonly TaskRecord[]) =>
  new Map(tasks.map((t) => [`${t.runId}/${t.taskId}`, { runId: t.runId, concurrencyKey: t.concurrencyKey }]));

export function describeEngineSuite(kind: StoreKind): void {
  describe(`engine on ${kind}: real node processes`, () => {
    let ctx: Ctx | null = null;
    let failed = false;

    beforeAll(() => requireBuild());

    async function setup(label: string): Promise<Ctx> {
      const target = await createTarget(kind, label);
      const store = await target.open();
      ctx = { target, store, nodes: [] };
      return ctx;
    }

    afterEach(async (context) => {
      failed = context.task.result?.state === "fail";
      if (ctx === null) return;
      await killAll(ctx.nodes);
      await ctx.store.close();
      await ctx.target.cleanup(failed);
      ctx = null;
    });

    it("runs a 200-task DAG across 3 node processes: each task succeeds exactly once, caps and keys hold, a raised cap admits more at once", async () => {
      const c = await setup("200");
      const [configA] = spawnNodes(c, ["node-a", "node-b", "node-c"], { capacity: 4 });
      const tasks = Array.from({ length: 200 }, (_, i) => ({
        id: `t${String(i).padStart(3, "0")}`,
        ...(i % 4 === 0
          ? { action: "work", args: { ms: 40 } }
          : { action: "echo", args: { message: `task ${i}` } }),
        ...(i >= 20 ? { needs: [`t${String(i - 20).padStart(3, "0")}`] } : {}),
        ...(i % 10 === 3 ? { concurrency_key: "key-a" } : i % 10 === 7 ? { concurrency_key: "key-b" } : {}),
      }));
      const dagPath = writeDag(c.target, { id: "big", max_parallel: 8, tasks });
      const capped = await cli(["cap", "3", "--config", configA!]);
      expect(capped.code, capped.stderr).toBe(0);
      const runId = await submit(c, dagPath, configA!);

      await waitForTasks(
        c.store,
        runId,
        "40 tasks succeeded",
        (ts) => ts.filter((t) => t.status === "succeeded").length >= 40,
      );
      const raised = await cli(["cap", "10", "--config", configA!]);
      expect(raised.code, raised.stderr).toBe(0);
      expect(raised.stdout).toContain("is now 10 (it was 3)");
      expect(await waitForRunStatus(c.store, "big", (s) => s !== "running", 120_000)).toBe("succeeded");

      const final = await c.store.listTasks(runId);
      expect(final).toHaveLength(200);
      expect(final.filter((t) => t.status !== "succeeded")).toEqual([]);
      const events = await allEvents(c.store);
      const counts = successCounts(events, runId);
      expect([...counts.values()].filter((n) => n !== 1)).toEqual([]);
      expect(counts.size).toBe(200);
      // Work really was shared: more than one node ran tasks.
      expect(new Set(final.map((t) => t.executor?.nodeId)).size).toBeGreaterThan(1);

      const replay = replayCaps(events, taskMap(final), new Map([[runId, 8]]), 3);
      expect(replay.violations).toEqual([]);
      expect(replay.maxPerKey.get("key-a")).toBe(1);
      expect(replay.maxPerKey.get("key-b")).toBe(1);
      // Raising the cap let the leader admit more than the old cap right away.
      expect(replay.maxAfterCap.get(10) ?? 0).toBeGreaterThan(3);
      expect(termRegressions(events)).toEqual([]);
    });

    it("kill -9 of the leader: another node leads within TTL + 1 s of its last renewal and the run still succeeds", async () => {
      const c = await setup("leader-kill");
      const [configA] = spawnNodes(c, ["node-a", "node-b", "node-c"], { capacity: 2 });
      // A crash costs the tasks the dead node was running one attempt (docs/architecture.md §3): allow a retry.
      const tasks = Array.from({ length: 40 }, (_, i) => ({
        id: `w${i}`,
        action: "work",
        args: { ms: 150 },
        retries: 1,
        retry_backoff: "100ms",
      }));
      const runId = await submit(c, writeDag(c.target, { id: "survive", tasks }), configA!);
      await waitForTasks(
        c.store,
        runId,
        "8 tasks succeeded",
        (ts) => ts.filter((t) => t.status === "succeeded").length >= 8,
      );

      const leader = await leaderId(c.store);
      const victim = nodeOf(c, leader);
      victim.kill("SIGKILL");
      expect((await victim.exited).signal).toBe("SIGKILL");
      // The dead leader's last renewal stays in the row until someone takes the lease over.
      const dead = await c.store.getLease(ROOM);
      expect(dead?.holder?.nodeId).toBe(leader);
      const deadTerm = dead!.term;
      const lastRenewal = dead!.expiresAt - TTL_MS;

      const acquired = await waitFor(
        "a new leader",
        async () =>
          (await allEvents(c.store)).find((e) => e.kind === "lease.acquired" && (e.term ?? 0) > deadTerm),
        (e) => e !== undefined,
        { timeoutMs: 15_000, intervalMs: 25 },
      );
      const takeoverMs = acquired!.at - lastRenewal;
      console.log(
        `[${kind}] leader takeover after kill -9: ${takeoverMs} ms after its last renewal (TTL ${TTL_MS} ms)`,
      );
      expect(acquired!.actor?.startsWith(leader)).toBe(false);
      expect(takeoverMs).toBeLessThanOrEqual(TTL_MS + 1_000);

      expect(await waitForRunStatus(c.store, "survive", (s) => s !== "running", 60_000)).toBe("succeeded");
      const events = await allEvents(c.store);
      const counts = successCounts(events, runId);
      expect(counts.size).toBe(40);
      expect([...counts.values()].every((n) => n === 1)).toBe(true);
      expect(termRegressions(events)).toEqual([]);
      // Writes after the takeover carry the new term only.
      const after = events.filter((e) => e.seq > acquired!.seq && e.term !== null);
      expect(after.every((e) => e.term! > deadTerm)).toBe(true);
    });

    it("kill -9 of a worker mid-task: the task is retried elsewhere after its lease expires; the late completion is rejected", async () => {
      const c = await setup("worker-kill");
      // node-a cannot run the task (no gpu label); it leads, so killing a worker never kills the leader.
      const [configA] = spawnNodes(c, ["node-a"], { capacity: 2 });
      expect(await leaderId(c.store)).toBe("node-a");
      spawnNodes(c, ["node-b", "node-c"], { capacity: 2, labels: ["linux", "gpu"] });
      const dag = {
        id: "retry-me",
        tasks: [
          {
            id: "slow",
            action: "work",
            args: { ms: 2500 },
            on: { labels: ["gpu"] },
            retries: 1,
            retry_backoff: "100ms",
          },
          { id: "after", action: "echo", args: { message: "after" }, needs: ["slow"] },
        ],
      };
      const runId = await submit(c, writeDag(c.target, dag), configA!);
      const [running] = await waitForTasks(c.store, runId, "slow running", (ts) =>
        ts.some((t) => t.taskId === "slow" && t.status === "running" && t.executor !== null),
      ).then((ts) => ts.filter((t) => t.taskId === "slow"));
      const token = { runId, taskId: "slow", version: running!.version, session: running!.executor! };
      const victim = nodeOf(c, token.session.nodeId);
      victim.kill("SIGKILL");
      await victim.exited;
      const orphaned = await c.store.getTask(runId, "slow");
      expect(orphaned?.status).toBe("running");

      expect(await waitForRunStatus(c.store, "retry-me", (s) => s !== "running", 60_000)).toBe("succeeded");
      const slow = (await c.store.getTask(runId, "slow"))!;
      expect(slow.attempt).toBe(2);
      expect(slow.executor?.nodeId).not.toBe(token.session.nodeId);
      expect(slow.executor?.nodeId).not.toBe("node-a");
      const events = await allEvents(c.store);
      const firstRun = events.find(
        (e) => e.kind === "task.running" && e.runId === runId && e.taskId === "slow",
      );
      const requeue = events.find(
        (e) =>
          e.kind === "task.queued" &&
          e.runId === runId &&
          e.taskId === "slow" &&
          e.seq > (firstRun?.seq ?? 0),
      );
      expect(requeue).toBeDefined();
      expect(requeue!.term).not.toBeNull();
      // Requeued by the leader's reaper, only once the killed worker's lease had expired.
      expect(requeue!.at).toBeGreaterThanOrEqual(orphaned!.leaseExpiresAt!);
      console.log(
        `[${kind}] killed worker's task requeued ${requeue!.at - orphaned!.leaseExpiresAt!} ms after its lease expired`,
      );
      expect(successCounts(events, runId).get("slow")).toBe(1);

      await expect(
        c.store.finishTask(token, { outcome: "succeeded", exitCode: 0, output: "late", error: null }),
      ).rejects.toBeInstanceOf(ConflictError);
      expect((await c.store.getTask(runId, "slow"))?.output).not.toBe("late");
    });

    it("cancel mid-run: running tasks are stopped, queued ones never run, the run ends canceled", async () => {
      const c = await setup("cancel");
      const [configA] = spawnNodes(c, ["node-a", "node-b"], { capacity: 1 });
      const dag = {
        id: "stop-me",
        tasks: [
          { id: "long1", action: "work", args: { ms: 60000 }, priority: 10 },
          { id: "long2", action: "work", args: { ms: 60000 }, priority: 10 },
          { id: "q1", action: "work", args: { ms: 10 } },
          { id: "q2", action: "work", args: { ms: 10 } },
          { id: "q3", action: "work", args: { ms: 10 } },
          { id: "b1", action: "work", args: { ms: 10 }, needs: ["long1"] },
        ],
      };
      const runId = await submit(c, writeDag(c.target, dag), configA!);
      await waitForTasks(c.store, runId, "long tasks running, short ones queued", (ts) => {
        const s = new Map(ts.map((t) => [t.taskId, t.status]));
        return (
          s.get("long1") === "running" &&
          s.get("long2") === "running" &&
          ["q1", "q2", "q3"].every((q) => s.get(q) === "queued")
        );
      });
      await waitFor(
        "both long actions started",
        () => ["long1", "long2"].every((t) => markerExists(c.target, runId, t, 1, "start")),
        (ok) => ok,
      );

      const canceled = await cli(["cancel", "stop-me", "--config", configA!]);
      expect(canceled.code, canceled.stderr + canceled.stdout).toBe(0);
      expect(await waitForRunStatus(c.store, "stop-me", (s) => s === "canceled", 30_000)).toBe("canceled");

      const final = await c.store.listTasks(runId);
      expect(final.filter((t) => t.status === "running" || t.status === "canceling")).toEqual([]);
      const shown = await cli(["status", "stop-me", "--json", "--config", configA!]);
      expect(shown.code, shown.stderr).toBe(0);
      expect((JSON.parse(shown.stdout) as { run: { status: string } }).run.status).toBe("canceled");
      expect(Object.fromEntries(final.map((t) => [t.taskId, t.status]))).toEqual({
        long1: "canceled",
        long2: "canceled",
        q1: "canceled",
        q2: "canceled",
        q3: "canceled",
        b1: "canceled",
      });
      for (const q of ["q1", "q2", "q3", "b1"])
        expect(markerExists(c.target, runId, q, 1, "start")).toBe(false);
      for (const t of ["long1", "long2"]) {
        const pid = readPid(join(marksDir(c.target), `${runId}.${t}.1.start`));
        await waitFor(
          `action of ${t} gone`,
          () => isAlive(pid),
          (alive) => !alive,
          { timeoutMs: 5_000 },
        );
        expect(markerExists(c.target, runId, t, 1, "end")).toBe(false);
      }
    });

    it("SIGTERM of the leader hands leadership over before its lease would expire, and the node leaves the list", async () => {
      const c = await setup("handover");
      const [configA] = spawnNodes(c, ["node-a", "node-b"], { ttl: "5s", renewEvery: "1s" });
      const leader = await leaderId(c.store);
      const victim = nodeOf(c, leader);
      await waitFor(
        "both nodes listed",
        () => c.store.listNodes(),
        (ns) => ns.length === 2,
      );
      const listed = await cli(["nodes", "--json", "--config", configA!]);
      expect(listed.code, listed.stderr).toBe(0);
      const view = JSON.parse(listed.stdout) as {
        nodes: Array<{ nodeId: string; labels: string[]; leads: string[]; runningTasks: number }>;
        leaders: Array<{ room: string; nodeId: string }>;
      };
      expect(view.nodes.map((n) => n.nodeId).sort()).toEqual(["node-a", "node-b"]);
      expect(view.nodes.find((n) => n.nodeId === leader)?.leads).toEqual([ROOM]);
      expect(view.leaders).toEqual([expect.objectContaining({ room: ROOM, nodeId: leader })]);
      const before = (await c.store.getLease(ROOM))!;
      victim.kill("SIGTERM");
      expect((await victim.exited).code).toBe(0);
      const events = await waitFor(
        "a new leader",
        () => allEvents(c.store),
        (es) => es.some((e) => e.kind === "lease.acquired" && (e.term ?? 0) > before.term),
        { timeoutMs: 10_000, intervalMs: 25 },
      );
      const released = events.find((e: LogEvent) => e.kind === "lease.released" && e.term === before.term);
      const acquired = events.find(
        (e: LogEvent) => e.kind === "lease.acquired" && (e.term ?? 0) > before.term,
      )!;
      expect(released).toBeDefined();
      console.log(
        `[${kind}] graceful handover: new leader ${acquired.at - released!.at} ms after the release`,
      );
      expect(acquired.actor?.startsWith(leader)).toBe(false);
      // The lease the stopped leader held at the last renewal we saw would have lasted at least this long.
      expect(acquired.at).toBeLessThan(before.expiresAt);
      expect((await c.store.listNodes()).map((n) => n.session.nodeId)).not.toContain(leader);
    });
  });
}
