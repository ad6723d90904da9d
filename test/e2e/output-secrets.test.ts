/**
 * The node's own secrets never leave through a task's output, with real
 * processes: a `dagbot node` given its Matrix access token and its store URL (with a password) in the
 * environment runs actions that print /proc/<node pid>/environ, `cat` a file holding the token, print
 * it base64-encoded, print it in two halves seconds apart, and print it where the kept tail cuts it.
 * Neither the stored output (while the action runs and after), nor the error, nor `dagbot logs`
 * shows the token or the password; the environ block shows the variable with its value overwritten.
 */
import { randomBytes } from "node:crypto";
import { spawn } from "node:child_process";
import { mkdtempSync, openSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openStore } from "../../src/adapters/store-factory.js";
import type { Store } from "../../src/ports/store.js";
import { CLI, cli, requireBuild } from "../support/engine-cluster.js";
import type { TestDatabase } from "../support/postgres.js";
import { createTestDatabase, dropOrKeep } from "../support/postgres.js";
import { waitFor } from "../support/store-wait.js";

// Made afresh per run: no token-shaped literal in the repository.
const TOKEN = `syt_${randomBytes(12).toString("hex")}_test`;
const PASSWORD = "store-pw-7d2a61b0c4";
const ROOM = "!room:example.org";
let dir: string;
let db: TestDatabase;
let failed = false;

beforeAll(async () => {
  requireBuild();
  dir = mkdtempSync(join(tmpdir(), "dagbot-output-secrets-"));
  db = await createTestDatabase();
});

afterAll(async () => {
  await dropOrKeep(db, failed);
  if (!failed) rmSync(dir, { recursive: true, force: true });
});

const PATH_ARG = "args = { path = { pattern = '[A-Za-z0-9_./-]{1,200}' } }";

describe("secrets in task output", () => {
  it("masks the access token and the store password in every output, error and logs, and overwrites them in the node's environ", async () => {
    const storeUrl = (() => {
      const u = new URL(db.url);
      u.password = PASSWORD; // the test server trusts local connections: any password goes
      return u.toString();
    })();
    const tokenFile = join(dir, "token.txt");
    writeFileSync(tokenFile, TOKEN);
    const config = join(dir, "node.toml");
    writeFileSync(
      config,
      [
        'node_id = "masker"',
        "[matrix]",
        'homeserver_url = "http://127.0.0.1:9"',
        'user_id = "@bot:example.org"',
        `rooms = ["${ROOM}"]`,
        "[actions.environ]",
        'argv = ["cat", "/proc/{pid}/environ"]',
        "args = { pid = { pattern = '[0-9]{1,10}' } }",
        "[actions.show]",
        'argv = ["cat", "{path}"]',
        PATH_ARG,
        "[actions.encoded]",
        'argv = ["base64", "-w0", "{path}"]',
        PATH_ARG,
        "[actions.trickle]",
        `argv = ["sh", "-c", 'head -c 12 "$0"; sleep 3; tail -c +13 "$0"; exit 3', "{path}"]`,
        PATH_ARG,
        "[actions.cut]",
        `argv = ["sh", "-c", 'cat "$0"; echo " and a few more words"', "{path}"]`,
        PATH_ARG,
        "output_limit = 40",
      ].join("\n"),
    );
    const env = {
      PATH: process.env["PATH"] ?? "/usr/bin:/bin",
      DAGBOT_LOG_LEVEL: "warn",
      DAGBOT_ACCESS_TOKEN: TOKEN,
      DAGBOT_STORE: storeUrl,
    };
    const node = spawn(process.execPath, [CLI, "node", "--config", config], {
      cwd: dir,
      stdio: ["ignore", "ignore", openSync(join(dir, "node.log"), "a")],
      env,
    });
    let store: Store | null = null;
    try {
      store = await openStore({ kind: "postgres", url: db.url });
      const s = store;
      await waitFor(
        "the node's heartbeat",
        () => s.listNodes(),
        (nodes) => nodes.some((n) => n.session.nodeId === "masker"),
        { timeoutMs: 20_000 },
      );
      const dag = join(dir, "peek.json");
      writeFileSync(
        dag,
        JSON.stringify({
          id: "peek",
          tasks: [
            { id: "environ", action: "environ", args: { pid: String(node.pid) } },
            { id: "show", action: "show", args: { path: tokenFile } },
            { id: "encoded", action: "encoded", args: { path: tokenFile } },
            { id: "trickle", action: "trickle", args: { path: tokenFile } },
            { id: "cut", action: "cut", args: { path: tokenFile } },
          ],
        }),
      );
      const submitted = await cli(["submit", dag, "--config", config, "--confirm"], {
        cwd: dir,
        env: { DAGBOT_STORE: storeUrl },
      });
      expect(submitted.code, submitted.stderr).toBe(0);

      // While `trickle` runs, its first half is in the store on its own (the second comes 3 s later).
      const run0 = await waitFor(
        "the run",
        () => s.getRun(ROOM, "peek"),
        (r) => r !== null,
      );
      const seen: string[] = [];
      const runId = run0!.runId;
      await waitFor(
        "trickle to end",
        async () => {
          const t = await s.getTask(runId, "trickle");
          if (t?.output !== null && t?.output !== undefined) seen.push(t.output);
          return t?.status;
        },
        (status) => status === "failed" || status === "succeeded",
        { timeoutMs: 30_000, intervalMs: 50 },
      );
      const run = await waitFor(
        "the run to end",
        () => s.getRun(ROOM, "peek"),
        (r) => r !== null && ["succeeded", "failed"].includes(r.status),
        { timeoutMs: 30_000 },
      );
      const tasks = new Map((await s.listTasks(run!.runId)).map((t) => [t.taskId, t]));

      const environ = tasks.get("environ");
      expect(environ?.status).toBe("succeeded");
      expect(environ?.output).toContain("PATH=");
      expect(environ?.output).toContain(`DAGBOT_ACCESS_TOKEN=${"*".repeat(TOKEN.length)}`);
      expect(environ?.output).toContain(`DAGBOT_STORE=${"*".repeat(storeUrl.length)}`);

      expect(tasks.get("show")?.output).toBe("*".repeat(TOKEN.length));
      expect(tasks.get("encoded")?.output).toMatch(/^\*{40,}[A-Za-z0-9+/=]{0,4}$/);
      // Seen while it ran: only its first 12 characters, masked as a piece of the token.
      expect(seen.length).toBeGreaterThan(0);
      expect(seen[0]).toBe("*".repeat(12));
      expect(tasks.get("trickle")?.output).toBe("*".repeat(TOKEN.length));
      expect(tasks.get("trickle")?.error).toBe("exited with status 3");
      // The kept tail starts inside the token: that piece of it is masked too.
      expect(tasks.get("cut")?.output).toMatch(/^\*{10,} and a few more words\n$/);

      const pieces = [
        TOKEN,
        PASSWORD,
        TOKEN.slice(-10),
        TOKEN.slice(0, 10),
        Buffer.from(TOKEN).toString("base64").slice(4, 20),
      ];
      const logs = await Promise.all(
        [...tasks.keys()].map((taskId) =>
          cli(["logs", "peek", taskId, "--config", config], { cwd: dir, env: { DAGBOT_STORE: storeUrl } }),
        ),
      );
      for (const text of [
        ...seen,
        ...[...tasks.values()].flatMap((t) => [t.output ?? "", t.error ?? ""]),
        ...logs.map((l) => l.stdout + l.stderr),
      ]) {
        for (const piece of pieces) expect(text).not.toContain(piece);
      }
      expect(logs.every((l) => l.code === 0 || l.code === 1)).toBe(true);
      expect(logs[1]?.stdout).toContain("*".repeat(TOKEN.length));
    } catch (e) {
      failed = true;
      throw e;
    } finally {
      node.kill("SIGKILL");
      await store?.close();
    }
  }, 90_000);
});
