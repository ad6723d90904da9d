// The webhook examples of config/examples/webhooks/ on a real node: its node.toml (with this test's
// store, port, token and secret files), its DAGs published as they are, and each sender kind's
// curl command of docs/webhooks.md run by bash as written (only the address and the
// secrets' places changed), sending the example payloads: GitHub tag push, GitLab tag push, generic
// signed JSON and Alertmanager. Each starts the run its hook maps, with the payload's values.
import { spawnSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { chmodSync, existsSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parse as parseToml } from "smol-toml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Store } from "../../src/ports/store.js";
import type { NodeProcess, Target } from "../support/engine-cluster.js";
import {
  REPO,
  ROOM,
  createTarget,
  killAll,
  requireBuild,
  startNode,
  waitForRunStatus,
} from "../support/engine-cluster.js";
import { OPERATE_TOKEN, call } from "../support/http-client.js";
import { waitFor } from "../support/store-wait.js";

const EXAMPLES = join(REPO, "config", "examples", "webhooks");
const secrets = {
  "github-hook": randomBytes(32).toString("hex"),
  "gitlab-hook": randomBytes(32).toString("hex"),
  "imports-hook": randomBytes(32).toString("hex"),
};
const alertmanagerSecret = randomBytes(32).toString("hex");

let target: Target;
let store: Store;
let node: NodeProcess;
let base: string;
let failed = true;

/** The shell blocks of docs/webhooks.md that send to a hook, by hook id. */
function readmeCommands(): Map<string, string> {
  const section = readFileSync(join(REPO, "docs", "webhooks.md"), "utf8");
  const blocks = [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
  const out = new Map<string, string>();
  for (const block of blocks) {
    const hook = /\/v1\/hooks\/([a-z-]+)/.exec(block)?.[1];
    if (hook !== undefined) out.set(hook, block);
  }
  return out;
}

/** Runs a block of that page with bash in the repository, this node's address and secret files in place. */
function runBlock(block: string): { status: number; body: any } {
  let script = block.replaceAll("http://127.0.0.1:8080", base);
  for (const name of Object.keys(secrets))
    script = script.replaceAll(`/run/secrets/${name}`, join(target.dir, name));
  const out = spawnSync("bash", ["-euo", "pipefail", "-c", `${script.trimEnd()} -w '\\n%{http_code}'`], {
    cwd: REPO,
    env: { ...process.env, DAGBOT_ALERTMANAGER_SECRET: alertmanagerSecret },
    encoding: "utf8",
    timeout: 30_000,
  });
  if (out.status !== 0) throw new Error(`bash failed (${out.status}): ${out.stderr}`);
  const lines = out.stdout.trimEnd().split("\n");
  const status = Number(lines.pop());
  return { status, body: JSON.parse(lines.join("\n")) };
}

beforeAll(async () => {
  requireBuild();
  target = await createTarget("sqlite", "webhook-examples");
  for (const [name, value] of Object.entries(secrets)) {
    writeFileSync(join(target.dir, name), value);
    chmodSync(join(target.dir, name), 0o600);
  }
  // The example as written, with this test's store, port, token and secret files.
  const config = parseToml(readFileSync(join(EXAMPLES, "node.toml"), "utf8")) as any;
  config.store = target.store;
  config.http.listen = "127.0.0.1:0";
  config.http.tokens = [
    { name: "ops", sha256: createHash("sha256").update(OPERATE_TOKEN).digest("hex"), level: "operate" },
  ];
  for (const hook of config.webhooks)
    if (typeof hook.secret_file === "string")
      hook.secret_file = join(target.dir, hook.secret_file.replace("/run/secrets/", ""));
  const path = join(target.dir, "node.json");
  writeFileSync(path, JSON.stringify(config));
  process.env["DAGBOT_ALERTMANAGER_SECRET"] = alertmanagerSecret;
  node = startNode(target, path, "hooks-1");
  delete process.env["DAGBOT_ALERTMANAGER_SECRET"];
  const line = await waitFor(
    "hooks-1 listening",
    () =>
      existsSync(node.logPath) && statSync(node.logPath).size > 0
        ? readFileSync(node.logPath, "utf8")
            .split("\n")
            .find((l) => l.includes("http api listening"))
        : undefined,
    (l) => l !== undefined,
    { timeoutMs: 15_000, intervalMs: 50 },
  );
  base = `http://127.0.0.1:${(JSON.parse(line!) as { listen: string }).listen.split(":").at(-1)}`;
  store = await target.open();
  await waitFor(
    "hooks-1 leading",
    () => store.getLease(ROOM),
    (l) => l?.holder?.nodeId === "hooks-1",
  );
  for (const dag of ["release", "clean-disk", "import"]) {
    const text = readFileSync(join(EXAMPLES, `${dag}.toml`), "utf8");
    const published = await call(base, "POST", "/v1/dags", { body: { text, format: "toml" } });
    expect(published.status, published.text).toBe(201);
    // hook_auto_confirm starts runs of confirmed content only: someone confirms each published run.
    const confirmed = await call(base, "POST", `/v1/runs/${dag}/confirm`, { body: {} });
    expect(confirmed.status, confirmed.text).toBe(200);
  }
}, 60_000);

afterAll(async () => {
  await killAll(node === undefined ? [] : [node]);
  await store?.close();
  await target?.cleanup(failed);
});

/** The run a 202 names, once it reached `status`, and its one task's output (the action's own record). */
async function runOf(
  answer: { body: any },
  status: string,
): Promise<{ values: unknown; output: string; hook: unknown }> {
  await waitForRunStatus(store, answer.body.run, (s) => s === status);
  const run = (await store.getRun(ROOM, answer.body.run))!;
  const [task] = await store.listTasks(run.runId);
  return { values: run.dag.values, output: task?.output ?? "", hook: run.dag.hook };
}

describe("config/examples/webhooks with the curl commands of docs/webhooks.md", () => {
  const commands = readmeCommands();

  it("docs/webhooks.md has one command for each example hook; the route is in the OpenAPI document", async () => {
    expect([...commands.keys()].sort()).toEqual(["disk-full", "github-tags", "gitlab-tags", "imports"]);
    const openapi = await call(base, "GET", "/openapi.json", { token: null });
    expect(openapi.status).toBe(200);
    expect(Object.keys(openapi.body.paths)).toContain("/v1/hooks/{id}");
  });

  it("a GitHub tag push starts a release at once (the hook is on hook_auto_confirm)", async () => {
    const answer = runBlock(commands.get("github-tags")!);
    expect(answer.status, JSON.stringify(answer.body)).toBe(202);
    expect(answer.body).toMatchObject({ hook: "github-tags", result: "started" });
    const run = await runOf(answer, "succeeded");
    const commit = "5e2b1e9a0c6d4f3b8a7e1d2c3b4a596877665544";
    expect(run.output.trim()).toBe(`releasing refs/tags/v1.4.0 at ${commit}`);
    expect(run.hook).toMatchObject({
      id: "github-tags",
      link: `https://github.com/acme/app/commit/${commit}`,
    });
    failed = false;
  }, 60_000);

  it("a GitLab tag push starts a release", async () => {
    failed = true;
    const answer = runBlock(commands.get("gitlab-tags")!);
    expect(answer.status, JSON.stringify(answer.body)).toBe(202);
    const run = await runOf(answer, "succeeded");
    expect(run.output.trim()).toBe("releasing refs/tags/v1.5.0 at 82b3d5ae55f7080f1e6022629cdb57bfae7cccc7");
    expect(run.hook).toMatchObject({ id: "gitlab-tags", link: "https://gitlab.example.org/acme/app" });
    failed = false;
  }, 60_000);

  it("generic signed JSON starts an import", async () => {
    failed = true;
    const answer = runBlock(commands.get("imports")!);
    expect(answer.status, JSON.stringify(answer.body)).toBe(202);
    const run = await runOf(answer, "succeeded");
    expect(run.output.trim()).toBe("importing orders version 42");
    expect(run.hook).toMatchObject({ id: "imports", link: "https://ci.example.org/jobs/1234" });
    failed = false;
  }, 60_000);

  it("an Alertmanager notification starts one clean-up, awaiting confirmation, however often it is sent", async () => {
    failed = true;
    const first = runBlock(commands.get("disk-full")!);
    expect(first.status, JSON.stringify(first.body)).toBe(202);
    expect(first.body).toMatchObject({
      hook: "disk-full",
      result: "awaiting-confirmation",
      needsConfirmation: true,
    });
    const run = await runOf(first, "pending");
    expect(run.values).toEqual({ alert: "DiskFull", instance: "db-1.example.org:9100" });
    expect(run.hook).toMatchObject({ id: "disk-full", link: "http://alertmanager.example.org:9093" });
    // Alertmanager retries and repeats the same notification: the same delivery, the same run.
    const again = runBlock(commands.get("disk-full")!);
    expect(again.body).toMatchObject({ run: first.body.run, delivery: first.body.delivery });
    // A resolved notification maps to nothing.
    const resolved = JSON.parse(readFileSync(join(EXAMPLES, "alertmanager.json"), "utf8"));
    resolved.status = "resolved";
    const res = await fetch(`${base}/v1/hooks/disk-full`, {
      method: "POST",
      headers: { authorization: `Bearer ${alertmanagerSecret}`, "content-type": "application/json" },
      body: JSON.stringify(resolved),
    });
    expect(res.status).toBe(202);
    expect(await res.json()).toMatchObject({
      result: "ignored",
      reason: expect.stringMatching(/filter \/status/),
    });
    // A person confirms it, and it runs with the alert's values.
    const confirm = await call(base, "POST", `/v1/runs/${first.body.run}/confirm`, { body: {} });
    expect(confirm.status, confirm.text).toBe(200);
    const ran = await runOf(first, "succeeded");
    expect(ran.output.trim()).toBe("cleaning db-1.example.org:9100 for DiskFull");
    failed = false;
  }, 60_000);
});
