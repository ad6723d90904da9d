// Run conditions (`when`, docs/dag-format.md "Run conditions") with a real node on SQLite and
// PostgreSQL: a failed build's `when = "failed"` cleanup and `when = "done"` report run, its
// dependents do not, and the run ends failed; a success skips the cleanup and still ends succeeded;
// a denied approval gate (denied with `dagbot deny`) runs its `when = "denied"` branch, not its
// `when = "failed"` one, and the run ends failed. What ran is counted from the actions' own records
// (each appends a line to a file), not from the store. `dagbot status --json` says why the skipped
// cleanup did not run and why the denied branch waits, and a retry keeps the conditions.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import type { NodeProcess } from "../support/engine-cluster.js";
import {
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

/** The tasks that ran, as the action recorded them: `run/task`, in the order they ran. */
function ran(path: string): Array<{ run: string; task: string }> {
  if (!existsSync(path)) return [];
  return readFileSync(path, "utf8")
    .trim()
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => JSON.parse(l) as { run: string; task: string });
}

describe.each(["sqlite", "postgres"] as const)("run conditions on %s", (kind) => {
  it("a failure runs its cleanup, a success skips it, a denied gate runs its denied branch; runs end honestly", async () => {
    const target = await createTarget(kind, `when-${kind}`);
    let node: NodeProcess | null = null;
    let failed = true;
    try {
      const records = join(target.dir, "ran.jsonl");
      // step: records which task of which run it is, then exits with the code it is given.
      const step = [
        "const fs = require('fs');",
        "const [code, rec] = process.argv.slice(1);",
        "fs.appendFileSync(rec, JSON.stringify({ run: process.env.DAGBOT_RUN_ID, task: process.env.DAGBOT_TASK_ID }) + '\\n');",
        "process.exit(Number(code));",
      ].join(" ");
      const extra = [
        "[actions.step]",
        `argv = [${JSON.stringify(process.execPath)}, "-e", ${JSON.stringify(step)}, "{code}", ${JSON.stringify(records)}]`,
        "args = { code = { pattern = '[0-9]' } }",
        'timeout = "10s"',
        'kill_grace = "300ms"',
        "",
      ].join("\n");
      const config = writeNodeConfig(target, { nodeId: "solo", extra });
      const run = (args: string[]) =>
        cli([...args, "--config", config], { cwd: target.dir, timeoutMs: 90_000 });
      const pipeline = (id: string, code: string) =>
        writeDag(target, {
          id,
          tasks: [
            { id: "build", action: "step", args: { code } },
            { id: "test", action: "step", args: { code: "0" }, needs: ["build"] },
            { id: "cleanup", action: "step", args: { code: "0" }, needs: ["build", "test"], when: "failed" },
            { id: "report", action: "step", args: { code: "0" }, needs: ["test"], when: "done" },
          ],
        });
      const release = writeDag(target, {
        id: "release",
        tasks: [
          { id: "prepare", action: "step", args: { code: "0" } },
          { id: "ship", approve: { approvers: 1 }, needs: ["prepare"] },
          { id: "deploy", action: "step", args: { code: "0" }, needs: ["ship"] },
          { id: "notify", action: "step", args: { code: "0" }, needs: ["ship"], when: "denied" },
          { id: "rollback", action: "step", args: { code: "0" }, needs: ["ship"], when: "failed" },
        ],
      });

      // Refused before anything runs: a condition nobody can judge.
      const bad = writeDag(target, {
        id: "bad",
        tasks: [
          { id: "a", action: "step", args: { code: "0" } },
          { id: "b", action: "step", args: { code: "0" }, needs: ["a"], when: "denied" },
        ],
      });
      const validated = await run(["validate", bad]);
      expect(validated.code, validated.stdout + validated.stderr).toBe(1);
      expect(validated.stdout + validated.stderr).toContain(
        'task "b" says when = "denied" but none of the tasks it needs (a) is an approval gate',
      );

      node = startNode(target, config, "solo");
      const store = await target.open();
      try {
        await untilNodeBeats(store);
        for (const f of [pipeline("broken", "3"), pipeline("green", "0"), release]) {
          const s = await run(["submit", f, "--confirm"]);
          expect(s.code, s.stdout + s.stderr).toBe(0);
        }

        // build fails: test does not run; the cleanup and the report do; the run is failed.
        expect(await waitForRunStatus(store, "broken", (s) => s === "failed" || s === "succeeded")).toBe(
          "failed",
        );
        const broken = (await store.getRun("local", "broken"))!;
        expect(
          ran(records)
            .filter((r) => r.run === broken.runId)
            .map((r) => r.task)
            .sort(),
        ).toEqual(["build", "cleanup", "report"]);

        // Everything succeeds: the cleanup is skipped, the report runs, the run succeeded.
        expect(await waitForRunStatus(store, "green", (s) => s === "failed" || s === "succeeded")).toBe(
          "succeeded",
        );
        const green = (await store.getRun("local", "green"))!;
        expect(
          ran(records)
            .filter((r) => r.run === green.runId)
            .map((r) => r.task),
        ).toEqual(["build", "test", "report"]);
        const status = await run(["status", "green", "--json"]);
        expect(status.code, status.stderr).toBe(0);
        const cleanup = (JSON.parse(status.stdout) as { tasks: Array<Record<string, unknown>> }).tasks.find(
          (t) => t["taskId"] === "cleanup",
        );
        expect(cleanup).toMatchObject({
          status: "skipped",
          decided: 'its condition when = "failed" was not met: no need failed',
        });

        // The gate is denied: notify runs, deploy and rollback do not; the run is failed.
        const releaseRun = (await store.getRun("local", "release"))!;
        await waitForTasks(store, releaseRun.runId, "the gate open", (ts) =>
          ts.some((t) => t.taskId === "ship" && t.gateState !== null),
        );
        const why = await run(["status", "release", "--json"]);
        const notify = (JSON.parse(why.stdout) as { tasks: Array<Record<string, unknown>> }).tasks.find(
          (t) => t["taskId"] === "notify",
        );
        expect(notify?.["wait"]).toMatchObject({
          kind: "needs",
          tasks: ["ship"],
          when: "denied",
          text: "waits for `ship` to end; runs if an approval was denied",
        });
        const no = await run(["deny", "release", "ship", "not", "today", "--json"]);
        expect(no.code, no.stdout + no.stderr).toBe(0);
        expect(await waitForRunStatus(store, "release", (s) => s === "failed" || s === "succeeded")).toBe(
          "failed",
        );
        expect(
          ran(records)
            .filter((r) => r.run === releaseRun.runId)
            .map((r) => r.task),
        ).toEqual(["prepare", "notify"]);
        expect(
          Object.fromEntries((await store.listTasks(releaseRun.runId)).map((t) => [t.taskId, t.status])),
        ).toEqual({
          prepare: "succeeded",
          ship: "failed",
          deploy: "skipped",
          notify: "succeeded",
          rollback: "skipped",
        });

        // A retry of the denied run runs what did not succeed with the same conditions: approved
        // this time, deploy runs and rollback (when = "failed") is skipped; notify, which
        // succeeded, is not run again.
        const retried = await run(["retry", "release", "--confirm", "--json"]);
        expect(retried.code, retried.stdout + retried.stderr).toBe(0);
        const retryId = (JSON.parse(retried.stdout) as { dagId: string }).dagId;
        const again = (await store.getRun("local", retryId))!;
        await waitForTasks(store, again.runId, "the gate open", (ts) =>
          ts.some((t) => t.taskId === "ship" && t.gateState !== null),
        );
        const yes = await run(["approve", retryId, "ship", "--json"]);
        expect(yes.code, yes.stdout + yes.stderr).toBe(0);
        expect(await waitForRunStatus(store, retryId, (s) => s === "failed" || s === "succeeded")).toBe(
          "succeeded",
        );
        expect(
          ran(records)
            .filter((r) => r.run === again.runId)
            .map((r) => r.task),
        ).toEqual(["deploy"]);
        expect(
          Object.fromEntries((await store.listTasks(again.runId)).map((t) => [t.taskId, t.status])),
        ).toEqual({ ship: "succeeded", deploy: "succeeded", rollback: "skipped" });
        failed = false;
      } finally {
        await store.close();
      }
    } finally {
      if (node !== null) await killAll([node]);
      await target.cleanup(failed);
    }
  }, 180_000);
});
