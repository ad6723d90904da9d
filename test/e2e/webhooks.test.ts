// Signed webhooks on real node processes (three `dagbot node`s with the HTTP API), on SQLite and on
// PostgreSQL: a GitHub-style delivery starts one run with its parameters (read from the action's own
// record); the same delivery id delivered three times, once while the leader is killed with SIGKILL,
// starts exactly one run; a bad signature, a replayed old timestamp and an oversized body are refused
// without a run and counted in /metrics; a delivery that maps to nothing is a 202 with the reason.
import { createHmac, randomBytes, randomUUID } from "node:crypto";
import { chmodSync, existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Store } from "../../src/ports/store.js";
import type { StoreKind, Target } from "../support/engine-cluster.js";
import { ROOM, createTarget, killAll, requireBuild, waitForRunStatus } from "../support/engine-cluster.js";
import type { HttpNode } from "../support/http-client.js";
import { call, startHttpNode } from "../support/http-client.js";
import { waitFor } from "../support/store-wait.js";

const ENV_SECRET = "DAGBOT_TEST_HOOK_SECRET";

/** The action's own record: one JSON line per attempt with the values it was given. */
const RECORD_SCRIPT = `
import { appendFileSync } from "node:fs";
const [file, tag, sha] = process.argv.slice(2);
appendFileSync(file, JSON.stringify({ run: process.env.DAGBOT_RUN_ID, tag, sha }) + "\\n");
`;

interface ActionRecord {
  run: string;
  tag: string;
  sha: string;
}

function tables(target: Target, secretFile: string): string {
  const script = join(target.dir, "record.mjs");
  writeFileSync(script, RECORD_SCRIPT);
  const records = join(target.dir, "records.jsonl");
  return `
[permissions]
hook_auto_confirm = ["tag-push"]

[actions.record]
argv = [${JSON.stringify(process.execPath)}, ${JSON.stringify(script)}, ${JSON.stringify(records)}, "{tag}", "{sha}"]
args = { tag = { pattern = 'refs/tags/v[0-9]+[.][0-9]+[.][0-9]+' }, sha = { pattern = '[0-9a-f]{40}' } }
timeout = "30s"
kill_grace = "300ms"

[[webhooks]]
id = "tag-push"
dag = "release"
kind = "github"
secret_file = ${JSON.stringify(secretFile)}
events = ["push"]
params = { tag = "/ref", sha = "/after" }
filter = [{ pointer = "/ref", pattern = "refs/tags/v.+" }]
body_limit = "16KiB"

[[webhooks]]
id = "generic"
dag = "release"
kind = "hmac"
secret_env = "${ENV_SECRET}"
params = { tag = "/tag", sha = "/sha" }
replay_window = "2m"
`;
}

const RELEASE = {
  id: "release",
  params: {
    tag: { pattern: "refs/tags/v[0-9]+[.][0-9]+[.][0-9]+", default: "refs/tags/v0.0.0" },
    sha: { pattern: "[0-9a-f]{40}", default: "0".repeat(40) },
  },
  tasks: [{ id: "record", action: "record", args: { tag: "{params.tag}", sha: "{params.sha}" } }],
};

const sha = (): string => randomBytes(20).toString("hex");

function pushPayload(tag: string, after: string, extra: Record<string, unknown> = {}): string {
  return JSON.stringify({
    ref: `refs/tags/${tag}`,
    before: "0".repeat(40),
    after,
    compare: `https://github.example/acme/app/compare/${tag}`,
    head_commit: { id: after, url: `https://github.example/acme/app/commit/${after}` },
    repository: { full_name: "acme/app" },
    ...extra,
  });
}

async function deliver(
  node: HttpNode,
  hook: string,
  body: string,
  headers: Record<string, string>,
): Promise<{ status: number; body: any; text: string }> {
  const res = await fetch(`${node.base}/v1/hooks/${hook}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body,
  });
  const text = await res.text();
  let parsed: unknown = null;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = null;
  }
  return { status: res.status, body: parsed, text };
}

describe.each<StoreKind>(["sqlite", "postgres"])("webhooks on %s", (kind) => {
  let target: Target;
  let store: Store;
  const nodes: HttpNode[] = [];
  let failed = true;
  const githubSecret = randomBytes(32).toString("hex");
  const genericSecret = randomBytes(32).toString("hex");
  const github = (node: HttpNode, body: string, delivery: string, secret = githubSecret) =>
    deliver(node, "tag-push", body, {
      "x-github-event": "push",
      "x-github-delivery": delivery,
      "x-hub-signature-256": `sha256=${createHmac("sha256", secret).update(body).digest("hex")}`,
    });
  const records = (): ActionRecord[] => {
    const file = join(target.dir, "records.jsonl");
    if (!existsSync(file)) return [];
    return readFileSync(file, "utf8")
      .split("\n")
      .filter((l) => l !== "")
      .map((l) => JSON.parse(l) as ActionRecord);
  };
  const hookRuns = async (delivery: string) =>
    (await store.listRuns(ROOM, { limit: 1000 })).filter((r) => r.dag.hook?.delivery === delivery);
  const leaderOf = async (not?: HttpNode): Promise<HttpNode> => {
    const lease = await waitFor(
      "a leader",
      () => store.getLease(ROOM),
      (l) => l?.holder !== null && l?.holder !== undefined && l.holder.nodeId !== not?.node.nodeId,
      { timeoutMs: 30_000, intervalMs: 50 },
    );
    return nodes.find((n) => n.node.nodeId === lease!.holder!.nodeId)!;
  };

  beforeAll(async () => {
    requireBuild();
    target = await createTarget(kind, `webhooks-${kind}`);
    const secretFile = join(target.dir, "github-hook.secret");
    writeFileSync(secretFile, githubSecret);
    chmodSync(secretFile, 0o600);
    process.env[ENV_SECRET] = genericSecret;
    const extra = 'command_timeout = "20s"';
    for (const id of ["w1", "w2", "w3"])
      nodes.push(await startHttpNode(target, id, { extra, tables: tables(target, secretFile) }));
    store = await target.open();
    await leaderOf();
    const published = await call(nodes[0]!.base, "POST", "/v1/dags", { body: { document: RELEASE } });
    expect(published.status, published.text).toBe(201);
    // hook_auto_confirm starts runs of confirmed content only: someone confirms the published run.
    const confirmed = await call(nodes[0]!.base, "POST", "/v1/runs/release/confirm", { body: {} });
    expect(confirmed.status, confirmed.text).toBe(200);
  }, 60_000);

  afterAll(async () => {
    delete process.env[ENV_SECRET];
    await killAll(nodes.map((n) => n.node));
    await store?.close();
    await target?.cleanup(failed);
  });

  it("a GitHub-style signed delivery starts one run with its parameters, on any node", async () => {
    const leader = await leaderOf();
    const follower = nodes.find((n) => n !== leader)!;
    const after = sha();
    const delivery = randomUUID();
    const answer = await github(follower, pushPayload("v1.2.3", after), delivery);
    expect(answer.status, answer.text).toBe(202);
    expect(answer.body).toMatchObject({
      hook: "tag-push",
      delivery,
      result: "started",
      run: "release.2",
      needsConfirmation: false,
      commandId: `hook:tag-push:${delivery}`,
    });
    await waitForRunStatus(store, "release.2", (s) => s === "succeeded");
    const run = (await store.getRun(ROOM, "release.2"))!;
    // The action's own record: the payload's values, as the DAG's parameters.
    expect(records().filter((r) => r.run === run.runId)).toEqual([
      { run: run.runId, tag: "refs/tags/v1.2.3", sha: after },
    ]);
    // What started it: the hook, the delivery and the commit's link, kept with the run and shown.
    expect(run.publisher).toBe("hook:tag-push");
    expect(run.dag.hook).toEqual({
      id: "tag-push",
      delivery,
      link: `https://github.example/acme/app/commit/${after}`,
    });
    const shown = await call(follower.base, "GET", "/v1/runs/release.2");
    expect(shown.body.run.hook).toEqual(run.dag.hook);
    const metrics = (await call(follower.base, "GET", "/metrics")).text;
    expect(metrics).toMatch(/^dagbot_webhook_deliveries_total\{hook="tag-push",result="accepted"\} 1$/m);
    failed = false;
  }, 60_000);

  it("refuses a bad signature, a replayed old timestamp and an oversized body without a run, and counts them", async () => {
    failed = true;
    const node = nodes[0]!;
    const before = (await store.listRuns(ROOM, { limit: 1000 })).length;
    const body = pushPayload("v2.0.0", sha());

    const forged = await github(node, body, "forged-1", randomBytes(32).toString("hex"));
    expect(forged.status, forged.text).toBe(401);
    expect(forged.body).toMatchObject({ code: "webhook-refused", reason: "bad-signature" });
    expect(forged.text).not.toContain(githubSecret);
    const unsigned = await deliver(node, "tag-push", body, { "x-github-delivery": "unsigned-1" });
    expect(unsigned.status).toBe(401);
    expect(unsigned.body.reason).toBe("missing-signature");

    // A generic delivery signed correctly an hour ago: a replay, outside the 2 minute window.
    const generic = JSON.stringify({ tag: "refs/tags/v3.0.0", sha: sha() });
    const old = String(Math.floor(Date.now() / 1000) - 3600);
    const replayed = await deliver(node, "generic", generic, {
      "x-dagbot-timestamp": old,
      "x-dagbot-signature": `sha256=${createHmac("sha256", genericSecret).update(`${old}.${generic}`).digest("hex")}`,
      "x-dagbot-delivery": "replayed-1",
    });
    expect(replayed.status, replayed.text).toBe(401);
    expect(replayed.body.reason).toBe("stale-timestamp");

    // Larger than the hook's 16 KiB, however well signed.
    const big = pushPayload("v2.0.1", sha(), { padding: "x".repeat(20_000) });
    const oversized = await github(node, big, "big-1");
    expect(oversized.status, oversized.text).toBe(413);

    expect((await store.listRuns(ROOM, { limit: 1000 })).length).toBe(before);
    for (const id of ["tag-push:forged-1", "tag-push:unsigned-1", "generic:replayed-1", "tag-push:big-1"])
      expect(await store.getInboxEvent(`hook:${id}`)).toBeNull();

    const metrics = (await call(node.base, "GET", "/metrics")).text;
    const count = (hook: string, reason: string): number =>
      Number(
        new RegExp(`^dagbot_webhook_refused_total\\{hook="${hook}",reason="${reason}"\\} (\\d+)$`, "m").exec(
          metrics,
        )?.[1] ?? 0,
      );
    expect(count("tag-push", "bad-signature")).toBe(1);
    expect(count("tag-push", "missing-signature")).toBe(1);
    expect(count("generic", "stale-timestamp")).toBe(1);
    expect(count("tag-push", "too-large")).toBe(1);
    // Neither secret is in any node's log (the refusals are logged by hook and reason only).
    for (const n of nodes) {
      const log = readFileSync(n.node.logPath, "utf8");
      if (n === node) expect(log).toContain("webhook delivery refused");
      expect(log).not.toContain(githubSecret);
      expect(log).not.toContain(genericSecret);
    }
    failed = false;
  }, 60_000);

  it("a delivery that maps to nothing is a 202 with the reason; a hook not on hook_auto_confirm awaits confirmation", async () => {
    failed = true;
    const node = nodes[1]!;
    const before = (await store.listRuns(ROOM, { limit: 1000 })).length;
    const branch = JSON.stringify({ ref: "refs/heads/main", after: sha() });
    const ignored = await github(node, branch, "branch-1");
    expect(ignored.status, ignored.text).toBe(202);
    expect(ignored.body).toMatchObject({ result: "ignored", reason: expect.stringMatching(/filter \/ref/) });
    expect((await store.listRuns(ROOM, { limit: 1000 })).length).toBe(before);

    // A signed generic delivery: a run, but it waits for a person (the hook is not on the policy line).
    const generic = JSON.stringify({ tag: "refs/tags/v4.0.0", sha: sha() });
    const now = String(Math.floor(Date.now() / 1000));
    const answer = await deliver(node, "generic", generic, {
      "x-dagbot-timestamp": now,
      "x-dagbot-signature": `sha256=${createHmac("sha256", genericSecret).update(`${now}.${generic}`).digest("hex")}`,
      "x-dagbot-delivery": "generic-1",
    });
    expect(answer.status, answer.text).toBe(202);
    expect(answer.body).toMatchObject({ result: "awaiting-confirmation", needsConfirmation: true });
    const run = (await store.getRun(ROOM, answer.body.run))!;
    expect(run.status).toBe("pending");
    expect(run.publisher).toBe("hook:generic");
    // A value the DAG's pattern refuses is refused by the leader, and stores no run.
    const bad = JSON.stringify({ tag: "refs/tags/v5;reboot", sha: sha() });
    const badAnswer = await deliver(node, "generic", bad, {
      "x-dagbot-timestamp": now,
      "x-dagbot-signature": `sha256=${createHmac("sha256", genericSecret).update(`${now}.${bad}`).digest("hex")}`,
      "x-dagbot-delivery": "generic-2",
    });
    expect(badAnswer.status, badAnswer.text).toBe(400);
    expect(badAnswer.body.detail).toMatch(/parameter "tag"|tag/);
    expect((await store.listRuns(ROOM, { limit: 1000 })).length).toBe(before + 1);
    failed = false;
  }, 60_000);

  it("one delivery id delivered three times, once while the leader is killed, starts exactly one run", async () => {
    failed = true;
    const after = sha();
    const body = pushPayload("v6.0.0", after);
    const delivery = randomUUID();
    const leader = await leaderOf();
    const others = nodes.filter((n) => n !== leader);
    leader.node.kill("SIGKILL");
    await leader.node.exited;
    // Two copies at once to the survivors while the room has no leader, then a third once it has one.
    const [a, b] = await Promise.all([
      github(others[0]!, body, delivery),
      github(others[1]!, body, delivery),
    ]);
    const c = await github(others[1]!, body, delivery);
    for (const answer of [a, b, c]) {
      expect(answer.status, answer.text).toBe(202);
      expect(answer.body).toMatchObject({ result: "started", delivery });
    }
    expect(new Set([a.body.run, b.body.run, c.body.run]).size).toBe(1);
    expect(new Set([a.body.runId, b.body.runId, c.body.runId]).size).toBe(1);
    const newLeader = await leaderOf(leader);
    expect(newLeader).not.toBe(leader);
    await waitForRunStatus(store, a.body.run, (s) => s === "succeeded");
    expect(await hookRuns(delivery)).toHaveLength(1);
    // The action ran once for it, by its own record (the SHA is this delivery's alone).
    await new Promise((done) => setTimeout(done, 1_000));
    expect(records().filter((r) => r.sha === after)).toHaveLength(1);
    failed = false;
  }, 90_000);
});
