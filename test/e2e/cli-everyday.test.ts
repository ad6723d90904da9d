// The CLI on day two, as real processes: a closed pipe, NO_COLOR and terminals, read-only commands
// with a bot's config but no token, `submit` with no live node, and task output from the shell.
import { spawn } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import type { NodeProcess } from "../support/engine-cluster.js";
import {
  CLI,
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
import { untilNodeBeats, waitFor } from "../support/store-wait.js";
import { Terminal } from "../support/terminal.js";
import { openStore } from "../../src/adapters/store-factory.js";
import { scratchFolder } from "../support/scratch-folder.js";

const scratch = scratchFolder("cli-everyday");
const { track } = scratch;
let cwd: string;

beforeAll(() => {
  requireBuild();
  cwd = scratch.path;
});

/** Makes an empty store at `path`, as a node's first start does: read-only commands create none. */
async function makeStore(path: string): Promise<void> {
  await (await openStore({ kind: "sqlite", path })).close();
}

describe("a closed pipe", () => {
  it("`dagbot status` whose reader has gone ends quietly, with no EPIPE stack", async () => {
    await makeStore(join(cwd, "pipe.db"));
    // The reader end closes before dagbot writes, as `dagbot status | head -1` does once head has its line.
    const result = await track(
      new Promise<{ code: number | null; stderr: string }>((done) => {
        const child = spawn(process.execPath, [CLI, "status", "--store", `sqlite:${join(cwd, "pipe.db")}`], {
          cwd,
          stdio: ["ignore", "pipe", "pipe"],
        });
        child.stdout.destroy();
        let stderr = "";
        child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
        child.on("exit", (code) => done({ code, stderr }));
      }),
    );
    expect(result.stderr).not.toContain("EPIPE");
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
  });
});

/** Runs `dagbot ARGS` on a pseudo-terminal (util-linux `script`), returning everything it drew. */
function onTerminal(
  args: string[],
  env: Record<string, string>,
  size: { rows: number; cols: number } | null = null,
): Promise<{ code: number | null; out: string }> {
  const dagbot = [process.execPath, CLI, ...args].map((a) => `'${a.replaceAll("'", "'\\''")}'`).join(" ");
  const command = size === null ? dagbot : `stty rows ${size.rows} cols ${size.cols} && ${dagbot}`;
  return new Promise((done) => {
    const child = spawn("script", ["-qec", command, "/dev/null"], {
      cwd,
      env: { ...process.env, DAGBOT_LOG_LEVEL: "warn", ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout.on("data", (c: Buffer) => (out += c.toString()));
    child.stderr.on("data", (c: Buffer) => (out += c.toString()));
    child.on("exit", (code) => done({ code, out }));
  });
}

// A colour or style change (cursor moves end in other letters).
const SGR = new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*m`);

describe("colours", () => {
  const hello = join(REPO, "config", "examples", "hello.toml");

  it("are used on a terminal", async () => {
    const r = await track(
      onTerminal(["run", hello, "--store", `sqlite:${join(cwd, "tty.db")}`], { NO_COLOR: "" }),
    );
    expect(r.code, r.out).toBe(0);
    expect(r.out).toContain("\x1b[0J"); // drawn in place: it is a terminal
    expect(r.out).toMatch(SGR);
  });

  it("are not used with NO_COLOR, though the view is still redrawn in place", async () => {
    const r = await track(
      onTerminal(["run", hello, "--store", `sqlite:${join(cwd, "tty-no-color.db")}`], { NO_COLOR: "1" }),
    );
    expect(r.code, r.out).toBe(0);
    expect(r.out).toContain("\x1b[0J");
    expect(r.out).not.toMatch(SGR);
  });

  it("are not used off a terminal", async () => {
    const r = await track(
      cli(["run", hello, "--store", `sqlite:${join(cwd, "pipe-run.db")}`], { cwd, env: { NO_COLOR: "" } }),
    );
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).not.toContain("\x1b[");
  });
});

describe("the live view on a terminal shorter than the DAG", () => {
  it("leaves no stale frame in the scrollback: only the last frame and the summary remain", async () => {
    const dag = join(cwd, "tall.json");
    const tasks = Array.from({ length: 30 }, (_, i) => ({
      id: `part_${String(i).padStart(2, "0")}`,
      action: "sleep",
      args: { seconds: "0.2" },
    }));
    writeFileSync(dag, JSON.stringify({ id: "nightly_warehouse_rebuild", tasks }));
    const size = { rows: 8, cols: 40 };
    const r = await track(
      onTerminal(
        ["run", dag, "--nodes", "2", "--store", `sqlite:${join(cwd, "tall.db")}`],
        { NO_COLOR: "" },
        size,
      ),
    );
    expect(r.code, r.out).toBe(0);
    const term = new Terminal(size.rows, size.cols);
    term.write(r.out);
    const everything = [...term.scrollback, ...term.lines()];
    const frames = everything.filter((l) => /^run nightly_warehouse_rebuild [^(]/.test(l));
    expect(frames, everything.join("\n")).toHaveLength(1);
    expect(everything.filter((l) => /^run nightly_warehouse_rebuild \(/.test(l))).toHaveLength(1);
  });
});

describe("read-only commands with a bot's config", () => {
  it("run without its access token (they need only the store); `start` still asks for it", async () => {
    const config = join(cwd, "bot.toml");
    writeFileSync(
      config,
      `node_id = "bot-a"\nstore = "sqlite:${join(cwd, "bot.db")}"\n` +
        `[matrix]\nhomeserver_url = "http://127.0.0.1:1"\nuser_id = "@bot-a:example.org"\nrooms = ["!room:example.org"]\n`,
    );
    const env = { DAGBOT_ACCESS_TOKEN: "" };
    await makeStore(join(cwd, "bot.db"));
    const status = await track(cli(["status", "--config", config], { cwd, env }));
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toContain("no runs in room !room:example.org");
    const nodes = await track(cli(["nodes", "--config", config, "--json"], { cwd, env }));
    expect(nodes.code, nodes.stderr).toBe(0);
    expect(JSON.parse(nodes.stdout)).toMatchObject({ nodes: [], leaders: [] });
    // Two nodes' heartbeats as chat nodes write them: one device cross-signed, one not and with a
    // decryption failure; `dagbot nodes` says so (docs/architecture.md §12).
    const reason = "withheld: the sender encrypts only to verified devices (withheld_code=m.unverified)";
    const store = await openStore({ kind: "sqlite", path: join(cwd, "bot.db") });
    const beat = { labels: [], capacity: 1, actions: [], roomIds: ["!room:example.org"] };
    await store.heartbeat({ ...beat, session: { nodeId: "signed", bootId: "b1" }, deviceSigned: true });
    await store.heartbeat({
      ...beat,
      session: { nodeId: "unsigned", bootId: "b2" },
      deviceSigned: false,
      undecryptable: 2,
      undecryptableReason: reason,
    });
    await store.close();
    const text = await track(cli(["nodes", "--config", config], { cwd, env }));
    expect(text.code, text.stderr).toBe(0);
    const line = (id: string): string => text.stdout.split("\n").find((l) => l.startsWith(id)) ?? "";
    expect(line("signed")).toMatch(/device cross-signed$/);
    expect(line("unsigned")).toContain(`device NOT cross-signed: `);
    expect(line("unsigned")).toContain(`2 undecryptable events (last: ${reason})`);
    const json = await track(cli(["nodes", "--config", config, "--json"], { cwd, env }));
    expect((JSON.parse(json.stdout) as { nodes: unknown[] }).nodes).toMatchObject([
      { nodeId: "signed", deviceSigned: true, undecryptable: 0, undecryptableReason: null },
      { nodeId: "unsigned", deviceSigned: false, undecryptable: 2, undecryptableReason: reason },
    ]);
    const start = await track(
      cli(["start", "--config", config, "--state-dir", join(cwd, "state")], { cwd, env }),
    );
    expect(start.code).toBe(2);
    expect(start.stderr).toContain("matrix.access_token: required");
  });
});

describe("submit with no live node", () => {
  it("says so at once and exits 3; the queued command runs when a node starts; `nodes --check` tells the two apart", async () => {
    const target = await createTarget("sqlite", "no-node");
    let node: NodeProcess | null = null;
    try {
      const config = writeNodeConfig(target, { nodeId: "late" });
      const dag = writeDag(target, {
        id: "queued",
        tasks: [{ id: "a", action: "echo", args: { message: "hi" } }],
      });
      const r = await track(cli(["submit", dag, "--config", config, "--wait", "20"], { cwd: target.dir }));
      expect(r.code, r.stderr).toBe(3);
      expect(r.stderr).toContain(
        "no node of room local has a heartbeat; the command is queued and will run when one starts",
      );
      const store = await target.open();
      try {
        expect(await store.getRun(ROOM, "queued")).toBeNull();
        const dead = await track(cli(["nodes", "--check", "--config", config], { cwd: target.dir }));
        expect(dead.code).toBe(1);
        expect(dead.stdout).toContain("node late: no heartbeat");
        node = startNode(target, config, "late");
        const run = await track(
          waitFor(
            "the queued publish to take effect",
            () => store.getRun(ROOM, "queued"),
            (x) => x !== null,
            {
              timeoutMs: 20_000,
              intervalMs: 50,
            },
          ),
        );
        expect(run?.publisher).toMatch(/^local:/);
        // The container healthcheck: the node's own heartbeat is fresh.
        const alive = await track(cli(["nodes", "--check", "--config", config], { cwd: target.dir }));
        expect(alive.code, alive.stdout).toBe(0);
        expect(alive.stdout).toContain("node late: alive");
      } finally {
        await store.close();
      }
      await killAll([node]);
      await target.cleanup(false);
    } catch (e) {
      if (node !== null) await killAll([node]);
      await target.cleanup(true);
      throw e;
    }
  });
});

describe("task output from the CLI", () => {
  it("`status` of a failed run names the failed task with its exit status and its skipped dependents", async () => {
    const target = await createTarget("sqlite", "failure-words");
    try {
      const say = join(target.dir, "exit.mjs");
      writeFileSync(say, "process.exit(Number(process.argv[2]));\n");
      const extra =
        `[actions.exits]\nargv = [${JSON.stringify(process.execPath)}, ${JSON.stringify(say)}, "{code}"]\n` +
        `args = { code = { pattern = '[0-9]{1,3}' } }\nkill_grace = "300ms"\n`;
      const config = writeNodeConfig(target, { nodeId: "solo", extra });
      const dag = writeDag(target, {
        id: "deploy_prod",
        tasks: [
          { id: "fetch", action: "exits", args: { code: "0" } },
          { id: "migrate", action: "exits", args: { code: "1" }, needs: ["fetch"] },
          { id: "rollout", action: "exits", args: { code: "0" }, needs: ["migrate"] },
          { id: "smoke_test", action: "exits", args: { code: "0" }, needs: ["rollout"] },
        ],
      });
      const ran = await track(cli(["run", dag, "--config", config, "--nodes", "1"], { cwd: target.dir }));
      expect(ran.code, ran.stderr).toBe(1);
      const plain = await track(cli(["status", "deploy_prod", "--config", config], { cwd: target.dir }));
      expect(plain.code, plain.stderr).toBe(0);
      expect(plain.stdout).toMatch(
        /^run deploy_prod .* failed in .*\n {2}`migrate` failed \(exit 1\); `rollout`, `smoke_test` skipped$/m,
      );
      const json = await track(
        cli(["status", "deploy_prod", "--json", "--config", config], { cwd: target.dir }),
      );
      expect(JSON.parse(json.stdout)).toMatchObject({
        failure: "`migrate` failed (exit 1); `rollout`, `smoke_test` skipped",
      });
      await target.cleanup(false);
    } catch (e) {
      await target.cleanup(true);
      throw e;
    }
  });

  it("`logs` shows a failed task's kept output and exit status, `--follow` waits for a running one, `list` lists runs", async () => {
    const target = await createTarget("sqlite", "logs");
    let node: NodeProcess | null = null;
    try {
      // An action that writes, waits, writes again and fails with a given status.
      const say = join(target.dir, "say.mjs");
      writeFileSync(
        say,
        "const [ms, code] = process.argv.slice(2);\nconsole.log('partial results');\n" +
          "setTimeout(() => { console.error('gave up'); process.exit(Number(code)); }, Number(ms));\n",
      );
      const extra =
        `[actions.say]\nargv = [${JSON.stringify(process.execPath)}, ${JSON.stringify(say)}, "{ms}", "{code}"]\n` +
        `args = { ms = { pattern = '[0-9]{1,5}' }, code = { pattern = '[0-9]{1,3}' } }\nkill_grace = "300ms"\n`;
      const config = writeNodeConfig(target, { nodeId: "solo", extra });
      const failing = writeDag(target, {
        id: "boom",
        tasks: [{ id: "x", action: "say", args: { ms: "0", code: "3" } }],
      });
      const ran = await track(cli(["run", failing, "--config", config, "--nodes", "1"], { cwd: target.dir }));
      expect(ran.code, ran.stderr).toBe(1);

      const shown = await track(cli(["logs", "boom", "x", "--config", config], { cwd: target.dir }));
      expect(shown.code, shown.stderr).toBe(0);
      expect(shown.stdout).toContain("partial results");
      expect(shown.stdout).toContain("gave up");
      expect(shown.stderr).toMatch(/task x of boom \(run [0-9a-f-]+\): failed, exit 3/);
      const asJson = await track(
        cli(["logs", "boom", "x", "--json", "--config", config], { cwd: target.dir }),
      );
      const parsed = JSON.parse(asJson.stdout) as {
        status: string;
        exitCode: number;
        output: string;
        runId: string;
      };
      expect(parsed).toMatchObject({ status: "failed", exitCode: 3 });
      expect(parsed.output).toContain("partial results");
      // The run id works as well as the DAG id.
      const byId = await track(cli(["logs", parsed.runId, "x", "--config", config], { cwd: target.dir }));
      expect(byId.stdout).toContain("partial results");
      const status = await track(
        cli(["status", parsed.runId, "--json", "--config", config], { cwd: target.dir }),
      );
      expect(status.code, status.stderr).toBe(0);
      expect(JSON.parse(status.stdout).run).toMatchObject({ dagId: "boom", runId: parsed.runId });
      const unknown = await track(cli(["logs", "boom", "nope", "--config", config], { cwd: target.dir }));
      expect(unknown.code).toBe(1);
      expect(unknown.stderr).toContain('run boom has no task "nope" (its tasks: x)');

      node = startNode(target, config, "solo");
      const store = await target.open();
      try {
        await untilNodeBeats(store);
        const slow = writeDag(target, {
          id: "slow",
          tasks: [{ id: "y", action: "say", args: { ms: "3000", code: "0" } }],
        });
        const submitted = await track(
          cli(["submit", slow, "--config", config, "--confirm"], { cwd: target.dir }),
        );
        expect(submitted.code, submitted.stderr).toBe(0);
        const followed = await track(
          cli(["logs", "slow", "y", "--follow", "--config", config], { cwd: target.dir }),
        );
        expect(followed.code, followed.stderr).toBe(0);
        expect(followed.stderr).toMatch(/task y of slow .*: succeeded, exit 0/);
        expect(followed.stdout).toContain("partial results");
        expect(followed.stdout).toContain("gave up");
      } finally {
        await store.close();
      }

      const listed = await track(cli(["list", "--json", "--config", config], { cwd: target.dir }));
      expect(listed.code, listed.stderr).toBe(0);
      const runs = (JSON.parse(listed.stdout) as { runs: Array<{ run: { dagId: string; status: string } }> })
        .runs;
      expect(runs.map(({ run: r }) => [r.dagId, r.status]).sort()).toEqual([
        ["boom", "failed"],
        ["slow", "succeeded"],
      ]);
      const plain = await track(cli(["list", "--config", config], { cwd: target.dir }));
      // One id per run, its name (the uuid is in --json as runId).
      expect(plain.stdout).toMatch(/^boom\s+failed\s+0\/1 succeeded · 1 failed$/m);
      expect(plain.stdout).not.toMatch(/[0-9a-f]{8}-[0-9a-f]{4}-/);

      await killAll([node]);
      await target.cleanup(false);
    } catch (e) {
      if (node !== null) await killAll([node]);
      await target.cleanup(true);
      throw e;
    }
  });
});

describe("run lists from the CLI", () => {
  it("`list [DAG_ID] --status --limit --cursor --json` pages the room's runs, filtered; a bad option exits 2", async () => {
    const dir = join(cwd, "lists");
    mkdirSync(dir);
    const store = ["--store", "sqlite:./lists.db"];
    const dag = (id: string, action: string) => {
      const path = join(dir, `${id}.json`);
      writeFileSync(path, JSON.stringify({ id, tasks: [{ id: "t", action, args: {} }] }));
      return path;
    };
    for (const [id, action, code] of [
      ["a", "true", 0],
      ["b", "fail", 1],
      ["c", "true", 0],
    ] as const) {
      const ran = await track(cli(["run", dag(id, action), ...store, "--nodes", "1"], { cwd: dir }));
      expect(ran.code, ran.stderr).toBe(code);
    }
    const page = async (...args: string[]) => {
      const r = await track(cli(["list", ...args, ...store, "--json"], { cwd: dir }));
      expect(r.code, r.stderr).toBe(0);
      const view = JSON.parse(r.stdout) as { runs: Array<{ run: { dagId: string } }>; next: string | null };
      return { ids: view.runs.map((x) => x.run.dagId), next: view.next };
    };
    const first = await page("--limit", "2");
    expect(first.ids).toEqual(["c", "b"]);
    expect(first.next).toEqual(expect.any(String));
    expect(await page("--limit", "2", "--cursor", first.next!)).toEqual({ ids: ["a"], next: null });
    expect((await page("--status", "failed")).ids).toEqual(["b"]);
    expect((await page("--status", "failed,succeeded")).ids).toEqual(["c", "b", "a"]);
    expect((await page("a")).ids).toEqual(["a"]);
    expect((await page("b", "--status", "succeeded")).ids).toEqual([]);
    // A filter that matches nothing, in a room with runs, says so (not "no runs in room local").
    const noneFailed = await track(cli(["list", "--status", "canceled", ...store], { cwd: dir }));
    expect(noneFailed.code, noneFailed.stderr).toBe(0);
    expect(noneFailed.stdout).toBe("no canceled runs in room local (3 runs in other states)\n");
    const plain = await track(cli(["list", "--limit", "1", ...store], { cwd: dir }));
    expect(plain.stdout).toMatch(/^c\s+succeeded\s+1\/1 succeeded\n$/);
    expect(plain.stderr).toMatch(/--cursor [A-Za-z0-9_-]+\n$/);
    const unknown = await track(cli(["list", "nope", ...store], { cwd: dir }));
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('no DAG or run "nope"');
    for (const bad of [
      ["--limit", "101"],
      ["--status", "bogus"],
      ["--cursor", "xyz"],
    ]) {
      const refused = await track(cli(["list", ...bad, ...store], { cwd: dir }));
      expect(refused.code, refused.stderr).toBe(2);
    }
  }, 90_000);
});

describe("a paused room", () => {
  it("`dagbot status RUN` says the room is paused while its cap is 0", async () => {
    const target = await createTarget("sqlite", "paused");
    let node: NodeProcess | null = null;
    try {
      const config = writeNodeConfig(target, { nodeId: "solo" });
      const capped = await track(cli(["cap", "0", "--config", config], { cwd: target.dir }));
      expect(capped.code, capped.stderr).toBe(0);
      node = startNode(target, config, "solo");
      const store = await target.open();
      try {
        await untilNodeBeats(store);
      } finally {
        await store.close();
      }
      const dag = writeDag(target, {
        id: "held",
        tasks: [{ id: "a", action: "echo", args: { message: "x" } }],
      });
      const submitted = await track(
        cli(["submit", dag, "--config", config, "--confirm"], { cwd: target.dir }),
      );
      expect(submitted.code, submitted.stderr).toBe(0);
      const shown = await track(cli(["status", "held", "--config", config], { cwd: target.dir }));
      expect(shown.code, shown.stderr).toBe(0);
      expect(shown.stdout).toMatch(/a\s+(blocked|queued)/);
      expect(shown.stdout).toContain("room local is paused (cap 0)");

      const resumed = await track(cli(["cap", "2", "--config", config], { cwd: target.dir }));
      expect(resumed.code, resumed.stderr).toBe(0);
      const after = await track(cli(["status", "held", "--config", config], { cwd: target.dir }));
      expect(after.stdout).not.toContain("paused");
      await killAll([node]);
      await target.cleanup(false);
    } catch (e) {
      if (node !== null) await killAll([node]);
      await target.cleanup(true);
      throw e;
    }
  });
});
