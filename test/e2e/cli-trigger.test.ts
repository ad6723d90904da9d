// `dagbot trigger` (and `!dag run` behind it) against a real node on SQLite: a published DAG is a
// definition; each trigger is a new run with its own id, parameter values checked before anything
// is stored, and each run's action runs once (read from the action's own record). The verb on every
// store (run ids <id>.N, values checked before anything is stored, a run's name standing for its
// DAG) is the commands suite's (test/adapters/commands.suite.ts, on SQLite and PostgreSQL) and the
// store contract's (definitions); this is its one real-process run.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { sendLocalCommand } from "../../src/composition/command-step.js";
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

describe("dagbot trigger on sqlite", () => {
  const kind = "sqlite";
  it("runs a published DAG again with parameters: new run ids, each action once per run, bad values store nothing", async () => {
    const target = await createTarget(kind, `trigger-${kind}`);
    let node: NodeProcess | null = null;
    let failed = true;
    try {
      const records = join(target.dir, "records.txt");
      // The action appends its one argument to a file: what the program itself received, per run.
      const script = "require('fs').appendFileSync(process.argv[2], JSON.stringify(process.argv[1]) + '\\n')";
      const extra = [
        "[actions.record]",
        `argv = [${JSON.stringify(process.execPath)}, "-e", ${JSON.stringify(script)}, "{tag}", ${JSON.stringify(records)}]`,
        `args = { tag = { pattern = '[^\\n]{0,100}' } }`,
        'timeout = "10s"',
        'kill_grace = "300ms"',
        "",
      ].join("\n");
      const config = writeNodeConfig(target, { nodeId: "solo", extra });
      const run = (args: string[]) => cli([...args, "--config", config], { cwd: target.dir });
      const nightly = writeDag(target, {
        id: "nightly",
        params: { tag: { pattern: "[^ ]{1,40}", default: "first" } },
        tasks: [{ id: "rec", action: "record", args: { tag: "{params.tag}" } }],
      });

      // No node yet: said at once, exit 3.
      const early = await run(["trigger", "nightly"]);
      expect(early.code, early.stderr).toBe(3);
      expect(early.stderr).toContain("no node of room local has a heartbeat");

      node = startNode(target, config, "solo");
      const store = await target.open();
      try {
        await untilNodeBeats(store);
        const submitted = await run(["submit", nightly, "--confirm"]);
        expect(submitted.code, submitted.stdout + submitted.stderr).toBe(0);
        await waitForRunStatus(store, "nightly", (s) => s === "succeeded");
        // Submitting the same content again is still "already exists": nothing new runs.
        const again = await run(["submit", nightly]);
        expect(again.code).toBe(0);
        expect(again.stderr).toMatch(/already exists/);
        // A run is named by its id everywhere; the uuid is in --json only.
        expect(again.stdout.trim()).toBe("nightly");
        expect((await store.listRuns("local")).length).toBe(1);

        const started: string[] = [];
        for (const tag of ["second", "$(touch${IFS}pwned);`id`|sh"]) {
          const triggered = await run(["trigger", "nightly", `tag=${tag}`, "--json"]);
          expect(triggered.code, triggered.stdout + triggered.stderr).toBe(0);
          const answer = JSON.parse(triggered.stdout) as {
            ok: boolean;
            dagId: string;
            status: string;
            params: object;
          };
          expect(answer).toMatchObject({ ok: true, status: "pending", params: { tag } });
          started.push(answer.dagId);
          const confirmed = await run(["confirm", answer.dagId]);
          expect(confirmed.code, confirmed.stdout).toBe(0);
          await waitForRunStatus(store, answer.dagId, (s) => s === "succeeded");
        }
        expect(started).toEqual(["nightly.2", "nightly.3"]);
        // Naming one of its runs starts another run of the same published DAG; --confirm starts it.
        const viaRun = await run(["trigger", "nightly.2", "tag=fourth", "--confirm", "--json"]);
        expect(viaRun.code, viaRun.stdout + viaRun.stderr).toBe(0);
        expect(JSON.parse(viaRun.stdout)).toMatchObject({ ok: true, dagId: "nightly.4" });
        await waitForRunStatus(store, "nightly.4", (s) => s === "succeeded");
        expect((await store.getRun("local", "nightly.4"))!.dag.definition).toBe("nightly");
        const third = (await store.getRun("local", "nightly.3"))!;
        expect(third.dag.definition).toBe("nightly");
        expect((await store.listTasks(third.runId))[0]?.args).toEqual({ tag: "$(touch${IFS}pwned);`id`|sh" });

        // Refused before anything is stored, each naming the parameter.
        const before = (await store.listRuns("local")).length;
        const unknown = await run(["trigger", "nightly", "colour=red"]);
        expect(unknown.code).toBe(1);
        expect(unknown.stdout).toMatch(/unknown parameter "colour" for nightly: it declares tag/);
        const mismatch = await run(["trigger", "nightly", `tag=${"x".repeat(41)}`]);
        expect(mismatch.code).toBe(1);
        expect(mismatch.stdout).toMatch(/parameter "tag": .* does not match its pattern/);
        // The action's own rule: a whole argv entry starting with "-" would be an option.
        const dash = await run(["trigger", "nightly", "tag=-rf"]);
        expect(dash.code).toBe(1);
        expect(dash.stdout).toMatch(/^parameter "tag" \(value "-rf"\): .*starts with "-"/);
        expect(dash.stdout).not.toContain("tasks[0]");
        const spaced = await run(["trigger", "nightly", "tag=a b"]);
        expect(spaced.code).toBe(2);
        const missing = await run(["trigger", "nosuch"]);
        expect(missing.code).toBe(1);
        expect((await store.listRuns("local")).length).toBe(before);

        // Each run's action ran once, with its own value, as one argv entry (no shell ran it).
        const lines = readFileSync(records, "utf8")
          .trim()
          .split("\n")
          .map((l) => JSON.parse(l) as string);
        expect(lines).toEqual(["first", "second", "$(touch${IFS}pwned);`id`|sh", "fourth"]);
        expect(existsSync(join(target.dir, "pwned"))).toBe(false);

        // The definition's history: the run publishing started and each triggered one.
        const history = await sendLocalCommand(store, "local", "!dag list nightly", 30_000, LOCAL_POLICY);
        expect(history?.outcome).toMatchObject({ kind: "list", of: "nightly" });
        const listed = history?.outcome?.kind === "list" ? history.outcome.runs.map((r) => r.run.dagId) : [];
        expect([...listed].sort()).toEqual(["nightly", "nightly.2", "nightly.3", "nightly.4"]);
        expect(history?.outcome).toMatchObject({ kind: "list", runs: expect.any(Array) });
      } finally {
        await store.close();
      }
      failed = false;
    } finally {
      if (node !== null) await killAll([node]);
      await target.cleanup(failed);
    }
  }, 120_000);
});
