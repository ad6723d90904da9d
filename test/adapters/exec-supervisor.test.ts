/**
 * The action supervisor against real processes: the claim's deadline stops the whole group (even
 * with nobody asking), moves with renewals, forbids a start once it has passed, and a supervisor
 * killed from outside does not leave its action behind.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { createProcessExecutor, pickBaseEnv } from "../../src/adapters/exec/process-executor.js";
import type { ActionDefinition, ExecClaim } from "../../src/ports/executor.js";
import { descendantsOf, isRunning } from "../support/process-tree.js";
import { waitFor } from "../support/store-wait.js";

const fixtures = fileURLToPath(new URL("../support/exec-fixtures/", import.meta.url));
const scratch = mkdtempSync(join(tmpdir(), "dagbot-supervisor-"));
const started: number[] = [];
afterAll(() => {
  for (const pid of started) if (isRunning(pid)) process.kill(pid, "SIGKILL");
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
    timeoutMs: 60_000,
    outputLimitBytes: 64 * 1024,
    killGraceMs: 200,
    ...partial,
  };
}

/** A claim whose deadline is `ms` from now and that a test can renew. */
function claim(ms: number): ExecClaim & { renew(ms: number): void } {
  let deadline = performance.now() + ms;
  const listeners = new Set<() => void>();
  return {
    msLeft: () => deadline - performance.now(),
    onMove(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    renew(next) {
      deadline = performance.now() + next;
      for (const l of listeners) l();
    },
  };
}

function pids(file: string): number[] {
  return existsSync(file) ? readFileSync(file, "utf8").trim().split("\n").filter(Boolean).map(Number) : [];
}

describe("action supervisor", () => {
  it("stops the whole group, TERM-proof children included, by the claim's deadline when nobody renews it", async () => {
    const pidFile = join(scratch, "deadline");
    const c = claim(1_500);
    const pending = executor.run({
      action: action({ argv: ["sh", join(fixtures, "ignore-term.sh"), pidFile], killGraceMs: 300 }),
      args: {},
      env: identity,
      claim: c,
    });
    await waitFor(
      "the fixture's pids",
      () => pids(pidFile),
      (p) => p.length === 3,
    );
    started.push(...pids(pidFile));
    const result = await pending;
    const late = -c.msLeft();
    expect(result).toMatchObject({ outcome: "expired", signal: "SIGKILL" });
    expect(result.error).toBe("stopped: the claim's deadline passed before it ended");
    expect(pids(pidFile).filter(isRunning)).toEqual([]);
    console.log(`[supervisor] group gone ${Math.round(late)} ms after the claim's deadline`);
  });

  it("keeps the action running while renewals move the deadline", async () => {
    const c = claim(800);
    const renewer = setInterval(() => c.renew(800), 200);
    try {
      const result = await executor.run({
        action: action({ argv: ["sleep", "2"] }),
        args: {},
        env: identity,
        claim: c,
      });
      expect(result).toMatchObject({ outcome: "succeeded", exitCode: 0 });
    } finally {
      clearInterval(renewer);
    }
  });

  it("does not start an action whose claim has less time left than its kill_grace", async () => {
    const marker = join(scratch, "never");
    const result = await executor.run({
      action: action({ argv: ["touch", marker], killGraceMs: 500 }),
      args: {},
      env: identity,
      claim: claim(400),
    });
    expect(result).toMatchObject({ outcome: "expired", exitCode: null });
    expect(result.error).toBe("not started: the claim's deadline had passed");
    expect(existsSync(marker)).toBe(false);
  });

  it("a supervisor killed with SIGKILL does not leave its action behind", async () => {
    const pidFile = join(scratch, "orphan");
    const pending = executor.run({
      action: action({ argv: ["sh", join(fixtures, "ignore-term.sh"), pidFile] }),
      args: {},
      env: identity,
    });
    await waitFor(
      "the fixture's pids",
      () => pids(pidFile),
      (p) => p.length === 3,
    );
    started.push(...pids(pidFile));
    const supervisor = descendantsOf(process.pid).find((pid) =>
      readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("action-supervisor"),
    );
    expect(supervisor).toBeDefined();
    process.kill(supervisor!, "SIGKILL");
    const result = await pending;
    expect(result.outcome).toBe("failed");
    expect(result.error).toBe("the action's supervisor died (SIGKILL)");
    await waitFor(
      "the group gone",
      () => pids(pidFile).filter(isRunning),
      (alive) => alive.length === 0,
      {
        timeoutMs: 5_000,
      },
    );
  });

  it("lets its supervisor go once idle, and starts a new one for the next action", async () => {
    const quick = createProcessExecutor({ baseEnv: pickBaseEnv(process.env), supervisorIdleMs: 200 });
    const parentOf = async (): Promise<number> => {
      // The action's parent is the supervisor that started it.
      const r = await quick.run({
        action: action({ argv: ["sh", "-c", "echo $PPID"] }),
        args: {},
        env: identity,
      });
      expect(r.outcome).toBe("succeeded");
      return Number(r.output.trim());
    };
    const first = await parentOf();
    expect(isRunning(first)).toBe(true);
    // Busy back to back: the same supervisor.
    expect(await parentOf()).toBe(first);
    await waitFor(
      "the idle supervisor gone",
      () => isRunning(first),
      (running) => !running,
      { timeoutMs: 5_000 },
    );
    const second = await parentOf();
    expect(second).not.toBe(first);
    started.push(second);
  });

  it("prepare() starts the supervisor before any action, the first action runs under it, and an unused one is let go", async () => {
    const supervisors = (): number[] =>
      descendantsOf(process.pid).filter((pid) => {
        try {
          return readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("action-supervisor");
        } catch {
          return false;
        }
      });
    const before = new Set(supervisors());
    const prepared = createProcessExecutor({ baseEnv: pickBaseEnv(process.env), supervisorIdleMs: 300 });
    prepared.prepare?.();
    const fresh = supervisors().filter((pid) => !before.has(pid));
    expect(fresh).toHaveLength(1);
    const supervisor = fresh[0]!;
    started.push(supervisor);
    const r = await prepared.run({
      action: action({ argv: ["sh", "-c", "echo $PPID"] }),
      args: {},
      env: identity,
    });
    expect(r.outcome).toBe("succeeded");
    expect(Number(r.output.trim())).toBe(supervisor);

    const unused = createProcessExecutor({ baseEnv: pickBaseEnv(process.env), supervisorIdleMs: 200 });
    const known = new Set(supervisors());
    unused.prepare?.();
    const idle = supervisors().filter((pid) => !known.has(pid));
    expect(idle).toHaveLength(1);
    started.push(idle[0]!);
    await waitFor(
      "the unused supervisor gone",
      () => isRunning(idle[0]!),
      (running) => !running,
      { timeoutMs: 5_000 },
    );
  });
});
