/**
 * Holes a careless operator or a hostile room member could use, through real processes and
 * real files: a backtracking pattern cannot freeze a node, and the DAG library does not follow links
 * out of its folder.
 */
import { mkdirSync, readdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { libraryLoader } from "../../src/composition/command-step.js";
import { cli, requireBuild } from "../support/engine-cluster.js";
import { scratchFolder } from "../support/scratch-folder.js";

const scratch = scratchFolder("security-cli");
const { track } = scratch;
let cwd: string;

beforeAll(() => {
  requireBuild();
  cwd = scratch.path;
});

describe("argument patterns are matched in linear time", () => {
  it("`(a+)+b` against 40 a's and a '!' is refused at once instead of freezing the node", async () => {
    const config = join(cwd, "redos.toml");
    writeFileSync(
      config,
      [
        'node_id = "redos"',
        `store = "sqlite:${join(cwd, "redos.db")}"`,
        "[actions.grep]",
        'argv = ["echo", "{word}"]',
        "args = { word = { pattern = '(a+)+b' } }",
      ].join("\n"),
    );
    const dag = join(cwd, "redos.json");
    const word = `${"a".repeat(40)}!`;
    writeFileSync(dag, JSON.stringify({ id: "redos", tasks: [{ id: "t", action: "grep", args: { word } }] }));
    // A backtracking engine needs about 2^40 steps here: the run would never end and the CLI helper
    // would kill it after its 60 s budget. A linear engine answers in milliseconds.
    const r = await track(cli(["run", dag, "--config", config], { cwd }));
    expect(r.code, r.stderr).toBe(1);
    expect(`${r.stdout}\n${r.stderr}`).toContain('argument "word" does not match its pattern (a+)+b');
  });

  it("a pattern an RE2 engine cannot run (a backreference) is refused at config load, naming the key", async () => {
    const config = join(cwd, "backref.toml");
    writeFileSync(
      config,
      [
        'node_id = "backref"',
        `store = "sqlite:${join(cwd, "backref.db")}"`,
        "[actions.pair]",
        'argv = ["echo", "{word}"]',
        "args = { word = { pattern = '(a)\\1' } }",
      ].join("\n"),
    );
    const r = await track(cli(["run", join(cwd, "redos.json"), "--config", config], { cwd }));
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(
      "actions.pair.args.word.pattern: is not a valid regular expression (RE2 syntax",
    );
  });
});

describe("arguments are checked when the DAG is published", () => {
  it("`dagbot run` with an argument its action refuses stores no run and runs nothing", async () => {
    const marks = join(cwd, "marks");
    mkdirSync(marks, { recursive: true });
    const config = join(cwd, "publish-check.toml");
    writeFileSync(
      config,
      [
        'node_id = "publish-check"',
        `store = "sqlite:${join(cwd, "publish-check.db")}"`,
        "[actions.touch]",
        `argv = ["touch", "${join(marks, "ran")}", "{name}"]`,
        "args = { name = { pattern = '[a-z]{1,8}' } }",
        `cwd = "${marks}"`,
      ].join("\n"),
    );
    const dag = join(cwd, "bad-args.json");
    writeFileSync(
      dag,
      JSON.stringify({
        id: "bad-args",
        tasks: [
          { id: "first", action: "touch", args: { name: "ok" } },
          { id: "second", action: "touch", args: { name: "NOT-OK" }, needs: ["first"] },
        ],
      }),
    );
    const r = await track(cli(["run", dag, "--config", config], { cwd }));
    expect(r.code).not.toBe(0);
    expect(`${r.stdout}\n${r.stderr}`).toContain(
      'tasks[1].args.name: argument "name" does not match its pattern [a-z]{1,8}',
    );
    // Refused before anything ran: not even the first, valid task.
    expect(readdirSync(marks)).toEqual([]);
    const status = await cli(["status", "--json", "--config", config], { cwd });
    expect((JSON.parse(status.stdout) as { runs: unknown[] }).runs).toEqual([]);
  });
});

describe("the DAG library", () => {
  it("reads its own files and links inside it, and refuses links that lead out of it", async () => {
    const library = join(cwd, "library");
    const outside = join(cwd, "outside");
    mkdirSync(join(library, "sub"), { recursive: true });
    mkdirSync(outside, { recursive: true });
    const dag = 'id = "x"\n[[tasks]]\nid = "a"\naction = "true"\n';
    writeFileSync(join(library, "plain.toml"), dag);
    writeFileSync(join(library, "sub", "real.toml"), dag);
    writeFileSync(join(outside, "secret.toml"), 'id = "stolen"\n');
    symlinkSync(join(library, "sub", "real.toml"), join(library, "inner.toml"));
    symlinkSync(join(outside, "secret.toml"), join(library, "escape.toml"));
    symlinkSync("../outside/secret.toml", join(library, "relative.toml"));
    symlinkSync(outside, join(library, "dir"));
    symlinkSync("/etc/passwd", join(library, "passwd.json"));

    const load = libraryLoader(library);
    expect(await load("plain")).toEqual({ ok: true, text: dag, format: "toml" });
    expect(await load("inner")).toEqual({ ok: true, text: dag, format: "toml" });
    for (const name of ["escape", "relative", "passwd"]) {
      const result = await load(name);
      expect(result.ok, name).toBe(false);
      expect(JSON.stringify(result)).toContain("leads out of the library folder");
      expect(JSON.stringify(result)).not.toContain("stolen");
    }
    expect(await load("dir")).toMatchObject({ ok: false, message: expect.stringContaining("no DAG named") });
  });
});
