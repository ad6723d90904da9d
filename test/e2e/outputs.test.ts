// Task outputs with real processes on SQLite and PostgreSQL: a build → deploy DAG where
// build's action appends `version=1.2.3` to $DAGBOT_OUTPUT and deploy's action receives it as one argv
// entry (read from deploy's own record); the file is gone after and the action saw nothing of the
// node's environment but the base variables and DAGBOT_*; the value is shown by `dagbot logs`,
// `dagbot status RUN TASK` and `!dag status RUN TASK`; an output failing its pattern fails the
// producing task with a message naming the output and the rule, and its dependent never runs; a
// retry of the failed part does not run the producer again and still feeds its value; references to
// a non-ancestor or an undeclared output are refused by `dagbot validate` and by a publish.
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { sendLocalCommand } from "../../src/composition/command-step.js";
import { BASE_ENV_KEYS } from "../../src/adapters/exec/process-executor.js";
import type { NodeProcess } from "../support/engine-cluster.js";
import {
  cli,
  createTarget,
  killAll,
  LOCAL_POLICY,
  requireBuild,
  startNode,
  waitForRunStatus,
  writeDag,
  writeNodeConfig,
} from "../support/engine-cluster.js";
import { untilNodeBeats } from "../support/store-wait.js";

beforeAll(() => {
  requireBuild();
});

const VERSION = "[0-9]+\\.[0-9]+\\.[0-9]+";

function records(path: string): Array<Record<string, unknown>> {
  if (!existsSync(path)) return [];
  return readFileSync(path, "utf8")
    .trim()
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

describe.each(["sqlite", "postgres"] as const)("task outputs on %s", (kind) => {
  it("build publishes a version, deploy's argv receives it; a bad value fails build; retry keeps it; bad references are refused", async () => {
    const target = await createTarget(kind, `outputs-${kind}`);
    let node: NodeProcess | null = null;
    let failed = true;
    try {
      const built = join(target.dir, "built.txt");
      const deployed = join(target.dir, "deployed.txt");
      const gate = join(target.dir, "deploy-may-succeed");
      // build: records what it saw (its DAGBOT_OUTPUT path, the names of its environment), then
      // publishes its argument as `version`.
      const build = [
        "const fs = require('fs');",
        "const [v, rec] = process.argv.slice(1);",
        "fs.appendFileSync(rec, JSON.stringify({ run: process.env.DAGBOT_RUN_ID, file: process.env.DAGBOT_OUTPUT,",
        "  exists: fs.existsSync(process.env.DAGBOT_OUTPUT), env: Object.keys(process.env).sort() }) + '\\n');",
        "fs.appendFileSync(process.env.DAGBOT_OUTPUT, 'version=' + v + '\\n');",
      ].join(" ");
      // deploy: records the argument it received (its own record), and fails while the gate is shut
      // when asked to.
      const deploy = [
        "const fs = require('fs');",
        "const [v, rec, gate, strict] = process.argv.slice(1);",
        "fs.appendFileSync(rec, JSON.stringify({ run: process.env.DAGBOT_RUN_ID, version: v }) + '\\n');",
        "if (strict === 'yes' && !fs.existsSync(gate)) process.exit(4);",
      ].join(" ");
      const node_ = JSON.stringify(process.execPath);
      const extra = [
        "[actions.build]",
        `argv = [${node_}, "-e", ${JSON.stringify(build)}, "{v}", ${JSON.stringify(built)}]`,
        "args = { v = { pattern = '[0-9.]{1,20}' } }",
        'timeout = "10s"',
        'kill_grace = "300ms"',
        "[actions.deploy]",
        `argv = [${node_}, "-e", ${JSON.stringify(deploy)}, "{version}", ${JSON.stringify(deployed)}, ${JSON.stringify(gate)}, "{strict}"]`,
        "args = { version = { pattern = '[0-9.]{1,20}' }, strict = { pattern = 'yes|no' } }",
        'timeout = "10s"',
        'kill_grace = "300ms"',
        "",
      ].join("\n");
      const config = writeNodeConfig(target, { nodeId: "solo", extra });
      const run = (args: string[]) => cli([...args, "--config", config], { cwd: target.dir });
      const release = (id: string, v: string, strict = "no") =>
        writeDag(target, {
          id,
          tasks: [
            { id: "build", action: "build", args: { v }, outputs: { version: VERSION } },
            {
              id: "deploy",
              action: "deploy",
              needs: ["build"],
              args: { version: "{tasks.build.outputs.version}", strict },
            },
          ],
        });

      // Refused at validation: a non-ancestor, an undeclared output, an unknown task.
      const bad = writeDag(target, {
        id: "bad",
        tasks: [
          { id: "build", action: "build", args: { v: "1.0.0" }, outputs: { version: VERSION } },
          { id: "side", action: "deploy", args: { version: "{tasks.build.outputs.version}", strict: "no" } },
          {
            id: "deploy",
            action: "deploy",
            needs: ["build"],
            args: { version: "{tasks.build.outputs.tag}", strict: "{tasks.nope.outputs.x}" },
          },
        ],
      });
      const validated = await run(["validate", bad]);
      expect(validated.code, validated.stdout + validated.stderr).toBe(1);
      const said = validated.stdout + validated.stderr;
      expect(said).toContain(
        'tasks[1].args.version: refers to {tasks.build.outputs.version}, but "build" is not among the tasks "side" needs',
      );
      expect(said).toContain(
        'tasks[2].args.version: refers to {tasks.build.outputs.tag}, but task "build" declares no output "tag" (it declares version)',
      );
      expect(said).toContain(
        'tasks[2].args.strict: refers to {tasks.nope.outputs.x}, but the DAG has no task "nope"',
      );

      node = startNode(target, config, "solo");
      const store = await target.open();
      try {
        await untilNodeBeats(store);
        // A publish is refused the same way, and stores nothing.
        const refused = await run(["submit", bad, "--confirm"]);
        expect(refused.code).toBe(2); // a bad file, refused before it reaches the leader
        expect(refused.stdout + refused.stderr).toMatch(/is not among the tasks "side" needs/);
        expect(await store.getRun("local", "bad")).toBeNull();

        // build → deploy: the version reaches deploy's argv.
        const ok = await run(["submit", release("release", "1.2.3"), "--confirm"]);
        expect(ok.code, ok.stdout + ok.stderr).toBe(0);
        await waitForRunStatus(store, "release", (s) => s === "succeeded");
        const run1 = (await store.getRun("local", "release"))!;
        expect(records(deployed)).toEqual([{ run: run1.runId, version: "1.2.3" }]);
        const [seen] = records(built);
        // A fresh file that existed when the action started, and is gone after.
        expect(seen).toMatchObject({ run: run1.runId, exists: true });
        expect(String(seen?.["file"])).toMatch(/dagbot-output-[^/]+\/outputs$/);
        expect(existsSync(String(seen?.["file"]))).toBe(false);
        // Nothing of the node's environment but the base variables and the attempt's own.
        const allowed = new Set<string>([
          ...BASE_ENV_KEYS,
          "DAGBOT_RUN_ID",
          "DAGBOT_TASK_ID",
          "DAGBOT_ATTEMPT",
          "DAGBOT_OUTPUT",
        ]);
        const env = seen?.["env"] as string[];
        expect(env).toContain("DAGBOT_OUTPUT");
        expect(env.filter((k) => !allowed.has(k))).toEqual([]);
        const tasks = await store.listTasks(run1.runId);
        expect(tasks.find((t) => t.taskId === "build")?.outputValues).toEqual({ version: "1.2.3" });

        // Shown by logs (stderr, and --json), status RUN TASK, and !dag status RUN TASK.
        const logs = await run(["logs", "release", "build"]);
        expect(logs.code).toBe(0);
        expect(logs.stderr).toContain("output version=1.2.3");
        const logsJson = await run(["logs", "release", "build", "--json"]);
        expect(JSON.parse(logsJson.stdout)).toMatchObject({ outputs: { version: "1.2.3" } });
        const status = await run(["status", "release", "build"]);
        expect(status.code, status.stderr).toBe(0);
        expect(status.stdout).toMatch(/build\s+succeeded[^\n]*\n\s+output version=1\.2\.3/);
        expect(status.stdout).not.toMatch(/^\s+deploy/m);
        const chat = await sendLocalCommand(
          store,
          "local",
          "!dag status release build",
          30_000,
          LOCAL_POLICY,
        );
        expect(chat?.outcome).toMatchObject({
          kind: "status",
          tasks: [{ taskId: "build", outputs: { version: "1.2.3" } }],
        });

        // An output failing its pattern fails build with the rule named; deploy never runs.
        const badValue = await run(["submit", release("release-bad", "1.2"), "--confirm"]);
        expect(badValue.code, badValue.stdout + badValue.stderr).toBe(0);
        await waitForRunStatus(store, "release-bad", (s) => s === "failed");
        const run2 = (await store.getRun("local", "release-bad"))!;
        const [b2, d2] = await store.listTasks(run2.runId);
        expect(b2).toMatchObject({ status: "failed", exitCode: 0, outputValues: null });
        expect(b2?.error).toBe(
          `outputs refused: output "version" of task build (value "1.2") does not match its pattern ${VERSION}`,
        );
        expect(d2?.status).toBe("skipped");
        const failedLogs = await run(["logs", "release-bad", "build"]);
        expect(failedLogs.stderr).toContain('output "version" of task build (value "1.2") does not match');
        expect(records(deployed).filter((r) => r["run"] === run2.runId)).toEqual([]);

        // deploy fails once; its retry does not run build again and still gets build's version.
        const strict = await run(["submit", release("release-retry", "3.4.5", "yes"), "--confirm"]);
        expect(strict.code, strict.stdout + strict.stderr).toBe(0);
        await waitForRunStatus(store, "release-retry", (s) => s === "failed");
        const run3 = (await store.getRun("local", "release-retry"))!;
        writeFileSync(gate, "");
        const retried = await run(["retry", "release-retry", "--confirm", "--json"]);
        expect(retried.code, retried.stdout + retried.stderr).toBe(0);
        const retryId = (JSON.parse(retried.stdout) as { dagId: string }).dagId;
        expect(retryId).toBe("release-retry.retry1");
        await waitForRunStatus(store, retryId, (s) => s === "succeeded");
        const run4 = (await store.getRun("local", retryId))!;
        expect(run4.dag.tasks.map((t) => t.id)).toEqual(["deploy"]);
        expect(records(built).filter((r) => r["run"] === run3.runId || r["run"] === run4.runId)).toHaveLength(
          1,
        );
        expect(records(deployed).filter((r) => r["run"] === run3.runId || r["run"] === run4.runId)).toEqual([
          { run: run3.runId, version: "3.4.5" },
          { run: run4.runId, version: "3.4.5" },
        ]);
        failed = false;
      } finally {
        await store.close();
      }
    } finally {
      if (node !== null) await killAll([node]);
      await target.cleanup(failed);
    }
  }, 120_000);
});
