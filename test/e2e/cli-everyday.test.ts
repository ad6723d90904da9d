// The CLI on day two, as real processes: a closed pipe, NO_COLOR and terminals, read-only commands
// with a bot's config but no token, `submit` with no live node, and task output from the shell.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CLI, requireBuild } from "../support/engine-cluster.js";

let cwd: string;
let failed = false;

beforeAll(() => {
  requireBuild();
  cwd = mkdtempSync(join(tmpdir(), "dagbot-cli-everyday-"));
});

afterAll(() => {
  if (failed) console.warn(`kept ${cwd}`);
  else rmSync(cwd, { recursive: true, force: true });
});

function track<T>(p: Promise<T>): Promise<T> {
  return p.catch((e: unknown) => {
    failed = true;
    throw e;
  });
}

describe("a closed pipe", () => {
  it("`dagbot status` whose reader has gone ends quietly, with no EPIPE stack", async () => {
    // The reader end closes before dagbot writes, as `dagbot status | head -1` does once head has its line.
    const result = await track(
      new Promise<{ code: number | null; stderr: string }>((done) => {
        const child = spawn(process.execPath, [CLI, "status", "--store", `sqlite:${join(cwd, "pipe.db")}`], {
          cwd,
          stdio: ["ignore", "pipe", "pipe"],
        });
        child.stdout.destroy();
        let stderr = "";
        child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
        child.on("exit", (code) => done({ code, stderr }));
      }),
    );
    expect(result.stderr).not.toContain("EPIPE");
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
  });
});
