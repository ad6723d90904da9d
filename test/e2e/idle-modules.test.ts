/**
 * A node loads only what it uses (an idle node's memory, bench/README.md): a real `dagbot node` process, traced with
 * test/support/module-trace.mjs, does not load the HTTP server (fastify, its OpenAPI plugin,
 * prom-client) without an [http] section, and does with one.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { spawn } from "node:child_process";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { CLI, createTarget, requireBuild, type Target } from "../support/engine-cluster.js";
import { waitFor } from "../support/store-wait.js";

const TRACE = fileURLToPath(new URL("../support/module-trace.mjs", import.meta.url));
const HTTP_MODULES = [
  "/node_modules/fastify/",
  "/node_modules/@fastify/swagger/",
  "/node_modules/prom-client/",
];

let target: Target;
const running: Array<{ kill(): void; exited: Promise<unknown> }> = [];

beforeAll(async () => {
  requireBuild();
  target = await createTarget("sqlite", "idle-modules");
});

afterEach(async () => {
  for (const p of running.splice(0)) {
    p.kill();
    await p.exited;
  }
});

/** Starts `dagbot node` traced; resolves with the modules it resolved once it logged `node started`. */
async function tracedNode(name: string, extraToml: string): Promise<string[]> {
  const config = join(target.dir, `${name}.toml`);
  writeFileSync(
    config,
    `node_id = "${name}"\nstore = ${JSON.stringify(target.store)}\n` +
      `[actions.true]\nargv = ["true"]\n${extraToml}`,
  );
  const trace = join(target.dir, `${name}.modules`);
  const logPath = join(target.dir, `${name}.log`);
  writeFileSync(trace, "");
  writeFileSync(logPath, "");
  const child = spawn(process.execPath, ["--import", TRACE, CLI, "node", "--config", config], {
    stdio: ["ignore", "ignore", "pipe"],
    env: { ...process.env, DAGBOT_LOG_LEVEL: "info", DAGBOT_MODULE_TRACE: trace },
  });
  let log = "";
  child.stderr.on("data", (c: Buffer) => (log += c.toString()));
  const exited = new Promise((done) => child.once("exit", done));
  running.push({ kill: () => child.kill("SIGKILL"), exited });
  await waitFor(
    `${name} started`,
    () => log,
    (text) => text.includes('"msg":"node started"') || child.exitCode !== null,
    { timeoutMs: 30_000 },
  );
  expect(child.exitCode, log).toBeNull();
  // The HTTP API starts after the engine: give it the moment it takes to listen.
  if (extraToml.includes("[http]")) {
    await waitFor(
      "the HTTP API",
      () => log,
      (text) => text.includes('"msg":"http api listening"'),
      { timeoutMs: 30_000 },
    );
  }
  return readFileSync(trace, "utf8").split("\n").filter(Boolean);
}

describe("a node loads only what it uses", () => {
  it("without [http], no fastify, OpenAPI plugin or prom-client; with it, all three", async () => {
    const plain = await tracedNode("plain", "");
    // The trace works: the store driver and the node's own modules are in it.
    expect(plain.some((u) => u.includes("/node_modules/better-sqlite3/"))).toBe(true);
    // dagbot's own modules: the command's chunks (scripts/bundle-cli.mjs), or node.js unbundled.
    expect(
      plain.some((u) => /\/dist\/(chunk-[^/]+|app\/node)\.js$/.test(u)),
      plain.join("\n"),
    ).toBe(true);
    for (const m of HTTP_MODULES) expect(plain.filter((u) => u.includes(m))).toEqual([]);

    const sha = "0".repeat(64);
    const served = await tracedNode(
      "served",
      `[http]\nlisten = "127.0.0.1:0"\ntokens = [{ name = "ops", sha256 = "${sha}", level = "read" }]\n`,
    );
    for (const m of HTTP_MODULES)
      expect(
        served.some((u) => u.includes(m)),
        m,
      ).toBe(true);
  });
});
