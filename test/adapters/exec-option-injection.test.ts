/**
 * Arguments cannot become options, against real programs: a placeholder that is
 * a whole argv entry refuses a value starting with "-" unless the action allows it for that argument.
 */
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createProcessExecutor, pickBaseEnv } from "../../src/adapters/exec/process-executor.js";
import { renderArgv } from "../../src/domain/action-argv.js";
import type { ActionDefinition } from "../../src/ports/executor.js";

const scratch = mkdtempSync(join(tmpdir(), "dagbot-exec-dash-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const executor = createProcessExecutor({ baseEnv: pickBaseEnv(process.env) });
const identity = { DAGBOT_RUN_ID: "run-1", DAGBOT_TASK_ID: "task-1", DAGBOT_ATTEMPT: 1 };
const PATHISH = "[A-Za-z0-9_./-]+";

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

function folderWithFiles(name: string): string {
  const made = mkdtempSync(join(scratch, `${name}-`));
  writeFileSync(join(made, "a.log"), "keep me");
  writeFileSync(join(made, "b.txt"), "keep me too");
  return made;
}

describe("a whole-entry placeholder and a leading '-'", () => {
  it("`find {dir} -name *.log` with dir = -delete deletes nothing: the value is refused", async () => {
    const cwd = folderWithFiles("find");
    const find = action({
      argv: ["find", "{dir}", "-name", "*.log"],
      args: { dir: { pattern: PATHISH } },
      cwd,
    });
    const result = await executor.run({ action: find, args: { dir: "-delete" }, env: identity });
    expect(result.outcome).toBe("failed");
    expect(result.error).toMatch(/argument "dir" starts with "-"/);
    // The side effect is what matters: the files are still there.
    expect(readdirSync(cwd).sort()).toEqual(["a.log", "b.txt"]);
  });

  it("`ls {path}` refuses --help, and still lists an ordinary path", async () => {
    const cwd = folderWithFiles("ls");
    const ls = action({ argv: ["ls", "{path}"], args: { path: { pattern: PATHISH } }, cwd });
    const refused = await executor.run({ action: ls, args: { path: "--help" }, env: identity });
    expect(refused.outcome).toBe("failed");
    expect(refused.output).toBe("");
    const listed = await executor.run({ action: ls, args: { path: "." }, env: identity });
    expect(listed.outcome).toBe("succeeded");
    expect(listed.output).toContain("a.log");
  });

  it("an action may allow a leading '-' for one argument; after `--`, cat reads it as a file name", async () => {
    const cwd = folderWithFiles("optin");
    writeFileSync(join(cwd, "-n"), "a file named like an option\n");
    const cat = action({
      argv: ["cat", "--", "{file}"],
      args: { file: { pattern: PATHISH, allowLeadingDash: true } },
      cwd,
    });
    const result = await executor.run({ action: cat, args: { file: "-n" }, env: identity });
    expect(result.outcome).toBe("succeeded");
    // Read as a file, not as cat's "number the lines" option.
    expect(result.output).toBe("a file named like an option\n");
  });

  it("embedded placeholders are not whole entries: --name={v} with v = -x is one option's value", () => {
    const a = action({ argv: ["prog", "--name={v}"], args: { v: { pattern: "[a-z-]+" } } });
    expect(renderArgv(a, { v: "-x" })).toEqual({ ok: true, argv: ["prog", "--name=-x"] });
  });

  it("the refusal names the argument and the action, and a negative number needs the opt-in too", () => {
    const a = action({ name: "count", argv: ["seq", "{n}"], args: { n: { pattern: "-?[0-9]+" } } });
    expect(renderArgv(a, { n: -3 })).toEqual({
      ok: false,
      message:
        'argument "n" starts with "-", which the program would read as an option; action "count" does not allow that for "n"',
    });
    const allowed = { ...a, args: { n: { pattern: "-?[0-9]+", allowLeadingDash: true } } };
    expect(renderArgv(allowed, { n: -3 })).toEqual({ ok: true, argv: ["seq", "-3"] });
  });
});
