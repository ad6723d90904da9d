/** The process executor against real processes: exit codes, timeouts, group kills, output tails, hostile arguments. */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { createProcessExecutor, outputSoFar, pickBaseEnv } from "../../src/adapters/exec/process-executor.js";
import type { ActionDefinition, ExecRequest, OutputSoFar } from "../../src/ports/executor.js";

const fixtures = fileURLToPath(new URL("../support/exec-fixtures/", import.meta.url));
const node = process.execPath;
const scratch = mkdtempSync(join(tmpdir(), "dagbot-exec-"));
const pidFiles: string[] = [];
afterAll(() => {
  // If a kill assertion failed, do not leave the fixture's TERM-proof sleepers behind.
  for (const file of pidFiles.filter((f) => existsSync(f))) {
    for (const pid of readFileSync(file, "utf8").trim().split("\n").map(Number)) {
      if (pid > 0 && isRunning(pid)) process.kill(pid, "SIGKILL");
    }
  }
  rmSync(scratch, { recursive: true, force: true });
});

const executor = createProcessExecutor({ baseEnv: pickBaseEnv(process.env) });
const identity = { DAGBOT_RUN_ID: "run-1", DAGBOT_TASK_ID: "task-1", DAGBOT_ATTEMPT: 1 };

function action(partial: Partial<ActionDefinition> & Pick<ActionDefinition, "argv">): ActionDefinition {
  return {
    name: "test",
    args: {},
    cwd: null,
    env: {},
    timeoutMs: 20_000,
    outputLimitBytes: 64 * 1024,
    killGraceMs: 1_000,
    ...partial,
  };
}

function run(def: ActionDefinition, args: ExecRequest["args"] = {}, extra: Partial<ExecRequest> = {}) {
  return executor.run({ action: def, args, env: identity, ...extra });
}

/** True while the process exists and is not a zombie (a zombie holds no resources and runs nothing). */
function isRunning(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
}

async function waitUntil(what: string, check: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe("process executor", () => {
  it("reports success with exit code 0 and the output", async () => {
    const result = await run(action({ argv: ["echo", "{message}"], args: { message: { pattern: ".*" } } }), {
      message: "hello world",
    });
    expect(result).toMatchObject({
      outcome: "succeeded",
      exitCode: 0,
      signal: null,
      output: "hello world\n",
    });
    expect(result.outputTruncated).toBe(false);
    expect(result.totalOutputBytes).toBe(12);
    expect(result.error).toBeUndefined();
  });

  it("reports a nonzero exit as failed and keeps stdout and stderr", async () => {
    const result = await run(action({ argv: ["sh", "-c", "echo out; echo err >&2; exit 3"] }));
    expect(result.outcome).toBe("failed");
    expect(result.exitCode).toBe(3);
    expect(result.error).toBe("exited with status 3");
    expect(result.output).toContain("out\n");
    expect(result.output).toContain("err\n");
  });

  it("fails cleanly when the executable does not exist or the cwd is missing", async () => {
    const missing = await run(action({ argv: ["dagbot-no-such-program-xyz"] }));
    expect(missing).toMatchObject({ outcome: "failed", exitCode: null });
    expect(missing.error).toBe('executable "dagbot-no-such-program-xyz" not found');

    const badCwd = await run(action({ argv: ["true"], cwd: join(scratch, "nope") }));
    expect(badCwd.outcome).toBe("failed");
    expect(badCwd.error).toContain("does not exist");
  });

  it("fails cleanly when the program is not executable or cannot be spawned", async () => {
    const script = join(scratch, "not-executable.sh");
    writeFileSync(script, "#!/bin/sh\necho hi\n", { mode: 0o644 });
    const denied = await run(action({ argv: [script] }));
    expect(denied.outcome).toBe("failed");
    expect(denied.error).toBe(`executable "${script}" is not executable (permission denied)`);

    const nul = await executor.run({
      action: action({ argv: ["true"] }),
      args: {},
      env: { ...identity, DAGBOT_TASK_ID: "a\0b" },
    });
    expect(nul.outcome).toBe("failed");
    expect(nul.error).toMatch(/^could not start "true": /);
  });

  it("stops what a finished action left running in its group, without changing its outcome", async () => {
    const pidFile = join(scratch, "pids-leftover");
    pidFiles.push(pidFile);
    const result = await run(
      action({ argv: ["sh", "-c", 'sleep 1000 & echo $! > "$0"; echo started', pidFile], killGraceMs: 200 }),
    );
    expect(result).toMatchObject({ outcome: "succeeded", exitCode: 0, output: "started\n" });
    const [pid] = readFileSync(pidFile, "utf8").trim().split("\n").map(Number);
    await waitUntil("the leftover child is gone", () => !isRunning(pid!));
  });

  it("finishes even when an escaped process keeps its output pipe open", async () => {
    const pidFile = join(scratch, "pids-escaped");
    pidFiles.push(pidFile);
    const result = await run(
      action({
        argv: ["sh", "-c", 'setsid sleep 1000 & echo $! > "$0"; echo started', pidFile],
        killGraceMs: 100,
      }),
    );
    expect(result).toMatchObject({ outcome: "succeeded", exitCode: 0, output: "started\n" });
  });

  it("gives the action DAGBOT_* ids, its own env and a minimal base env, never the node's secrets", async () => {
    const secretive = createProcessExecutor({
      baseEnv: pickBaseEnv({ ...process.env, DAGBOT_ACCESS_TOKEN: "syt_secret", PGPASSWORD: "pw" }),
    });
    const result = await secretive.run({
      action: action({ argv: [node, join(fixtures, "print-env.mjs")], env: { GREETING: "hi" } }),
      args: {},
      env: { DAGBOT_RUN_ID: "backup_daily", DAGBOT_TASK_ID: "dump", DAGBOT_ATTEMPT: 3 },
    });
    expect(result.outcome).toBe("succeeded");
    const env = JSON.parse(result.output) as Record<string, string>;
    expect(env).toMatchObject({
      DAGBOT_RUN_ID: "backup_daily",
      DAGBOT_TASK_ID: "dump",
      DAGBOT_ATTEMPT: "3",
      GREETING: "hi",
      PATH: process.env.PATH,
    });
    expect(env.DAGBOT_ACCESS_TOKEN).toBeUndefined();
    expect(env.PGPASSWORD).toBeUndefined();
    const allowed = new Set([
      "PATH",
      "HOME",
      "USER",
      "LOGNAME",
      "LANG",
      "LC_ALL",
      "TZ",
      "TMPDIR",
      "GREETING",
    ]);
    const unexpected = Object.keys(env).filter((key) => !key.startsWith("DAGBOT_") && !allowed.has(key));
    expect(unexpected).toEqual([]);
  });

  it("kills a TERM-ignoring action and its children with SIGKILL at its timeout", async () => {
    const pidFile = join(scratch, "pids");
    pidFiles.push(pidFile);
    const result = await run(
      action({ argv: ["sh", join(fixtures, "ignore-term.sh"), pidFile], killGraceMs: 300 }),
      {},
      { timeoutMs: 1_500 },
    );
    expect(result.outcome).toBe("timed_out");
    expect(result.signal).toBe("SIGKILL");
    expect(result.exitCode).toBeNull();
    expect(result.error).toBe("timed out after 1.5s");
    expect(result.output).toBe("ready\n");
    const pids = readFileSync(pidFile, "utf8").trim().split("\n").map(Number);
    expect(pids).toHaveLength(3);
    await waitUntil("every process of the group is gone", () => pids.every((pid) => !isRunning(pid)));
  });

  it("keeps only the configured tail of 100 MB of output", async () => {
    const limit = 1000;
    const total = 100 * 1024 * 1024;
    const result = await run(
      action({
        argv: ["sh", join(fixtures, "flood.sh"), "{bytes}"],
        args: { bytes: { pattern: "[0-9]+" } },
        outputLimitBytes: limit,
      }),
      { bytes: total },
    );
    expect(result.outcome).toBe("succeeded");
    expect(result.totalOutputBytes).toBe(total + "<END>".length);
    expect(result.outputTruncated).toBe(true);
    expect(Buffer.byteLength(result.output)).toBeLessThanOrEqual(limit);
    expect(result.output).toBe("x".repeat(limit - 5) + "<END>");
  });

  it("reports the output so far while the action runs, only when it grew, never after it ended", async () => {
    const seen: Array<OutputSoFar & { afterEnd: boolean }> = [];
    let ended = false;
    // Five lines 300 ms apart, then a quiet 600 ms: reports every 100 ms only when something was written.
    const script = "for i in 1 2 3 4 5; do echo line $i; sleep 0.3; done; sleep 0.6";
    const result = await run(
      action({ argv: ["sh", "-c", script] }),
      {},
      {
        outputEveryMs: 100,
        onOutput: (soFar) => seen.push({ ...soFar, afterEnd: ended }),
      },
    );
    ended = true;
    expect(result.output).toBe("line 1\nline 2\nline 3\nline 4\nline 5\n");
    expect(seen.length).toBeGreaterThanOrEqual(2);
    expect(seen.length).toBeLessThanOrEqual(5);
    expect(seen.every((s) => !s.afterEnd && s.totalBytes === Buffer.byteLength(s.output))).toBe(true);
    expect(seen.map((s) => s.output.split("\n").length - 1)).toEqual(
      [...seen.map((s) => s.output.split("\n").length - 1)].sort((a, b) => a - b),
    );
    expect(new Set(seen.map((s) => s.totalBytes)).size).toBe(seen.length);
    expect(result.output.startsWith(seen[seen.length - 1]!.output)).toBe(true);
  });

  it("reports no output so far for an action that ends within the first interval", async () => {
    let calls = 0;
    const result = await run(
      action({ argv: ["echo", "quick"] }),
      {},
      {
        outputEveryMs: 1_000,
        onOutput: () => (calls += 1),
      },
    );
    expect(result.output).toBe("quick\n");
    expect(calls).toBe(0);
  });

  it("the output so far is whole characters, ending exactly at its byte count", () => {
    const text = "ab€"; // € is three bytes
    const bytes = Buffer.from(text);
    // The last character not yet completely written: left for the next report.
    expect(outputSoFar(bytes.subarray(0, 4).toString("base64"), 4)).toEqual({ output: "ab", totalBytes: 2 });
    expect(outputSoFar(bytes.toString("base64"), 5)).toEqual({ output: "ab€", totalBytes: 5 });
    // A tail that starts inside a character (more was written than kept) drops its continuation bytes.
    expect(outputSoFar(bytes.subarray(3).toString("base64"), 105)).toEqual({ output: "", totalBytes: 105 });
    expect(outputSoFar(Buffer.from("é!").subarray(1).toString("base64"), 50)).toEqual({
      output: "!",
      totalBytes: 50,
    });
  });

  it("kills the action when its AbortSignal fires and reports it as killed with the reason", async () => {
    const controller = new AbortController();
    const pending = run(action({ argv: ["sleep", "30"] }), {}, { signal: controller.signal });
    controller.abort("lease lost");
    const result = await pending;
    expect(result.outcome).toBe("killed");
    expect(result.signal).toBe("SIGTERM");
    expect(result.error).toBe("killed: lease lost");

    const early = new AbortController();
    early.abort("canceled");
    const never = await run(
      action({ argv: ["touch", join(scratch, "early")] }),
      {},
      { signal: early.signal },
    );
    expect(never.outcome).toBe("killed");
    expect(existsSync(join(scratch, "early"))).toBe(false);
  });

  it("escalates an abort to SIGKILL when the action ignores SIGTERM", async () => {
    const controller = new AbortController();
    const pidFile = join(scratch, "pids-abort");
    pidFiles.push(pidFile);
    const pending = run(
      action({ argv: ["sh", join(fixtures, "ignore-term.sh"), pidFile], killGraceMs: 200 }),
      {},
      { signal: controller.signal },
    );
    await waitUntil("the fixture wrote its pids", () => {
      try {
        return readFileSync(pidFile, "utf8").trim().split("\n").length === 3;
      } catch {
        return false;
      }
    });
    controller.abort();
    const result = await pending;
    expect(result).toMatchObject({ outcome: "killed", signal: "SIGKILL", error: "killed: aborted" });
    const pids = readFileSync(pidFile, "utf8").trim().split("\n").map(Number);
    await waitUntil("every process of the group is gone", () => pids.every((pid) => !isRunning(pid)));
  });

  describe("hostile arguments", () => {
    const marker = join(scratch, "pwned");
    const hostile = [
      "; rm -rf /",
      `$(touch ${marker})`,
      `\`touch ${marker}\``,
      `x && touch ${marker}`,
      `| touch ${marker}`,
      "line one\nline two\r\n",
      "'\"\\",
      "*",
      "--version",
      "{other}",
      "é ☃ \u{1F600}",
      "A".repeat(10 * 1024),
    ];
    const echoArgv = action({
      name: "echo_argv",
      argv: [node, join(fixtures, "print-argv.mjs"), "{value}", "--db={value}"],
      // "--version" is among the values: this action says its program takes a leading "-" as data.
      args: { value: { pattern: "[\\s\\S]*", allowLeadingDash: true } },
    });

    it.each(hostile.map((value) => [JSON.stringify(value).slice(0, 40), value]))(
      "passes %s as one literal argv entry",
      async (_label, value) => {
        const result = await run(echoArgv, { value });
        expect(result.outcome).toBe("succeeded");
        expect(JSON.parse(result.output)).toEqual([value, `--db=${value}`]);
        expect(existsSync(marker)).toBe(false);
      },
    );

    it("refuses values that fail a strict pattern, naming the argument, without starting anything", async () => {
      const strict = action({
        name: "echo",
        argv: ["touch", marker, "{message}"],
        args: { message: { pattern: "[^\\n]{0,200}" } },
      });
      for (const value of ["line one\nline two", "A".repeat(10 * 1024)]) {
        const result = await run(strict, { message: value });
        expect(result.outcome).toBe("failed");
        expect(result.exitCode).toBeNull();
        expect(result.error).toBe('argument "message" does not match its pattern [^\\n]{0,200}');
      }
      const db = action({
        name: "pg_dump",
        argv: ["touch", marker, "{db}"],
        args: { db: { pattern: "^[a-z]+$" } },
      });
      for (const value of ["; rm -rf /", `$(touch ${marker})`, "app\n"]) {
        const result = await run(db, { db: value });
        expect(result.error).toBe('argument "db" does not match its pattern ^[a-z]+$');
      }
      expect(existsSync(marker)).toBe(false);
    });
  });
});
