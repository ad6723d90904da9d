/**
 * A headless fleet administers its room's policy without chat: three real `dagbot node` processes
 * on PostgreSQL, each with the HTTP API, change the policy by `dagbot policy` and by
 * `POST /v1/rooms/{room}/policy` and keep their leader; restarted with [permissions] that disagree
 * with the stored policy, they say so in /readyz, `dagbot nodes` and every refused command, with the
 * exact `dagbot policy` command that ends it, and that command, or its HTTP route, run with no
 * leader, applies the change and brings a leader back.
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NodeProcess, Target } from "../support/engine-cluster.js";
import {
  ROOM,
  cli,
  createTarget,
  requireBuild,
  startNode,
  writeNodeConfig,
} from "../support/engine-cluster.js";
import { waitFor } from "../support/store-wait.js";
import type { Store } from "../../src/ports/store.js";

const TOKEN = "fleet-policy-operate-token";
const SHA = createHash("sha256").update(TOKEN).digest("hex");
const BASE_PORT = 20_000 + Math.floor(Math.random() * 20_000);
const IDS = ["fp-a", "fp-b", "fp-c"] as const;

let target: Target;
let store: Store;
let failed = false;
const running: NodeProcess[] = [];

function config(nodeId: string, port: number, logs: "operators" | "anyone"): string {
  return writeNodeConfig(target, {
    nodeId,
    extra: `
[permissions]
logs = "${logs}"

[http]
listen = "127.0.0.1:${port}"
tokens = [{ name = "ops", sha256 = "${SHA}", level = "operate" }]
`,
  });
}

function startFleet(logs: "operators" | "anyone"): void {
  IDS.forEach((id, i) => running.push(startNode(target, config(id, BASE_PORT + i, logs), id)));
}

async function stopFleet(): Promise<void> {
  const nodes = running.splice(0);
  for (const n of nodes) n.kill("SIGTERM");
  await Promise.all(nodes.map((n) => n.exited));
}

function http(port: number, method: string, path: string, body?: unknown): Promise<Response> {
  return fetch(`http://127.0.0.1:${port}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${TOKEN}`,
      ...(body === undefined ? {} : { "content-type": "application/json" }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
}

async function listening(port: number): Promise<void> {
  await waitFor(
    `the HTTP API on ${port}`,
    () =>
      fetch(`http://127.0.0.1:${port}/healthz`).then(
        (r) => r.status,
        () => 0,
      ),
    (status) => status === 200,
    { timeoutMs: 30_000 },
  );
}

async function leader(): Promise<{ nodeId: string; term: number }> {
  const lease = await waitFor(
    "a leader",
    () => store.getLease(ROOM),
    (l) => l !== null && l.holder !== null && l.expiresAt > l.now && IDS.includes(l.holder.nodeId as never),
    { timeoutMs: 30_000 },
  );
  return { nodeId: lease!.holder!.nodeId, term: lease!.term };
}

beforeAll(async () => {
  requireBuild();
  target = await createTarget("postgres", "fleet-policy");
});

afterAll(async () => {
  for (const n of running) n.kill("SIGKILL");
  await Promise.all(running.map((n) => n.exited));
  await store?.close();
  await target.cleanup(failed);
});

describe("a headless fleet's policy", () => {
  it("changes by CLI and by HTTP with its leader kept, and a disagreement is said with the command that ends it", async () => {
    try {
      startFleet("operators");
      store = await target.open();
      await Promise.all(IDS.map((_id, i) => listening(BASE_PORT + i)));
      const first = await leader();
      const cfg = ["--config", config(IDS[0], BASE_PORT, "operators")];

      const shown = await cli(["policy", ...cfg]);
      expect(shown.code, shown.stderr).toBe(0);
      expect(shown.stdout).toContain("logs operators");

      const byCli = await cli(["policy", "graph", "operators", ...cfg]);
      expect(byCli.code, byCli.stderr + byCli.stdout).toBe(0);
      expect(byCli.stdout).toContain("graph unset → operators");
      expect((await store.getRoomPolicy(ROOM))?.policy.graph).toBe("operators");

      // Sent to a node that does not lead: its leader answers through the inbox.
      const follower = IDS.findIndex((id) => id !== first.nodeId);
      const byHttp = await http(BASE_PORT + follower, "POST", `/v1/rooms/${ROOM}/policy`, {
        setting: "allow",
        value: "+@ops:example.org",
      });
      const answer = (await byHttp.json()) as { policy?: { allow: string[] }; changed?: string };
      expect(byHttp.status, JSON.stringify(answer)).toBe(200);
      expect(answer.policy?.allow).toEqual(["@ops:example.org"]);
      const read = await http(BASE_PORT + follower, "GET", `/v1/rooms/${ROOM}/policy`);
      expect(((await read.json()) as { policy: { graph: string } }).policy.graph).toBe("operators");
      // A bad value is refused by the typed command's rules, before anything is queued.
      const bad = await http(BASE_PORT, "POST", `/v1/rooms/${ROOM}/policy`, {
        setting: "logs",
        value: "all",
      });
      expect(bad.status).toBe(400);

      // The leader was kept through both changes: same holder, same term.
      expect(await leader()).toEqual(first);
      // The first node's setting from its config, then the two changes.
      const kinds = (await store.readEvents(ROOM, 0)).filter((e) => e.kind === "policy.set");
      expect(kinds).toHaveLength(3);

      // Restarted with [permissions] that disagree with the room's: no node leads, and each face says
      // why and what ends it.
      await stopFleet();
      startFleet("anyone");
      await Promise.all(IDS.map((_id, i) => listening(BASE_PORT + i)));
      const held = ["--config", config(IDS[0], BASE_PORT, "anyone")];
      const fix = `dagbot policy logs anyone --room ${ROOM}`;
      const ready = await waitFor(
        "/readyz to fail on the policy",
        async () => {
          const r = await http(BASE_PORT, "GET", "/readyz");
          return { status: r.status, body: (await r.json()) as { checks: Record<string, string> } };
        },
        (r) => r.status === 503 && (r.body.checks["policy"] ?? "ok") !== "ok",
        { timeoutMs: 20_000 },
      );
      expect(ready.body.checks["policy"]).toContain(fix);
      expect(ready.body.checks["policy"]).toContain('logs: config "anyone", room "operators"');
      const probe = await fetch(`http://127.0.0.1:${BASE_PORT}/readyz`);
      expect(probe.status).toBe(503);
      expect(((await probe.json()) as { checks: Record<string, string> }).checks["policy"]).toBe("failing");

      const nodes = await cli(["nodes", ...held]);
      expect(nodes.code, nodes.stderr).toBe(0);
      expect(nodes.stdout).toContain(`room ${ROOM}: no leader — no node leads room ${ROOM}`);
      expect(nodes.stdout).toContain(fix);

      const cap = await cli(["cap", "3", ...held]);
      expect(cap.code).toBe(1);
      expect(cap.stderr).toContain(fix);
      expect(cap.stderr).toContain("Nothing was queued");
      const capHttp = await http(BASE_PORT + 1, "PUT", `/v1/rooms/${ROOM}/cap`, { cap: 3 });
      expect(capHttp.status).toBe(503);
      expect(((await capHttp.json()) as { detail: string }).detail).toContain(fix);
      expect(await store.getLease(ROOM)).toMatchObject({ holder: null });

      // The command the advice names, run with no leader, applies the change and a node leads again.
      const resolved = await cli(["policy", "logs", "anyone", ...held]);
      expect(resolved.code, resolved.stderr + resolved.stdout).toBe(0);
      expect(resolved.stdout).toContain("logs operators → anyone");
      await leader();
      const again = await cli(["cap", "3", ...held]);
      expect(again.code, again.stderr).toBe(0);
      await waitFor(
        "/readyz to pass",
        () => http(BASE_PORT, "GET", "/readyz").then((r) => r.status),
        (s) => s === 200,
        { timeoutMs: 20_000 },
      );
      // The node logs asynchronously (pino, sync: false): its line may reach the file a moment
      // after /readyz answers.
      await waitFor(
        "the node to say its config now agrees with the room's policy",
        () => readFileSync(running[0]!.logPath, "utf8"),
        (log) => log.includes("now agree with the room's policy"),
        { timeoutMs: 10_000 },
      );

      // The same way out over HTTP: restarted disagreeing again, an operate token's policy change is
      // applied by the node it reaches, and a leader comes back.
      await stopFleet();
      startFleet("operators");
      await Promise.all(IDS.map((_id, i) => listening(BASE_PORT + i)));
      await waitFor(
        "/readyz to fail on the policy again",
        () => http(BASE_PORT + 2, "GET", "/readyz").then((r) => r.status),
        (status) => status === 503,
        { timeoutMs: 20_000 },
      );
      const viaHttp = await http(BASE_PORT + 2, "POST", `/v1/rooms/${ROOM}/policy`, {
        setting: "logs",
        value: "operators",
      });
      const body = (await viaHttp.json()) as { changed?: string; text?: string };
      expect(viaHttp.status, JSON.stringify(body)).toBe(200);
      expect(body.changed).toBe("logs anyone → operators");
      await leader();
    } catch (e) {
      failed = true;
      throw e;
    }
  }, 180_000);
});
