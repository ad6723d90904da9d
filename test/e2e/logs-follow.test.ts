// `dagbot logs --follow` like `tail -f`, against a real node: the worker writes a running task's
// output so far about once a second, and the follower prints each new line before the task ends.
import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import type { NodeProcess, StoreKind } from "../support/engine-cluster.js";
import {
  CLI,
  cli,
  createTarget,
  killAll,
  requireBuild,
  startNode,
  writeDag,
  writeNodeConfig,
} from "../support/engine-cluster.js";
import { untilNodeBeats, waitFor } from "../support/store-wait.js";

beforeAll(() => {
  requireBuild();
});

const TICKS = 10;

describe.each<StoreKind>(["sqlite", "postgres"])("dagbot logs --follow on %s", (kind) => {
  it("prints a running task's lines as they come, each once, and exits with the task's end", async () => {
    const target = await createTarget(kind, "logs-follow");
    let node: NodeProcess | null = null;
    let failed = true;
    try {
      // Ten lines 400 ms apart: the task runs about four seconds.
      const ticker = join(target.dir, "ticker.mjs");
      writeFileSync(
        ticker,
        `let i = 0;\nconst t = setInterval(() => { i += 1; console.log("tick " + i); if (i === ${TICKS}) clearInterval(t); }, 400);\n`,
      );
      const extra =
        `[actions.ticker]\nargv = [${JSON.stringify(process.execPath)}, ${JSON.stringify(ticker)}]\n` +
        `timeout = "30s"\nkill_grace = "300ms"\noutput_limit = "1KiB"\n`;
      const config = writeNodeConfig(target, { nodeId: "solo", extra });
      node = startNode(target, config, "solo");
      const store = await target.open();
      try {
        await untilNodeBeats(store);
        const dag = writeDag(target, { id: "ticks", tasks: [{ id: "t", action: "ticker" }] });
        const submitted = await cli(["submit", dag, "--config", config, "--confirm"], { cwd: target.dir });
        expect(submitted.code, submitted.stderr).toBe(0);

        const run = await waitFor(
          "the run",
          () => store.getRun("local", "ticks"),
          (r) => r !== null,
          {
            timeoutMs: 10_000,
            intervalMs: 25,
          },
        );
        // Follow as a real process and look at the store the moment its first line arrives.
        let stdout = "";
        let stderr = "";
        const child = spawn(process.execPath, [CLI, "logs", "ticks", "t", "--follow", "--config", config], {
          cwd: target.dir,
          stdio: ["ignore", "pipe", "pipe"],
        });
        const exit = new Promise<number | null>((done) => child.on("exit", (code) => done(code)));
        child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
        const firstLine = new Promise<string>((seen) => {
          child.stdout.on("data", (c: Buffer) => {
            stdout += c.toString();
            seen(stdout);
          });
        });
        const first = await firstLine;
        const statusAtFirstLine = (await store.getTask(run!.runId, "t"))!.status;
        // The first lines came while the task was still running, not all at its end.
        expect(statusAtFirstLine).toBe("running");
        expect(first).toMatch(/^tick 1\n/);
        expect(first).not.toContain(`tick ${TICKS}\n`);

        // Without --follow, a running task shows its output so far, said to be partial.
        const soFar = await cli(["logs", "ticks", "t", "--config", config], { cwd: target.dir });
        expect(soFar.code, soFar.stderr).toBe(0);
        expect(soFar.stdout).toMatch(/^tick 1\n/);
        expect(soFar.stderr).toMatch(/: running/);
        expect(soFar.stderr).toContain("(its output so far; --follow shows the rest)");

        expect(await exit).toBe(0);
        const expected = Array.from({ length: TICKS }, (_, i) => `tick ${i + 1}\n`).join("");
        expect(stdout).toBe(expected);
        expect(stderr).toMatch(/task t of ticks .*: running/);
        expect(stderr.trimEnd().split("\n").at(-1)).toMatch(/task t of ticks .*: succeeded, exit 0/);
        expect(await store.getTask(run!.runId, "t")).toMatchObject({
          status: "succeeded",
          output: expected,
          outputBytes: expected.length,
        });
      } finally {
        await store.close();
      }
      failed = false;
    } finally {
      if (node !== null) await killAll([node]);
      await target.cleanup(failed);
    }
  });
});

describe("dagbot logs of an output longer than output_limit", () => {
  it("prints the kept tail (stdout and stderr as they came, merged) and says on stderr that the beginning was cut", async () => {
    const target = await createTarget("sqlite", "logs-cut");
    let node: NodeProcess | null = null;
    let failed = true;
    try {
      // 3000 bytes on stdout, then one line on stderr, then one more on stdout: 1 KiB is kept.
      const writer = join(target.dir, "writer.mjs");
      writeFileSync(
        writer,
        `process.stdout.write("x".repeat(2999) + "\\n");\n` +
          `setTimeout(() => { process.stderr.write("on stderr\\n"); ` +
          `setTimeout(() => process.stdout.write("last on stdout\\n"), 100); }, 100);\n`,
      );
      const extra =
        `[actions.writer]\nargv = [${JSON.stringify(process.execPath)}, ${JSON.stringify(writer)}]\n` +
        `timeout = "30s"\nkill_grace = "300ms"\noutput_limit = "1KiB"\n`;
      const config = writeNodeConfig(target, { nodeId: "solo", extra });
      node = startNode(target, config, "solo");
      const store = await target.open();
      try {
        await untilNodeBeats(store);
        const dag = writeDag(target, { id: "long", tasks: [{ id: "w", action: "writer" }] });
        const submitted = await cli(["submit", dag, "--config", config, "--confirm"], { cwd: target.dir });
        expect(submitted.code, submitted.stderr).toBe(0);
        await waitFor(
          "the run to end",
          () => store.getRun("local", "long"),
          (r) => r !== null && r.status === "succeeded",
          { timeoutMs: 20_000, intervalMs: 50 },
        );
        const total = 3000 + "on stderr\n".length + "last on stdout\n".length;
        const shown = await cli(["logs", "long", "w", "--config", config], { cwd: target.dir });
        expect(shown.code, shown.stderr).toBe(0);
        expect(shown.stdout.length).toBe(1024);
        // Both streams, in the order they were written.
        expect(shown.stdout.endsWith("x\non stderr\nlast on stdout\n")).toBe(true);
        expect(shown.stderr).toContain(
          `(the first ${total - 1024} bytes of its ${total} were not kept (output_limit): this is the last 1024)`,
        );
        const json = await cli(["logs", "long", "w", "--config", config, "--json"], { cwd: target.dir });
        expect(JSON.parse(json.stdout)).toMatchObject({ outputBytes: total, droppedBytes: total - 1024 });
      } finally {
        await store.close();
      }
      failed = false;
    } finally {
      if (node !== null) await killAll([node]);
      await target.cleanup(failed);
    }
  });
});
