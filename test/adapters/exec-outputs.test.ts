/**
 * The DAGBOT_OUTPUT file with real processes: each attempt gets a fresh file of its own
 * in a private directory, read back after a success only, within its size, never through a link
 * or a pipe the action put in its place, and removed afterwards whatever happened; secrets are
 * masked in what was published as in the output.
 */
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createProcessExecutor, pickBaseEnv } from "../../src/adapters/exec/process-executor.js";
import { maskingExecutor } from "../../src/app/masking-executor.js";
import { oversizeProblem, type OversizeOutputFile } from "../../src/domain/outputs.js";
import { secretMasker } from "../../src/domain/secret-mask.js";
import type { ActionDefinition, ExecResult } from "../../src/ports/executor.js";

const parent = mkdtempSync(join(tmpdir(), "dagbot-exec-outputs-"));
afterAll(() => rmSync(parent, { recursive: true, force: true }));

const executor = createProcessExecutor({ baseEnv: pickBaseEnv(process.env), outputDir: parent });
const identity = { DAGBOT_RUN_ID: "run-1", DAGBOT_TASK_ID: "build", DAGBOT_ATTEMPT: 1 };

function sh(script: string): ActionDefinition {
  return {
    name: "sh",
    argv: ["sh", "-c", script],
    args: {},
    cwd: null,
    env: {},
    timeoutMs: 20_000,
    outputLimitBytes: 64 * 1024,
    killGraceMs: 500,
  };
}

const run = (script: string, exec = executor): Promise<ExecResult> =>
  exec.run({ action: sh(script), args: {}, env: identity });

describe("DAGBOT_OUTPUT", () => {
  it("is a fresh empty file in a private directory; what the action appended comes back after a success, and the file is gone", async () => {
    const r = await run(
      'ls -ld "$(dirname "$DAGBOT_OUTPUT")" | cut -c1-10; wc -c < "$DAGBOT_OUTPUT"; echo "$DAGBOT_OUTPUT"; echo "version=1.2.3" >> "$DAGBOT_OUTPUT"; printf "note=a b\\n" >> "$DAGBOT_OUTPUT"',
    );
    expect(r.outcome).toBe("succeeded");
    const [mode, size, path] = r.output.trim().split("\n");
    expect(mode).toBe("drwx------");
    expect(size?.trim()).toBe("0");
    expect(path).toMatch(new RegExp(`^${parent}/dagbot-output-[^/]+/outputs$`));
    expect(r.published).toEqual({ text: "version=1.2.3\nnote=a b\n" });
    expect(existsSync(path!)).toBe(false);
    expect(readdirSync(parent)).toEqual([]);
  });

  it("is not given to a task that declares no outputs: no variable, no file made, nothing read", async () => {
    const r = await executor.run({
      action: sh(`echo "[\${DAGBOT_OUTPUT-unset}]"; ls -A "${parent}" | wc -l`),
      args: {},
      env: identity,
      publishes: false,
    });
    expect(r.outcome).toBe("succeeded");
    // While the action runs, the node's output directory holds nothing for it.
    expect(
      r.output
        .trim()
        .split("\n")
        .map((l) => l.trim()),
    ).toEqual(["[unset]", "0"]);
    expect(r.published).toBeUndefined();
    expect(readdirSync(parent)).toEqual([]);
  });

  it("each attempt has its own file", async () => {
    const a = await run('echo "$DAGBOT_OUTPUT"');
    const b = await run('echo "$DAGBOT_OUTPUT"');
    expect(a.output).not.toBe(b.output);
  });

  it("is not read after a failure, and still removed", async () => {
    const r = await run('echo "version=1.2.3" >> "$DAGBOT_OUTPUT"; echo "$DAGBOT_OUTPUT"; exit 3');
    expect(r.outcome).toBe("failed");
    expect(r.published).toBeUndefined();
    expect(existsSync(r.output.trim())).toBe(false);
    expect(readdirSync(parent)).toEqual([]);
  });

  it("refuses a file over 64 KiB, a link or a pipe in its place, and bytes that are not UTF-8; a removed file published nothing", async () => {
    const big = await run('head -c 70000 /dev/zero | tr "\\0" a >> "$DAGBOT_OUTPUT"');
    expect(big.published).toEqual({ oversize: { bytes: 70000, lines: {}, complete: true } });
    const link = await run('rm "$DAGBOT_OUTPUT"; ln -s /etc/passwd "$DAGBOT_OUTPUT"');
    expect(link.published).toEqual({ problem: "$DAGBOT_OUTPUT was replaced by a symbolic link" });
    const fifo = await run('rm "$DAGBOT_OUTPUT"; mkfifo "$DAGBOT_OUTPUT"');
    expect(fifo.published).toEqual({ problem: "$DAGBOT_OUTPUT is no longer a regular file" });
    const binary = await run('printf "v=\\377\\n" >> "$DAGBOT_OUTPUT"');
    expect(binary.published).toEqual({ problem: "$DAGBOT_OUTPUT is not UTF-8 text" });
    const gone = await run('rm "$DAGBOT_OUTPUT"');
    expect(gone.published).toEqual({ text: "" });
    expect(readdirSync(parent)).toEqual([]);
  });

  it("counts the lines of a file over 64 KiB by name, so a 10,000-item list is refused for its count, not its size", async () => {
    const r = await run(
      'i=0; while [ $i -lt 10000 ]; do echo "hosts=host-$i.example.org"; i=$((i+1)); done >> "$DAGBOT_OUTPUT"; echo "note=x" >> "$DAGBOT_OUTPUT"',
    );
    expect(r.outcome).toBe("succeeded");
    expect(r.published).toMatchObject({ oversize: { lines: { hosts: 10000, note: 1 }, complete: true } });
    const declared = { hosts: { pattern: "[a-z0-9.-]+", list: true as const, maxItems: 100 }, note: "x" };
    expect(
      oversizeProblem("discover", declared, (r.published as { oversize: OversizeOutputFile }).oversize),
    ).toBe('list output "hosts" of task discover has 10000 items; at most 100 (its max_items)');
    expect(readdirSync(parent)).toEqual([]);
  });

  it("is masked of the node's secrets, as the output is", async () => {
    const secret = `s3cr3t-${Math.random().toString(36).slice(2, 10)}`;
    const masked = maskingExecutor(executor, secretMasker([secret]));
    const r = await masked.run({
      action: { ...sh('echo "token=$T" >> "$DAGBOT_OUTPUT"'), env: { T: secret } },
      args: {},
      env: identity,
    });
    expect(r.published).toEqual({ text: `token=${"*".repeat(secret.length)}\n` });
    expect(JSON.stringify(r)).not.toContain(secret);
  });
});
