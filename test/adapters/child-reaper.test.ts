// The harness's child reaper, with real processes: a parent that registered a child and installed
// the reaper leaves nothing behind when it exits; importing and registering alone installs no hook.
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { REPO, requireBuild } from "../support/engine-cluster.js";

const REAPER = join(REPO, "dist", "harness", "child-reaper.js");

/** Runs a parent Node process that spawns `sleep 60`, registers it and exits; returns the sleep's pid. */
function parentLeaving(install: boolean): number {
  const script = [
    `const { spawn } = require("node:child_process");`,
    `import(${JSON.stringify(REAPER)}).then((r) => {`,
    `  const child = spawn("sleep", ["60"], { stdio: "ignore", detached: true });`,
    `  r.reapOnExit(child);`,
    install ? `  r.installChildReaper();` : ``,
    `  process.stdout.write(String(child.pid));`,
    `  setTimeout(() => process.exit(0), 100);`,
    `});`,
  ].join("\n");
  return Number(execFileSync(process.execPath, ["-e", script], { encoding: "utf8" }));
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function gone(pid: number): Promise<boolean> {
  for (let i = 0; i < 100 && alive(pid); i += 1) await new Promise((r) => setTimeout(r, 20));
  return !alive(pid);
}

beforeAll(() => {
  requireBuild();
});

describe("child reaper", () => {
  it("kills a registered child when its parent exits, once installed", async () => {
    const pid = parentLeaving(true);
    expect(pid).toBeGreaterThan(0);
    expect(await gone(pid)).toBe(true);
  });

  it("installs nothing by being imported: without installChildReaper the child outlives its parent", () => {
    const pid = parentLeaving(false);
    try {
      expect(alive(pid)).toBe(true);
    } finally {
      process.kill(pid, "SIGKILL");
    }
  });
});
