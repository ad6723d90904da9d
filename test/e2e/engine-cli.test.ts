// The engine subcommands as a user runs them: `dagbot run` with no config, reruns, failures, an
// action that ignores SIGTERM, bad configs and DAGs refused at start, and every --help.
import { spawn } from "node:child_process";
import { existsSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { beforeAll, describe, expect, it } from "vitest";
import type { Target } from "../support/engine-cluster.js";
import {
  CLI,
  REPO,
  cli,
  createTarget,
  isAlive,
  marksDir,
  readPid,
  requireBuild,
  writeNodeConfig,
} from "../support/engine-cluster.js";
import { waitFor } from "../support/store-wait.js";
import { scratchFolder } from "../support/scratch-folder.js";

const scratch = scratchFolder("engine-cli");
const { track } = scratch;
let cwd: string;

beforeAll(() => {
  requireBuild();
  cwd = scratch.path;
});

describe("dagbot run", () => {
  it("runs an example DAG with no config on the embedded SQLite default, and runs it again under a new id", async () => {
    const hello = join(REPO, "config", "examples", "hello.toml");
    const first = await track(cli(["run", hello], { cwd }));
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toMatch(/task greet succeeded/);
    expect(first.stdout).toMatch(/run hello \([0-9a-f-]+\) succeeded in /);
    expect(first.stdout).toMatch(/pause\s+succeeded\s+\d/);
    expect(existsSync(join(cwd, "data", "dagbot.db"))).toBe(true);

    const again = await track(cli(["run", hello, "--nodes", "3"], { cwd }));
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr).toContain("running it again as hello.2");
    expect(again.stdout).toMatch(/run hello\.2 \([0-9a-f-]+\) succeeded/);

    const status = await cli(["status", "--json"], { cwd });
    expect(status.code, status.stderr).toBe(0);
    const runs = (JSON.parse(status.stdout) as { runs: Array<{ run: { dagId: string; status: string } }> })
      .runs;
    expect(runs.map(({ run: r }) => [r.dagId, r.status]).sort()).toEqual([
      ["hello", "succeeded"],
      ["hello.2", "succeeded"],
    ]);

    // Each run took one publish and one confirm, both answered: the confirm named the content hash
    // of exactly what was published under the run's id (hello.2 too), or a second one would follow.
    const db = new Database(join(cwd, "data", "dagbot.db"), { readonly: true });
    try {
      const commands = db
        .prepare(
          "SELECT json_extract(content, '$.\"dagbot.command\".verb') AS verb, " +
            "json_extract(content, '$.\"dagbot.command\".id') AS id, status, origin_server_ts AS at " +
            "FROM processed_events " +
            "WHERE seen_by = 'cli' ORDER BY origin_server_ts, event_id",
        )
        .all() as { verb: string; id: string | null; status: string; at: number }[];
      expect(commands.map((c) => [c.verb, c.id, c.status])).toEqual([
        ["publish", null, "replied"],
        ["confirm", "hello", "replied"],
        ["publish", null, "replied"],
        ["confirm", "hello.2", "replied"],
      ]);
      // Queued together (not after the publish's answer), stamped so that a leader takes them in order.
      expect([commands[1]!.at - commands[0]!.at, commands[3]!.at - commands[2]!.at]).toEqual([1, 1]);
    } finally {
      db.close();
    }
  });

  it("exits 1 when the run fails and shows which task failed", async () => {
    const dag = join(cwd, "boom.json");
    writeFileSync(
      dag,
      JSON.stringify({
        id: "boom",
        tasks: [
          { id: "x", action: "fail" },
          { id: "y", action: "true", needs: ["x"] },
        ],
      }),
    );
    const r = await track(cli(["run", dag], { cwd }));
    expect(r.code, r.stderr).toBe(1);
    expect(r.stdout).toMatch(/x\s+failed/);
    expect(r.stdout).toMatch(/y\s+skipped/);
    expect(r.stdout).toMatch(/run boom \([0-9a-f-]+\) failed/);
  });

  it("refuses an invalid DAG and one the local nodes cannot place, naming the place, before starting anything", async () => {
    const bad = join(cwd, "bad.json");
    writeFileSync(bad, JSON.stringify({ id: "bad", tasks: [{ id: "a", action: "echo", needs: ["nope"] }] }));
    const r = await track(cli(["run", bad], { cwd }));
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("tasks[0].needs[0]");

    const pinned = join(cwd, "pinned.json");
    writeFileSync(
      pinned,
      JSON.stringify({ id: "pinned", tasks: [{ id: "a", action: "true", on: { labels: ["gpu"] } }] }),
    );
    const p = await track(cli(["run", pinned], { cwd }));
    expect(p.code).toBe(2);
    expect(p.stderr).toContain("tasks[0] (a): needs label gpu");
    const nodes = await cli(["status", "pinned"], { cwd });
    expect(nodes.code).toBe(1);
  });

  it("kills an action that ignores SIGTERM at its timeout; the task ends timed_out", async () => {
    const target: Target = await createTarget("sqlite", "stubborn");
    try {
      const config = writeNodeConfig(target, { nodeId: "solo" });
      const dag = join(target.dir, "stubborn.json");
      writeFileSync(dag, JSON.stringify({ id: "stubborn", tasks: [{ id: "hang", action: "stubborn" }] }));
      const r = await track(cli(["run", dag, "--config", config, "--nodes", "1"], { cwd: target.dir }));
      expect(r.code, r.stderr).toBe(1);
      expect(r.stdout).toMatch(/hang\s+timed_out/);
      const status = await cli(["status", "stubborn", "--json", "--config", config], { cwd: target.dir });
      const tasks = (JSON.parse(status.stdout) as { tasks: Array<{ taskId: string; status: string }> }).tasks;
      expect(tasks).toEqual([expect.objectContaining({ taskId: "hang", status: "timed_out" })]);
      const pidFile = readdirSync(marksDir(target)).find((f) => f.endsWith(".pid"));
      expect(pidFile).toBeDefined();
      const pid = readPid(join(marksDir(target), pidFile!));
      await waitFor(
        "the stubborn action gone",
        () => isAlive(pid),
        (alive) => !alive,
        { timeoutMs: 5_000 },
      );
      await target.cleanup(false);
    } catch (e) {
      await target.cleanup(true);
      throw e;
    }
  });
});

describe("bad node configs fail at start with the key path", () => {
  const cases: Array<[string, string, string]> = [
    ["unknown key", 'node_id = "n"\ncolour = "red"\n', "colour: unknown key"],
    ["wrong type", 'node_id = "n"\ncapacity = "two"\n', "capacity: expected a number, got a string"],
    ["bad store", 'node_id = "n"\nstore = "mysql://db/x"\n', "store: must be"],
    ["empty store", 'node_id = "n"\nstore = ""\n', "store:"],
    [
      "action without argv",
      'node_id = "n"\n[actions.build]\ntimeout = "1m"\n',
      "actions.build.argv: required",
    ],
    [
      "bad lease",
      'node_id = "n"\n[lease]\nttl = "2s"\nrenew_every = "5s"\n',
      "lease.renew_every: must be shorter than lease.ttl",
    ],
  ];
  for (const [name, toml, message] of cases) {
    it(name, async () => {
      const file = join(cwd, `${name.replaceAll(" ", "-")}.toml`);
      writeFileSync(file, toml);
      const r = await track(cli(["node", "--config", file], { cwd, timeoutMs: 20_000 }));
      expect(r.code).toBe(2);
      expect(r.stderr).toContain(message);
      expect(r.stderr).toContain("invalid config");
    });
  }

  it("a store that cannot be reached: a command exits 1 naming it, dagbot node and dagbot start retry; none shows its password", async () => {
    const file = join(cwd, "unreachable.toml");
    writeFileSync(file, 'node_id = "n"\nstore = "postgres://dagbot:hunter2@127.0.0.1:1/none"\n');
    const named = "postgres://dagbot:[redacted]@127.0.0.1:1/none";
    const r = await track(cli(["status", "--config", file], { cwd, timeoutMs: 20_000 }));
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`cannot open the store ${named}`);
    expect(r.stderr).not.toContain("hunter2");

    // `dagbot node` and `dagbot start` wait for the store instead of exiting (a fleet restarted
    // while PostgreSQL is down comes back whole); they say so on each attempt and stop cleanly on SIGTERM.
    const chatFile = join(cwd, "unreachable-chat.toml");
    writeFileSync(
      chatFile,
      'node_id = "n"\nstore = "postgres://dagbot:hunter2@127.0.0.1:1/none"\n' +
        '[matrix]\nhomeserver_url = "http://127.0.0.1:1"\nuser_id = "@bot:example.org"\n' +
        'access_token = "fake-token-value"\nrooms = ["!room:example.org"]\n',
    );
    for (const [command, config] of [
      ["node", file],
      ["start", chatFile],
    ] as const)
      await retriesTheStore(command, config, named);
  });

  async function retriesTheStore(command: string, file: string, named: string): Promise<void> {
    const node = spawn(process.execPath, [CLI, command, "--config", file], {
      cwd,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    node.stdout.on("data", (c: Buffer) => (output += c.toString()));
    node.stderr.on("data", (c: Buffer) => (output += c.toString()));
    const exited = new Promise<number | null>((done) => node.once("exit", (code) => done(code)));
    try {
      await track(
        waitFor(
          "two retry lines",
          () => output.match(/retrying in/g)?.length ?? 0,
          (n) => n >= 2,
          {
            timeoutMs: 15_000,
            intervalMs: 50,
          },
        ),
      );
    } finally {
      node.kill("SIGTERM");
    }
    expect(await exited, `${command}: ${output.slice(-500)}`).toBe(0);
    expect(output).toContain(named);
    expect(output).not.toContain("hunter2");
  }

  it("a missing config file", async () => {
    const r = await track(cli(["status", "--config", join(cwd, "nope.toml")], { cwd }));
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("no such file");
  });
});

describe("--help", () => {
  for (const command of ["run", "node", "submit", "status", "nodes", "cancel", "cap"]) {
    it(command, async () => {
      const r = await cli([command, "--help"], { cwd });
      expect(r.code).toBe(0);
      expect(r.stdout).toContain(`Usage: dagbot ${command}`);
      expect(r.stdout).toContain("args > env > file");
      expect(r.stdout).toContain("--config");
    });
  }
});
