/**
 * A node killed with `kill -9` while its action runs (docs/architecture.md §3, "Task lease"; docs/operations.md,
 * "Lost nodes"), with real node processes on each store: under a DAG's defaults (`retries = 0`) the
 * task runs again on another node once its lease expired, without spending a retry, and the run
 * succeeds; `dagbot status` says what happened. A task declared `rerun_if_lost = false` fails
 * instead, saying why, and its action ran once. Counted from the actions' own records.
 */
import { join } from "node:path";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import type { Store } from "../../src/ports/store.js";
import type { ActionRecord } from "../support/chaos-records.js";
import { readRecords } from "../support/chaos-records.js";
import {
  REPO,
  cli,
  createTarget,
  killAll,
  requireBuild,
  startNode,
  waitForRunStatus,
  writeDag,
  writeNodeConfig,
} from "../support/engine-cluster.js";
import type { NodeProcess, StoreKind, Target } from "../support/engine-cluster.js";
import { waitFor } from "../support/store-wait.js";

const RECORD = join(REPO, "test", "support", "engine-fixtures", "record.mjs");

/** What the record action itself wrote: a start and an end line per attempt. */
const records = (target: Target): ActionRecord[] => readRecords(join(target.dir, "records.jsonl"));

describe.each<StoreKind>(["sqlite", "postgres"])(
  "a node killed with kill -9 while its action runs (%s)",
  (kind) => {
    let target: Target | null = null;
    let store: Store | null = null;
    const nodes: NodeProcess[] = [];

    beforeAll(() => requireBuild());

    afterEach(async (context) => {
      const failed = context.task.result?.state === "fail";
      await killAll(nodes.splice(0));
      await store?.close();
      store = null;
      await target?.cleanup(failed);
      target = null;
    });

    it("runs the task again elsewhere under the defaults, and fails it saying why under rerun_if_lost = false", async () => {
      target = await createTarget(kind, `lost-${kind}`);
      const t = target;
      store = await t.open();
      const s = store;
      const extra = `
[actions.rec]
argv = [${JSON.stringify(process.execPath)}, ${JSON.stringify(RECORD)}, "{ms}", ${JSON.stringify(join(t.dir, "records.jsonl"))}]
args = { ms = { pattern = '[0-9]{1,6}' } }
timeout = "2m"
kill_grace = "300ms"
`;
      // A short task lease (3 s) so the test does not wait the default 60 s for the lost node's lease.
      const ids = ["n1", "n2", "n3"];
      const configs = ids.map((nodeId) =>
        writeNodeConfig(t, { nodeId, capacity: 1, ttl: "2s", renewEvery: "500ms", taskTtl: "3s", extra }),
      );
      const byId = new Map<string, NodeProcess>();
      ids.forEach((nodeId, i) => {
        const n = startNode(t, configs[i]!, nodeId);
        nodes.push(n);
        byId.set(nodeId, n);
      });
      await waitFor(
        "three heartbeats",
        () => s.listNodes(),
        (n) => n.length === 3,
        { timeoutMs: 30_000 },
      );

      /** Submits a one-task DAG, waits for its action to start, kills its node with SIGKILL: the node's id. */
      const killWhileRunning = async (id: string, task: Record<string, unknown>): Promise<string> => {
        const submitted = await cli(
          [
            "submit",
            writeDag(t, { id, tasks: [{ id: "a", action: "rec", args: { ms: 6_000 }, ...task }] }),
            "--config",
            configs[0]!,
            "--confirm",
          ],
          { cwd: t.dir },
        );
        expect(submitted.code, submitted.stderr).toBe(0);
        await waitFor(
          `${id}'s action started`,
          () => records(t).filter((r) => r.ev === "start" && r.task === "a" && r.run.length > 0),
          (rs) => rs.some((r) => r.attempt === 1 && r.run === runIdOf(id)),
          { timeoutMs: 30_000, intervalMs: 25 },
        ).catch(async () => {
          throw new Error(`no start of ${id}: ${JSON.stringify(records(t))}`);
        });
        const run = (await s.getRun("local", id))!;
        const running = (await s.getTask(run.runId, "a"))!;
        const victim = running.executor!.nodeId;
        byId.get(victim)!.kill("SIGKILL");
        await byId.get(victim)!.exited;
        return victim;
      };
      const runIds = new Map<string, string>();
      const runIdOf = (id: string): string => runIds.get(id) ?? "";
      const learnRunId = async (id: string): Promise<void> => {
        const run = await waitFor(
          `run ${id}`,
          () => s.getRun("local", id),
          (r) => r !== null,
          { timeoutMs: 10_000 },
        );
        runIds.set(id, run!.runId);
      };

      // Under the defaults (retries = 0): run again elsewhere, and the run succeeds.
      const submittedFirst = killWhileRunning("again", {});
      await learnRunId("again");
      const lost = await submittedFirst;
      // While it runs again, `dagbot status` says what happened and where it runs now.
      const rerun = await waitFor(
        "the second attempt running",
        () => s.getTask(runIdOf("again"), "a"),
        (x) => x?.status === "running" && x.attempt === 2,
        { timeoutMs: 30_000, intervalMs: 25 },
      );
      expect(rerun!.executor?.nodeId).not.toBe(lost);
      expect(rerun!.error).toBe(`node ${lost} was lost; running again`);
      const status = await cli(["status", "again", "--config", configs[0]!], { cwd: t.dir });
      expect(status.code, status.stderr).toBe(0);
      expect(status.stdout).toContain(`node ${lost} was lost; running again`);
      // Its line: running, for how long, on which node now, the attempt, and why.
      expect(status.stdout).toMatch(
        new RegExp(
          `a +running +\\S+ +${rerun!.executor!.nodeId} +attempts 2 +node ${lost} was lost; running again`,
        ),
      );
      console.log(`[lost-node ${kind}] dagbot status while it runs again:\n${status.stdout}`);

      expect(await waitForRunStatus(s, "again", (st) => st !== "running" && st !== "pending", 60_000)).toBe(
        "succeeded",
      );
      // The task's retries were not spent: attempt 2 of 2 with retries = 0.
      expect(await s.getTask(runIdOf("again"), "a")).toMatchObject({
        status: "succeeded",
        attempt: 2,
        maxAttempts: 2,
      });
      const recs = records(t).filter((r) => r.run === runIdOf("again"));
      const starts = recs.filter((r) => r.ev === "start");
      expect(starts.map((r) => r.attempt)).toEqual([1, 2]);
      // The lost attempt had ended (its supervisor kills it at the claim's deadline) before the next began.
      const firstEnd = recs.find((r) => r.ev === "end" && r.attempt === 1);
      expect(firstEnd).toBeDefined();
      expect(firstEnd!.t).toBeLessThanOrEqual(starts[1]!.t);
      expect(recs.find((r) => r.ev === "end" && r.attempt === 2)?.why).toBe("done");

      // Never twice: the run fails, saying why, and the action ran once.
      const submittedOnce = killWhileRunning("once", { rerun_if_lost: false });
      await learnRunId("once");
      const lostOnce = await submittedOnce;
      expect(await waitForRunStatus(s, "once", (st) => st !== "running" && st !== "pending", 60_000)).toBe(
        "failed",
      );
      const once = (await s.getTask(runIdOf("once"), "a"))!;
      expect(once).toMatchObject({
        status: "failed",
        attempt: 1,
        error: `node ${lostOnce} was lost; not run again: rerun_if_lost = false`,
      });
      expect(records(t).filter((r) => r.run === runIdOf("once") && r.ev === "start")).toHaveLength(1);
      const failedStatus = await cli(["status", "once", "--config", configs[0]!], { cwd: t.dir });
      expect(failedStatus.stdout + failedStatus.stderr).toContain("rerun_if_lost = false");
    }, 150_000);
  },
);
