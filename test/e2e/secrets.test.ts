/**
 * Secrets that never sit in the node's environment, and actions as another user (docs/security.md),
 * with real processes: a `dagbot node` reads its store URL (with a password) from a 0600 file;
 * an action reading /proc/<node pid>/environ finds no secret there; an action run as another user
 * cannot read the node's /proc entries at all; the SQLite store is created owner-only.
 */
import { spawn } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openStore } from "../../src/adapters/store-factory.js";
import { CLI, cli, requireBuild } from "../support/engine-cluster.js";
import type { TestDatabase } from "../support/postgres.js";
import { createTestDatabase, dropOrKeep } from "../support/postgres.js";
import { waitFor } from "../support/store-wait.js";

const SECRET = "pw-from-file-4f1c9e";
let dir: string;
let db: TestDatabase;
let failed = false;

beforeAll(async () => {
  requireBuild();
  dir = mkdtempSync(join(tmpdir(), "dagbot-secrets-"));
  db = await createTestDatabase();
});

afterAll(async () => {
  await dropOrKeep(db, failed);
  if (!failed) rmSync(dir, { recursive: true, force: true });
});

const withPassword = (url: string): string => {
  const u = new URL(url);
  u.password = SECRET;
  return u.toString();
};

describe("secrets in files", () => {
  it("an action reading the node's environ finds no secret given through a file; as another user it reads nothing", async () => {
    const storeFile = join(dir, "store-url");
    writeFileSync(storeFile, `${withPassword(db.url)}\n`, { mode: 0o600 });
    const config = join(dir, "node.toml");
    writeFileSync(
      config,
      [
        'node_id = "secretive"',
        `store_file = "${storeFile}"`,
        "[actions.environ]",
        'argv = ["cat", "/proc/{pid}/environ"]',
        "args = { pid = { pattern = '[0-9]{1,10}' } }",
        "[actions.environ_as_nobody]",
        'argv = ["cat", "/proc/{pid}/environ"]',
        "args = { pid = { pattern = '[0-9]{1,10}' } }",
        'run_as = "65534:65534"',
        "[actions.whoami]",
        'argv = ["id", "-u"]',
        'run_as = "65534:65534"',
      ].join("\n"),
    );
    const node = spawn(process.execPath, [CLI, "node", "--config", config], {
      cwd: dir,
      stdio: "ignore",
      env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", DAGBOT_LOG_LEVEL: "warn" },
    });
    try {
      const pid = String(node.pid);
      const dag = join(dir, "peek.json");
      writeFileSync(
        dag,
        JSON.stringify({
          id: "peek",
          tasks: [
            { id: "same_user", action: "environ", args: { pid } },
            { id: "other_user", action: "environ_as_nobody", args: { pid } },
            { id: "who", action: "whoami" },
          ],
        }),
      );
      const store = await openStore({ kind: "postgres", url: db.url });
      try {
        await waitFor(
          "the node's heartbeat",
          () => store.listNodes(),
          (nodes) => nodes.some((n) => n.session.nodeId === "secretive"),
          { timeoutMs: 20_000 },
        );
        const submitted = await cli(["submit", dag, "--config", config, "--confirm"], { cwd: dir });
        expect(submitted.code, submitted.stderr).toBe(0);
        const run = await waitFor(
          "the run to end",
          () => store.getRun("local", "peek"),
          (r) => r !== null && ["succeeded", "failed"].includes(r.status),
          { timeoutMs: 30_000 },
        );
        const tasks = new Map((await store.listTasks(run!.runId)).map((t) => [t.taskId, t]));
        const same = tasks.get("same_user");
        expect(same?.status).toBe("succeeded");
        // The read worked (the environment is there) and holds no secret.
        expect(same?.output).toContain("PATH=");
        expect(same?.output).not.toContain(SECRET);
        expect(tasks.get("who")?.output?.trim()).toBe("65534");
        const other = tasks.get("other_user");
        expect(other?.status).toBe("failed");
        expect(other?.output).toMatch(/Permission denied/);
      } finally {
        await store.close();
      }
    } catch (e) {
      failed = true;
      throw e;
    } finally {
      node.kill("SIGKILL");
    }
  });

  it("a secret file that group or others may read is refused at start, naming it", async () => {
    const storeFile = join(dir, "open-store-url");
    writeFileSync(storeFile, withPassword(db.url));
    chmodSync(storeFile, 0o644);
    const config = join(dir, "open.toml");
    writeFileSync(config, `node_id = "open"\nstore_file = "${storeFile}"\n`);
    const r = await cli(["node", "--config", config], { cwd: dir });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(
      `store_file: ${storeFile} is readable or writable by group or others (mode 0644)`,
    );
    expect(r.stderr).not.toContain(SECRET);
  });

  it("the SQLite store file and its new folder are created owner-only", async () => {
    const where = join(dir, "fresh", "data");
    const r = await cli(["run", "config/examples/hello.toml", "--store", `sqlite:${join(where, "d.db")}`], {
      env: {},
    });
    expect(r.code, r.stderr).toBe(0);
    expect(statSync(where).mode & 0o777).toBe(0o700);
    expect(statSync(join(where, "d.db")).mode & 0o777).toBe(0o600);
  });
});
