// `dagbot confirm`, `reject`, `retry` and `trigger` against a real node: they go through the room's inbox like
// the chat commands, answer in plain text or JSON, and say at once when no node of the room is alive.
import { beforeAll, describe, expect, it } from "vitest";
import type { NodeProcess } from "../support/engine-cluster.js";
import {
  cli,
  createTarget,
  killAll,
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

describe("CLI decisions", () => {
  it("confirm, reject and retry a run as the chat would, with --json, exit 1 when refused and 3 with no live node", async () => {
    const target = await createTarget("sqlite", "decisions");
    let node: NodeProcess | null = null;
    let failed = true;
    try {
      const extra = `[actions.fail]\nargv = ["false"]\ntimeout = "10s"\nkill_grace = "300ms"\n`;
      const config = writeNodeConfig(target, { nodeId: "solo", extra });
      const run = (args: string[]) => cli([...args, "--config", config], { cwd: target.dir });
      const hello = writeDag(target, {
        id: "hello",
        tasks: [{ id: "a", action: "echo", args: { message: "hi" } }],
      });
      const dropped = writeDag(target, {
        id: "dropped",
        tasks: [{ id: "a", action: "echo", args: { message: "x" } }],
      });
      const broken = writeDag(target, {
        id: "broken",
        tasks: [
          { id: "ok", action: "echo", args: { message: "fine" } },
          { id: "bad", action: "fail", needs: ["ok"] },
        ],
      });

      // No node yet: said at once, exit 3, and the command stays queued.
      const early = await run(["confirm", "nothing"]);
      expect(early.code, early.stderr).toBe(3);
      expect(early.stderr).toContain("no node of room local has a heartbeat; the command is queued");

      node = startNode(target, config, "solo");
      const store = await target.open();
      try {
        await untilNodeBeats(store);
        for (const file of [hello, dropped, broken]) {
          const submitted = await run(["submit", file]);
          expect(submitted.code, submitted.stderr).toBe(0);
          // The CLI's own words: how to confirm on the CLI, with the hash; no chat command, no reaction.
          expect(submitted.stderr).toMatch(/It awaits confirmation .*: dagbot confirm \S+ [0-9a-f]{12}/);
          expect(submitted.stderr).not.toContain("!dag");
          expect(submitted.stderr).not.toContain("✅");
        }
        expect((await store.getRun("local", "hello"))?.status).toBe("pending");

        const confirmed = await run(["confirm", "hello"]);
        expect(confirmed.code, confirmed.stdout + confirmed.stderr).toBe(0);
        // Terminal text: no Markdown code marks, no chat verbs to type.
        expect(confirmed.stdout).not.toContain("`");
        expect(confirmed.stdout).not.toContain("!dag");
        expect(confirmed.stdout).toContain("hello");
        await waitForRunStatus(store, "hello", (s) => s === "succeeded");
        // Confirming again is "already", still exit 0; rejecting a running one is refused: exit 1.
        expect((await run(["confirm", "hello"])).code).toBe(0);
        const late = await run(["reject", "hello", "--json"]);
        expect(late.code).toBe(1);
        expect(JSON.parse(late.stdout)).toMatchObject({
          ok: false,
          answer: "decision",
          result: "wrong-status",
        });

        // A finished DAG runs again by name: `dagbot trigger` (`!dag run`) makes hello.2, hello.3, …
        const triggered = await run(["trigger", "hello", "--json"]);
        expect(triggered.code, triggered.stderr).toBe(0);
        expect(JSON.parse(triggered.stdout)).toMatchObject({ ok: true, dagId: "hello.2", status: "pending" });
        const started = await run(["trigger", "hello.2", "--confirm", "--json"]);
        expect(started.code, started.stderr).toBe(0);
        const startedAnswer = JSON.parse(started.stdout) as { status: string; message: string };
        expect(startedAnswer).toMatchObject({ ok: true, dagId: "hello.3", confirmed: { result: "done" } });
        // It was confirmed: the answer says so, not that it awaits confirmation.
        expect(startedAnswer.status).not.toBe("pending");
        expect(startedAnswer.message).not.toMatch(/awaits confirmation/);
        expect(startedAnswer.message).toMatch(/confirmed hello.3; it started/);
        await waitForRunStatus(store, "hello.3", (s) => s === "succeeded");
        const sameTasks = (await store.getRun("local", "hello.3"))!.dag.tasks;
        expect(sameTasks).toEqual((await store.getRun("local", "hello"))!.dag.tasks);
        const refused = await run(["trigger", "nosuch"]);
        expect(refused.code).toBe(1);
        expect(refused.stdout).toContain("No run named nosuch");
        // Not the usage of another command (`dagbot run` is the local runner).
        expect(refused.stdout + refused.stderr).not.toMatch(/usage|dagbot run\b/);

        const rejected = await run(["reject", "dropped", "--json"]);
        expect(rejected.code, rejected.stderr).toBe(0);
        expect(JSON.parse(rejected.stdout)).toMatchObject({ ok: true, dagId: "dropped", status: "rejected" });

        // A hash that is not the run's: refused, nothing starts.
        const hash = (await store.getRun("local", "broken"))!.hash;
        const wrongHash = await run(["confirm", "broken", "00000000", "--json"]);
        expect(wrongHash.code).toBe(1);
        // Its own answer, naming the hash the run has and how to confirm that one.
        expect(JSON.parse(wrongHash.stdout)).toMatchObject({
          ok: false,
          answer: "hash-mismatch",
          given: "00000000",
        });
        expect(JSON.parse(wrongHash.stdout).message).toContain(`has content hash ${hash.slice(0, 12)}`);
        expect(JSON.parse(wrongHash.stdout).message).toContain(`dagbot confirm broken ${hash.slice(0, 12)}`);
        expect((await store.getRun("local", "broken"))?.status).toBe("pending");
        expect((await run(["confirm", "broken", hash.slice(0, 12)])).code).toBe(0);
        await waitForRunStatus(store, "broken", (s) => s === "failed");

        const retried = await run(["retry", "broken", "--json"]);
        expect(retried.code, retried.stderr).toBe(0);
        const answer = JSON.parse(retried.stdout) as {
          ok: boolean;
          answer: string;
          dagId: string;
          runId: string;
        };
        expect(answer).toMatchObject({ ok: true, answer: "retried" });
        expect(answer.dagId).not.toBe("broken");
        expect((await store.getRunById(answer.runId))?.dagId).toBe(answer.dagId);
        expect((await store.listTasks(answer.runId)).map((t) => t.taskId)).toEqual(["bad"]);

        const unknown = await run(["retry", "nosuch"]);
        expect(unknown.code).toBe(1);
        expect(unknown.stdout).toMatch(/No run named nosuch/);
        const bad = await run(["confirm", "a b"]);
        expect(bad.code).toBe(2);
        // Every verb's subcommand answers as JSON: cancel too.
        const cancelMissing = await run(["cancel", "nosuch", "--json"]);
        expect(cancelMissing.code).toBe(1);
        expect(JSON.parse(cancelMissing.stdout)).toMatchObject({
          ok: false,
          answer: "not-found",
          dagId: "nosuch",
        });
      } finally {
        await store.close();
      }
      failed = false;
    } finally {
      if (node !== null) await killAll([node]);
      await target.cleanup(failed);
    }
    // A dozen CLI processes one after another, each starting Node: 10–15 s alone, past 30 s under load.
  }, 90_000);
});
