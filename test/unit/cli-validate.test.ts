// `dagbot validate` as a user runs it: a real `node dist/cli.js` process per case, checking exit
// status, the printed plan of every example and the place of every bad fixture.
import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { detectFormat, formatIssue, parseDag } from "../../src/domain/dag.js";
import { idLine } from "../../src/domain/name-list.js";
import { planLevels } from "../../src/domain/plan.js";

const root = join(import.meta.dirname, "../..");
const cli = join(root, "dist/cli.js");
// The example DAGs (the folders beside them hold other examples, such as webhooks' node configs).
const examples = readdirSync(join(root, "config/examples"), { withFileTypes: true })
  .filter((entry) => entry.isFile())
  .map((entry) => `config/examples/${entry.name}`);
const fixtureDir = "test/fixtures/dags";
const expected = JSON.parse(readFileSync(join(root, fixtureDir, "expected.json"), "utf8")) as Record<
  string,
  { path: string; message: string }[]
>;
const fixtures = Object.keys(expected).map((name) => `${fixtureDir}/${name}`);

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function run(args: string[], input?: string): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [cli, ...args], { cwd: root, stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(input ?? "");
  });
}

/** The lines `validate` prints for a valid file, computed from the domain functions. */
function planLines(file: string): string[] {
  const text = readFileSync(join(root, file), "utf8");
  const result = parseDag(text, detectFormat(file, text));
  if (!result.ok) throw new Error(`${file}: ${result.issues.map(formatIssue).join("; ")}`);
  const levels = planLevels(result.dag);
  const count = result.dag.tasks.length;
  return [
    `${file}: dag ${result.dag.id}: ${count} task${count === 1 ? "" : "s"} in ${levels.length} level${levels.length === 1 ? "" : "s"}, hash ${result.hash.slice(0, 12)}`,
    // A level longer than one line (fan-out's 20 shards) names its first ids and counts the rest.
    ...levels.map((ids, level) => `  level ${level}: ${idLine(ids)}`),
  ];
}

function expectIssueLine(stdout: string, file: string, want: { path: string; message: string }): void {
  const prefix = want.path === "" ? `${file}: ` : `${file}: ${want.path}: `;
  const lines = stdout.split("\n").filter((line) => line.startsWith(prefix) && line.includes(want.message));
  expect(lines, `no line "${prefix}…${want.message}…" in:\n${stdout}`).not.toHaveLength(0);
}

beforeAll(() => {
  if (!existsSync(cli)) throw new Error(`${cli} is missing: run \`npm run build\` before these tests`);
});

describe("dagbot validate", () => {
  it("the built entry point is executable, so `npx dagbot` and the `dagbot` that the README's set-up links can run it", () => {
    expect(statSync(cli).mode & 0o111).toBe(0o111);
    // The shebang runs node (with the flags dagbot wants, through `env -S`) and the file itself
    // runs when executed directly, as npx does.
    expect(readFileSync(cli, "utf8").split("\n")[0]).toMatch(/^#!\/usr\/bin\/env (-S )?node( |$)/);
    const direct = execFileSync(cli, ["--version"], { encoding: "utf8" });
    expect(direct).toMatch(/\d+\.\d+\.\d+/);
  });

  it("prints the plan of every example and exits 0", async () => {
    const result = await run(["validate", ...examples]);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    expect(result.stdout).toBe(`${examples.flatMap(planLines).join("\n")}\n`);
  });

  it("exits 1 for each bad fixture, naming the place of each expected issue", async () => {
    // A few processes at a time: the machine has two cores.
    const results = new Map<string, Run>();
    for (let i = 0; i < fixtures.length; i += 3) {
      const batch = fixtures.slice(i, i + 3);
      const runs = await Promise.all(batch.map((file) => run(["validate", file])));
      batch.forEach((file, k) => results.set(file, runs[k]!));
    }
    for (const file of fixtures) {
      const result = results.get(file)!;
      expect(result.code, `${file}\n${result.stdout}${result.stderr}`).toBe(1);
      expect(result.stderr).toBe("");
      for (const want of expected[file.slice(fixtureDir.length + 1)]!)
        expectIssueLine(result.stdout, file, want);
      // Every line is "FILE: ..." so output stays greppable.
      for (const line of result.stdout.trimEnd().split("\n")) expect(line.startsWith(`${file}: `)).toBe(true);
    }
    // The one fixture without a known extension says how it was read.
    expect(results.get(`${fixtureDir}/cycle-sniffed.dag`)?.stdout).toContain(
      `${fixtureDir}/cycle-sniffed.dag: read as JSON, guessed from the content (name the file .json or .toml)`,
    );
  });

  it("exits 1 when any file is invalid, still printing the valid ones", async () => {
    const result = await run(["validate", "config/examples/hello.toml", `${fixtureDir}/cycle.toml`]);
    expect(result.code).toBe(1);
    expect(result.stdout).toContain(planLines("config/examples/hello.toml").join("\n"));
    expectIssueLine(result.stdout, `${fixtureDir}/cycle.toml`, {
      path: "tasks[0].needs[0]",
      message: "dependency cycle",
    });
  });

  it("prints one JSON result for all files with --json", async () => {
    const result = await run(["validate", "--json", "config/examples/diamond.json", ...fixtures]);
    expect(result.code).toBe(1);
    const report = JSON.parse(result.stdout) as { ok: boolean; files: Record<string, unknown>[] };
    expect(report.ok).toBe(false);
    expect(report.files.map((f) => f["file"])).toEqual(["config/examples/diamond.json", ...fixtures]);
    const diamond = parseDag(readFileSync(join(root, "config/examples/diamond.json"), "utf8"), "json");
    expect(report.files[0]).toEqual({
      file: "config/examples/diamond.json",
      ok: true,
      format: "json",
      dag: {
        id: "diamond",
        tasks: 4,
        hash: diamond.ok && diamond.hash,
        levels: [["start"], ["left", "right"], ["join"]],
      },
    });
    for (const entry of report.files.slice(1)) {
      expect(entry).toMatchObject({ ok: false, format: expect.stringMatching(/^(json|toml)$/) });
      const issues = entry["issues"] as { path: string; message: string }[];
      for (const want of expected[String(entry["file"]).slice(fixtureDir.length + 1)]!) {
        expect(issues).toContainEqual({ path: want.path, message: expect.stringContaining(want.message) });
      }
    }
  });

  it("exits 0 with --json when every file is valid", async () => {
    const result = await run(["validate", "--json", ...examples]);
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout)).toMatchObject({
      ok: true,
      files: examples.map((file) => ({ file, ok: true })),
    });
  });

  it("reads stdin for -, guessing the format", async () => {
    const result = await run(
      ["validate", "-"],
      readFileSync(join(root, "config/examples/hello.toml"), "utf8"),
    );
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(
      /^-: dag hello: 3 tasks in 3 levels, hash [0-9a-f]{12}\n {2}level 0: greet\n/,
    );
  });

  it("prints a level of 999 tasks as one bounded line: its first ids and how many more (--json has them all)", async () => {
    // 1,000 tasks is the limit: one to start, 999 after it (compact, under the 64 KiB document limit).
    const ids = Array.from({ length: 999 }, (_, i) => `shard_${String(i).padStart(4, "0")}`);
    const doc = JSON.stringify({
      id: "wide",
      tasks: [{ id: "a", action: "true" }, ...ids.map((id) => ({ id, action: "true", needs: ["a"] }))],
    });
    const result = await run(["validate", "-"], doc);
    expect(result.code, result.stderr).toBe(0);
    const level = result.stdout.split("\n").find((l) => l.startsWith("  level 1: ")) ?? "";
    const named = [...level.matchAll(/shard_\d{4}/g)].map((m) => m[0]);
    expect(named.length).toBeGreaterThan(1);
    expect(named).toEqual(ids.slice(0, named.length));
    expect(level).toMatch(new RegExp(`, … ${999 - named.length} more$`));
    expect(level.length).toBeLessThanOrEqual(120);
    expect(result.stdout.split("\n").every((l) => l.length <= 200)).toBe(true);
    const json = JSON.parse((await run(["validate", "--json", "-"], doc)).stdout) as {
      files: Array<{ dag: { levels: string[][] } }>;
    };
    expect(json.files[0]?.dag.levels[1]).toHaveLength(999);
  });

  it("says that a run `dagbot trigger` starts has its own hash, for a DAG with parameters", async () => {
    const doc = JSON.stringify({
      id: "nightly",
      params: { day: { pattern: "[0-9]{1,2}", default: "1" } },
      tasks: [{ id: "t", action: "echo", args: { message: "{params.day}" } }],
    });
    const withParams = await run(["validate", "-"], doc);
    expect(withParams.code).toBe(0);
    expect(withParams.stdout).toContain("each run `dagbot trigger` starts has its own hash");
    const plain = await run(
      ["validate", "-"],
      readFileSync(join(root, "config/examples/hello.toml"), "utf8"),
    );
    expect(plain.stdout).not.toContain("its own hash");
  });

  it("reports a file over 64 KiB and a file that is not UTF-8, exit 1", async () => {
    const dir = mkdtempSync(join(tmpdir(), "dagbot-validate-"));
    const big = join(dir, "big.json");
    const bigText = `{"id":"d","description":"${"x".repeat(70_000)}","tasks":[]}`;
    writeFileSync(big, bigText);
    const binary = join(dir, "binary.toml");
    writeFileSync(binary, Buffer.from([0x69, 0x64, 0x3d, 0x22, 0xff, 0xfe, 0x22]));
    const result = await run(["validate", big, binary]);
    expect(result.code).toBe(1);
    expect(result.stdout).toContain(
      `${big}: the document is ${bigText.length.toLocaleString("en-US")} bytes; at most 65,536 bytes (64 KiB) are allowed`,
    );
    expect(result.stdout).toContain(`${binary}: the file is not valid UTF-8 text`);
  });

  describe("usage errors exit 2", () => {
    it("no file", async () => {
      const result = await run(["validate"]);
      expect(result.code).toBe(2);
      expect(result.stderr).toContain("missing required argument 'files'");
      expect(result.stdout).toBe("");
    });

    it("an unknown option", async () => {
      const result = await run(["validate", "--strict", "config/examples/hello.toml"]);
      expect(result.code).toBe(2);
      expect(result.stderr).toContain("unknown option '--strict'");
    });

    it("a missing file, even next to a valid one, which is still checked", async () => {
      const result = await run(["validate", "config/examples/hello.toml", "no/such/dag.toml"]);
      expect(result.code).toBe(2);
      expect(result.stderr).toBe("dagbot validate: cannot read no/such/dag.toml: no such file\n");
      expect(result.stdout).toContain("config/examples/hello.toml: dag hello");
    });

    it("a directory", async () => {
      const result = await run(["validate", "config/examples"]);
      expect(result.code).toBe(2);
      expect(result.stderr).toBe("dagbot validate: cannot read config/examples: it is a directory\n");
    });

    it("a missing file with --json: reported in the JSON", async () => {
      const result = await run(["validate", "--json", "missing.json"]);
      expect(result.code).toBe(2);
      expect(JSON.parse(result.stdout)).toEqual({
        ok: false,
        files: [{ file: "missing.json", ok: false, error: "cannot read missing.json: no such file" }],
      });
    });
  });

  describe("--config: tasks checked against a node config's actions", () => {
    const dir = mkdtempSync(join(tmpdir(), "dagbot-validate-config-"));
    const config = join(dir, "node.toml");
    writeFileSync(
      config,
      [
        'node_id = "v"',
        "[actions.find]",
        'argv = ["find", "{dir}", "-name", "*.log"]',
        "args = { dir = { pattern = '[A-Za-z0-9_./-]+' } }",
        "[actions.cat]",
        'argv = ["cat", "{file}"]',
        "args = { file = { pattern = '[A-Za-z0-9_./-]+', allow_leading_dash = true } }",
        "[actions.safe]",
        'argv = ["cat", "--", "{file}", "--out={file}"]',
        "args = { file = { pattern = '[A-Za-z0-9_][A-Za-z0-9_./-]*' } }",
        "[actions.sleep]",
        'argv = ["sleep", "{seconds}"]',
        "args = { seconds = { pattern = '[0-9]{1,3}' } }",
      ].join("\n"),
    );
    const dag = (name: string, tasks: unknown[]): string => {
      const file = join(dir, `${name}.json`);
      writeFileSync(file, JSON.stringify({ id: name, tasks }));
      return file;
    };

    it("warns on whole-entry arguments whose pattern admits a leading '-', and not on safe ones", async () => {
      const ok = dag("fine", [{ id: "t", action: "sleep", args: { seconds: "5" } }]);
      const result = await run(["validate", "--config", config, ok]);
      expect(result.code, result.stderr).toBe(0);
      const lines = result.stderr.trim().split("\n");
      expect(lines).toHaveLength(2);
      expect(lines[0]).toMatch(
        /node\.toml: actions\.find\.args\.dir\.pattern: warning: admits a value starting with "-" \(e\.g\. "-"\) for \{dir\}/,
      );
      expect(lines[1]).toMatch(
        /actions\.cat\.args\.file\.pattern: warning: allows values starting with "-" .* no "--" comes before it/,
      );
      expect(result.stdout).toContain("dag fine: 1 task");
    });

    it("refuses a DAG whose arguments the actions would refuse at run time, naming each place", async () => {
      const bad = dag("bad", [
        { id: "a", action: "sleep", args: { seconds: "forever" } },
        { id: "b", action: "sleep", args: {} },
        { id: "c", action: "find", args: { dir: "-delete" } },
        { id: "d", action: "sleep", args: { seconds: "1", extra: "x" } },
        { id: "e", action: "nope" },
      ]);
      const result = await run(["validate", "--config", config, bad]);
      expect(result.code).toBe(1);
      for (const line of [
        `${bad}: tasks[0].args.seconds: argument "seconds" does not match its pattern [0-9]{1,3}`,
        `${bad}: tasks[1].args.seconds: argument "seconds" is missing (action "sleep" requires it)`,
        `${bad}: tasks[2].args.dir: argument "dir" starts with "-"`,
        `${bad}: tasks[3].args.extra: argument "extra" is not accepted by action "sleep"`,
        `${bad}: tasks[4].action: unknown action "nope"`,
      ]) {
        expect(result.stdout).toContain(line);
      }
      const json = await run(["validate", "--json", "--config", config, bad]);
      const doc = JSON.parse(json.stdout) as { ok: boolean; warnings: unknown[]; files: unknown[] };
      expect(doc.ok).toBe(false);
      expect(doc.warnings).toHaveLength(2);
    });

    it("a bad config is a usage error naming its key", async () => {
      const broken = join(dir, "broken.toml");
      writeFileSync(
        broken,
        'node_id = "v"\n[actions.x]\nargv = ["echo", "{v}"]\nargs = { v = { pattern = "(?=a)" } }\n',
      );
      const result = await run(["validate", "--config", broken, "config/examples/hello.toml"]);
      expect(result.code).toBe(2);
      expect(result.stderr).toContain("actions.x.args.v.pattern: is not a valid regular expression");
    });
  });

  it("prints help with exit 0", async () => {
    const result = await run(["validate", "--help"]);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("Usage: dagbot validate [options] <files...>");
  });
});
