// A shared store (README, "Commands"): `dagbot run` on a store whose room another fleet serves does not join it as full
// nodes unless asked (--join), and read-only commands never create a store (SQLite file or
// PostgreSQL tables) where a typo pointed them.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NodeProcess, Target } from "../support/engine-cluster.js";
import {
  REPO,
  ROOM,
  cli,
  createTarget,
  killAll,
  requireBuild,
  startNode,
  writeDag,
  writeNodeConfig,
} from "../support/engine-cluster.js";
import { createTestDatabase } from "../support/postgres.js";
import { scratchFolder } from "../support/scratch-folder.js";
import { waitFor } from "../support/store-wait.js";

beforeAll(() => requireBuild());

describe("dagbot run on a shared store", () => {
  let target: Target;
  const nodes: NodeProcess[] = [];
  let failed = false;

  beforeAll(async () => {
    target = await createTarget("postgres", "shared-run");
  });
  afterAll(async () => {
    await killAll(nodes);
    await target.cleanup(failed);
  });

  it("refuses to join a room another live node serves, changing nothing; --join runs there", async () => {
    try {
      const fleetConfig = writeNodeConfig(target, { nodeId: "fleet-1" });
      nodes.push(startNode(target, fleetConfig, "fleet-1"));
      const store = await target.open();
      try {
        await waitFor(
          "the fleet node's heartbeat",
          () => store.listNodes(),
          (list) => list.some((n) => n.session.nodeId === "fleet-1" && n.roomIds.includes(ROOM)),
          { timeoutMs: 20_000, intervalMs: 100 },
        );
        const laptop = writeNodeConfig(target, { nodeId: "laptop" });
        const dag = writeDag(target, {
          id: "oneoff",
          tasks: [{ id: "a", action: "echo", args: { message: "hi" } }],
        });

        const refused = await cli(["run", dag, "--config", laptop], { cwd: target.dir });
        expect(refused.code, refused.stdout).toBe(2);
        expect(refused.stderr).toContain(`room ${ROOM} of this store is shared`);
        expect(refused.stderr).toContain("fleet-1");
        expect(refused.stderr).toContain("--join");
        expect(refused.stderr).toContain("dagbot submit");
        // Nothing of the run, and no node of the laptop's, reached the store.
        expect(await store.getRun(ROOM, "oneoff")).toBeNull();
        expect((await store.listNodes()).map((n) => n.session.nodeId)).toEqual(["fleet-1"]);

        const joined = await cli(["run", dag, "--config", laptop, "--join"], { cwd: target.dir });
        expect(joined.code, joined.stderr).toBe(0);
        expect((await store.getRun(ROOM, "oneoff"))?.status).toBe("succeeded");
      } finally {
        await store.close();
      }
    } catch (e) {
      failed = true;
      throw e;
    }
  });

  it("refuses a room with a DAG that runs after another DAG's runs, with no live node: its nodes would fire it", async () => {
    try {
      await killAll(nodes);
      const store = await target.open();
      try {
        const laptop = writeNodeConfig(target, { nodeId: "laptop" });
        const downstream = writeDag(target, {
          id: "follow",
          after: { dag: "oneoff" },
          tasks: [{ id: "a", action: "echo", args: { message: "after" } }],
        });
        // The fleet's node is gone (its heartbeat ages past two lease TTLs); only --join may publish here.
        await waitFor(
          "the fleet node gone",
          () => store.listNodes(),
          (list) => list.every((n) => n.session.nodeId !== "fleet-1" || n.heartbeatAgeMs > 4_500),
          { timeoutMs: 20_000, intervalMs: 200 },
        );
        const joined = await cli(["run", downstream, "--config", laptop, "--join"], { cwd: target.dir });
        expect(joined.code, joined.stderr).toBe(0);
        const dag = writeDag(target, {
          id: "another",
          tasks: [{ id: "a", action: "echo", args: { message: "hi" } }],
        });
        const refused = await cli(["run", dag, "--config", laptop], { cwd: target.dir });
        expect(refused.code, refused.stdout).toBe(2);
        expect(refused.stderr).toContain("it has DAGs that run after another DAG's runs (follow)");
        expect(refused.stderr).not.toContain("live nodes serve it");
        expect(await store.getRun(ROOM, "another")).toBeNull();
      } finally {
        await store.close();
      }
    } catch (e) {
      failed = true;
      throw e;
    }
  });
});

describe("read-only commands never create a store", () => {
  const scratch = scratchFolder("read-only-store");

  it("status, list, logs, nodes, graph, schedules, triggers and policy on a SQLite path that does not exist: exit 1, no file", async () => {
    const typo = join(scratch.path, "typo", "dagbot.db");
    const reads = [["status"], ["list"], ["logs", "r", "t"], ["nodes"], ["graph", "some-run"]];
    for (const args of [...reads, ["schedules"], ["triggers"], ["policy"]]) {
      const r = await scratch.track(cli([...args, "--store", `sqlite:${typo}`], { cwd: scratch.path }));
      expect(r.code, `${args[0]}: ${r.stdout}`).toBe(1);
      expect(r.stderr).toContain("no dagbot store at");
      expect(r.stderr).toContain("creates none");
      expect(existsSync(typo), `${args[0]} created ${typo}`).toBe(false);
      expect(existsSync(join(scratch.path, "typo")), `${args[0]} created the folder`).toBe(false);
    }
  });

  it("commands that write but run no node (submit, confirm, cancel, policy) name a missing folder and create none; a node creates it", async () => {
    const missing = join(scratch.path, "no", "such", "dir");
    const store = `sqlite:${join(missing, "x.db")}`;
    const dag = join(REPO, "config", "examples", "hello.toml");
    const writes = [
      ["submit", dag],
      ["confirm", "hello"],
      ["cancel", "hello"],
      ["policy", "auto_confirm", "+@a:x"],
    ];
    for (const args of writes) {
      const r = await scratch.track(cli([...args, "--store", store], { cwd: scratch.path }));
      expect(r.code, `${args[0]}: ${r.stdout}${r.stderr}`).toBe(1);
      expect(r.stderr).toContain(`the folder ${missing} does not exist`);
      expect(r.stderr).toContain("only a node (dagbot node, start, run) creates a store's folder");
      expect(existsSync(join(scratch.path, "no")), `${args[0]} created a folder`).toBe(false);
    }
    // `dagbot run` is a node of its own: it creates the folder and the store.
    const ran = await scratch.track(cli(["run", dag, "--store", store], { cwd: scratch.path }));
    expect(ran.code, ran.stderr).toBe(0);
    expect(existsSync(join(missing, "x.db"))).toBe(true);
  });

  it("status on an empty PostgreSQL database: exit 1, no tables created", async () => {
    const db = await createTestDatabase();
    try {
      const r = await cli(["status", "--store", db.url], { cwd: scratch.path });
      expect(r.code, r.stdout).toBe(1);
      expect(r.stderr).toContain("no dagbot store at");
      const tables = await db.query<{ n: string }>(
        "SELECT count(*)::text AS n FROM information_schema.tables WHERE table_schema = 'public'",
      );
      expect(tables[0]?.n).toBe("0");
    } finally {
      await db.drop();
    }
  });
});
