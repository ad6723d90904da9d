/**
 * `dagbot demo` as a person runs it: it starts Synapse and three nodes, publishes and confirms the
 * hello DAG, prints the room (the card's edit, then the final message), and Ctrl-C stops every
 * process it started.
 */
import { spawn } from "node:child_process";
import { describe, expect, it } from "vitest";
import { CLI } from "../support/bot-fleet.js";

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe("dagbot demo", () => {
  it("runs the example in a local room, prints it, and stops everything on Ctrl-C", async () => {
    const child = spawn(process.execPath, [CLI, "demo"], { stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    const finalLine = /✅ `hello` succeeded.* cc @alice:localhost/;
    try {
      const deadline = Date.now() + 120_000;
      while (!finalLine.test(stdout)) {
        if (child.exitCode !== null) throw new Error(`demo exited early:\n${stdout}\n${stderr}`);
        if (Date.now() > deadline) throw new Error(`no final message after 120 s:\n${stdout}\n${stderr}`);
        await new Promise((r) => setTimeout(r, 200));
      }
    } finally {
      child.kill("SIGINT");
    }
    expect(await exited).toBe(0);

    expect(stdout).toMatch(/Person: +@alice:localhost +password \S+/);
    expect(stdout).toMatch(/Log in with a Matrix client at http:\/\/127\.0\.0\.1:\d+/);
    // The card reads "succeeded" before the message that tells the publisher.
    const edited = stdout.search(/✎ ✅ `hello` — succeeded/);
    expect(edited).toBeGreaterThan(0);
    expect(edited).toBeLessThan(stdout.search(finalLine));
    expect(stdout).toMatch(/Stopped everything the demo started\./);

    const pids = [...stdout.matchAll(/pid (\d+)/g)].map((m) => Number(m[1]));
    expect(pids).toHaveLength(4); // Synapse and three nodes
    expect(pids.filter(alive)).toEqual([]);
  }, 180_000);
});
