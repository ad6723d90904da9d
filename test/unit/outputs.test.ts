/**
 * Task outputs: declarations and references at parse, the DAGBOT_OUTPUT file's rules,
 * substitution into a dependent's arguments, and the checks publish defers to run time.
 */
import { describe, expect, it } from "vitest";
import { checkArgs, renderArgv } from "../../src/domain/action-argv.js";
import { dagHash } from "../../src/domain/canonical-hash.js";
import { parseDag } from "../../src/domain/dag.js";
import { checkTaskArguments } from "../../src/domain/dag.js";
import type { ParsedDag } from "../../src/domain/model.js";
import {
  FAN_OUT_LIMITS,
  type OutputDeclaration,
  OUTPUT_LIMITS,
  outputValueText,
  oversizeProblem,
  parseOutputFile,
  substituteOutputs,
} from "../../src/domain/outputs.js";
import { resolveParams } from "../../src/domain/params.js";
import { withPublished } from "../../src/app/worker.js";
import type { RunSummary, TaskLine } from "../../src/app/commands/outcome.js";
import { renderOutcome } from "../../src/app/render/reply.js";
import { summarizeTasks } from "../../src/domain/run-status.js";
import type { ExecResult } from "../../src/ports/executor.js";
import type { ClaimedTask, TaskResult } from "../../src/ports/store.js";
import { taskRecord } from "../support/fake-task-claimer.js";

const RELEASE = `id = "release"

[[tasks]]
id = "build"
action = "build"
outputs = { version = "[0-9]+\\\\.[0-9]+\\\\.[0-9]+", commit = "[0-9a-f]{7,40}" }

[[tasks]]
id = "test"
action = "echo"
needs = ["build"]

[[tasks]]
id = "deploy"
action = "deploy"
needs = ["test"]
args = { version = "{tasks.build.outputs.version}", note = "commit {tasks.build.outputs.commit} as v{tasks.build.outputs.version}" }
`;

function parsed(text: string): ParsedDag {
  const result = parseDag(text, "toml");
  if (!result.ok) throw new Error(JSON.stringify(result.issues));
  return result.dag;
}

function issuesOf(text: string): string[] {
  const result = parseDag(text, "toml");
  return result.ok ? [] : result.issues.map((i) => `${i.path}: ${i.message}`);
}

describe("outputs in the DAG document", () => {
  it("parses a task's outputs (name → pattern) and references through an ancestor's ancestor", () => {
    const dag = parsed(RELEASE);
    expect(dag.tasks[0]?.outputs).toEqual({
      version: "[0-9]+\\.[0-9]+\\.[0-9]+",
      commit: "[0-9a-f]{7,40}",
    });
    expect(dag.tasks[1]).not.toHaveProperty("outputs");
    expect(dag.tasks[2]?.args["version"]).toBe("{tasks.build.outputs.version}");
  });

  it("a DAG without outputs hashes as before (no outputs key on its tasks)", () => {
    const plain = parsed(`id = "x"\n[[tasks]]\nid = "a"\naction = "echo"\n`);
    expect(plain.tasks[0]).not.toHaveProperty("outputs");
    const empty = parsed(`id = "x"\n[[tasks]]\nid = "a"\naction = "echo"\noutputs = {}\n`);
    expect(dagHash(empty)).toBe(dagHash(plain));
  });

  it("refuses bad declarations: names, patterns beyond the parameter limits, non-strings, too many", () => {
    const one = (outputs: string): string[] =>
      issuesOf(`id = "x"\n[[tasks]]\nid = "a"\naction = "echo"\noutputs = ${outputs}\n`);
    expect(one(`{ "bad-name" = "x" }`).join("\n")).toMatch(
      /tasks\[0\]\.outputs\["bad-name"\]: output name contains "-"/,
    );
    expect(one(`{ v = "(a" }`).join("\n")).toMatch(/tasks\[0\]\.outputs\.v: is not a valid RE2 pattern/);
    expect(one(`{ v = "a{1000}" }`).join("\n")).toMatch(/repetition count is at most 100/);
    expect(one(`{ v = "(?:.{0,99}){0,99}" }`).join("\n")).toMatch(/too complex/);
    expect(one(`{ v = 3 }`).join("\n")).toMatch(/tasks\[0\]\.outputs\.v: expected the output's pattern/);
    expect(one(`{ v = "" }`).join("\n")).toMatch(/expected the output's pattern/);
    expect(one(`["v"]`).join("\n")).toMatch(/tasks\[0\]\.outputs: expected a table of outputs/);
    const many = Array.from({ length: OUTPUT_LIMITS.maxOutputs + 1 }, (_, i) => `o${i} = "x"`).join(", ");
    expect(one(`{ ${many} }`).join("\n")).toMatch(/has 33 outputs; at most 32/);
  });

  it("refuses a reference to an unknown task, a non-ancestor, an undeclared output, itself, or a malformed one", () => {
    const doc = (deployArgs: string, extra = ""): string =>
      `id = "x"
[[tasks]]
id = "build"
action = "build"
outputs = { version = "[0-9.]+" }
[[tasks]]
id = "side"
action = "echo"
outputs = { v = ".*" }
[[tasks]]
id = "deploy"
action = "deploy"
needs = ["build"]
args = ${deployArgs}
${extra}`;
    expect(issuesOf(doc(`{ v = "{tasks.biuld.outputs.version}" }`))).toEqual([
      'tasks[2].args.v: refers to {tasks.biuld.outputs.version}, but the DAG has no task "biuld"',
    ]);
    expect(issuesOf(doc(`{ v = "{tasks.side.outputs.v}" }`))).toEqual([
      'tasks[2].args.v: refers to {tasks.side.outputs.v}, but "side" is not among the tasks "deploy" needs (directly or through others), so it may not have run yet: add it to needs',
    ]);
    expect(issuesOf(doc(`{ v = "{tasks.build.outputs.tag}" }`))).toEqual([
      'tasks[2].args.v: refers to {tasks.build.outputs.tag}, but task "build" declares no output "tag" (it declares version)',
    ]);
    expect(issuesOf(doc(`{ v = "{tasks.deploy.outputs.x}" }`, `outputs = { x = "." }`))).toEqual([
      "tasks[2].args.v: refers to {tasks.deploy.outputs.x}, the task's own output; only a task it needs can give it one",
    ]);
    expect(issuesOf(doc(`{ v = "{tasks.build.output.version}" }`))).toEqual([
      'tasks[2].args.v: says "{tasks." but not as an output reference: write {tasks.TASK_ID.outputs.NAME}',
    ]);
    // A later task is no ancestor either, even when it declares the output.
    expect(issuesOf(doc(`{ v = "{tasks.build.outputs.version}" }`))).toEqual([]);
  });

  it("a cycle is reported once, by the graph check, and the reference walk still ends", () => {
    const issues = issuesOf(`id = "x"
[[tasks]]
id = "a"
action = "echo"
needs = ["b"]
outputs = { v = "." }
[[tasks]]
id = "b"
action = "echo"
needs = ["a"]
args = { v = "{tasks.a.outputs.v}" }
`);
    expect(issues.join("\n")).toMatch(/cycle/);
    expect(issues.join("\n")).not.toMatch(/refers to/);
  });
});

describe("the DAGBOT_OUTPUT file", () => {
  const declared = { version: "[0-9]+\\.[0-9]+\\.[0-9]+", note: ".*" };

  it("reads NAME=value lines: CRLF and empty lines are fine, a value may hold '=' and spaces", () => {
    expect(parseOutputFile("build", declared, "version=1.2.3\r\n\nnote=a = b c\n")).toEqual({
      ok: true,
      values: { version: "1.2.3", note: "a = b c" },
    });
    expect(parseOutputFile("build", declared, "note=\nversion=0.0.1")).toEqual({
      ok: true,
      values: { note: "", version: "0.0.1" },
    });
  });

  it("fails with a message naming the output and the rule", () => {
    const fail = (text: string, d: Record<string, string> = declared): string => {
      const r = parseOutputFile("build", d, text);
      if (r.ok) throw new Error("expected a refusal");
      return r.message;
    };
    expect(fail("version=1.2\nnote=x\n")).toBe(
      'output "version" of task build (value "1.2") does not match its pattern [0-9]+\\.[0-9]+\\.[0-9]+',
    );
    expect(fail("version=1.2.3\nnote=x\ntag=v1\n")).toBe(
      'output "tag" is not declared by task build (it declares version, note)',
    );
    expect(fail("tag=v1\n", {})).toBe('output "tag" is not declared by task build (it declares no outputs)');
    expect(fail("version=1.2.3\n")).toBe(
      'task build declares output "note" but did not write it to $DAGBOT_OUTPUT (NAME=value lines)',
    );
    expect(fail("version=1.2.3\nversion=1.2.4\nnote=x\n")).toBe(
      'output "version" is written twice (line 2 of $DAGBOT_OUTPUT)',
    );
    expect(fail("note<<EOF\nline one\nEOF\n")).toMatch(
      /^line 1 of \$DAGBOT_OUTPUT: output "note" is written as a multi-line value \(NAME<<DELIMITER\), which dagbot does not accept/,
    );
    expect(fail("just words\n")).toBe('line 1 of $DAGBOT_OUTPUT is not NAME=value: "just words"');
    expect(fail("bad-name=1\n")).toBe('line 1 of $DAGBOT_OUTPUT: "bad-name" is not an output name');
    expect(fail(`version=1.2.3\nnote=${"é".repeat(2049)}\n`)).toBe(
      'output "note" of task build is 4098 bytes long; at most 4096',
    );
    expect(fail("version=1.2.3\nnote=a\0b\n")).toBe('output "note" of task build contains a NUL byte');
    expect(fail("version=1.2.3\nnote={tasks.x.outputs.y}\n")).toMatch(
      /output "note" of task build \(value "\{tasks.x.outputs.y\}"\) holds a \{params.…\}, \{tasks.…\} or \{item\} reference/,
    );
    expect(fail("version=1.2.3\nnote={params.day}\n")).toMatch(
      /holds a \{params.…\}, \{tasks.…\} or \{item\} reference/,
    );
  });

  it("bounds what checking the values may cost, across the whole file", () => {
    const heavy = { a: "[a-z0-9 ]{0,100}", b: "[a-z0-9 ]{0,100}", c: "[a-z0-9 ]{0,100}" };
    const value = "x".repeat(4000);
    const r = parseOutputFile("t", heavy, `a=${value}\nb=${value}\nc=${value}\n`);
    expect(r).toMatchObject({ ok: false });
    expect(r.ok ? "" : r.message).toMatch(/checking the outputs would cost more than the 262144/);
  });
});

describe("substitution into a dependent", () => {
  const producers = new Map([
    [
      "build",
      { declared: { version: "[0-9.]+", flag: "-?[a-z]+" }, values: { version: "1.2.3", flag: "-rf" } },
    ],
  ]);

  it("puts each value in once, inside the argument's one string; numbers and booleans stay", () => {
    const r = substituteOutputs(
      "deploy",
      { v: "{tasks.build.outputs.version}", note: "v{tasks.build.outputs.version}!", n: 3, dry: false },
      producers,
    );
    expect(r).toEqual({ ok: true, args: { v: "1.2.3", note: "v1.2.3!", n: 3, dry: false } });
  });

  it("refuses a producer that published nothing, or a value that no longer passes its checks", () => {
    expect(substituteOutputs("deploy", { v: "{tasks.build.outputs.nope}" }, producers)).toEqual({
      ok: false,
      message:
        'argument "v" of task deploy refers to {tasks.build.outputs.nope}, but task build has published no output "nope"',
    });
    expect(substituteOutputs("deploy", { v: "{tasks.gone.outputs.version}" }, producers)).toMatchObject({
      ok: false,
      message: expect.stringMatching(/task gone has published no output/),
    });
    const tampered = new Map([["build", { declared: { version: "[0-9.]+" }, values: { version: "1.x" } }]]);
    expect(substituteOutputs("deploy", { v: "{tasks.build.outputs.version}" }, tampered)).toMatchObject({
      ok: false,
      message: expect.stringMatching(/does not match its pattern \[0-9.\]\+/),
    });
  });

  it("the action's own checks still apply: one argv entry, and a leading '-' only where the action allows it", () => {
    const action = {
      name: "deploy",
      argv: ["deploy", "--to=prod", "{v}"],
      args: { v: { pattern: ".{1,100}" } },
    };
    const put = substituteOutputs("deploy", { v: "{tasks.build.outputs.flag}" }, producers);
    if (!put.ok) throw new Error(put.message);
    expect(renderArgv(action, put.args)).toMatchObject({
      ok: false,
      message: expect.stringMatching(/argument "v" starts with "-"/),
    });
    const allowed = { ...action, args: { v: { pattern: ".{1,100}", allowLeadingDash: true } } };
    expect(renderArgv(allowed, put.args)).toEqual({ ok: true, argv: ["deploy", "--to=prod", "-rf"] });
    const spaced = new Map([
      ["build", { declared: { version: ".*" }, values: { version: "1 2; rm -rf /" } }],
    ]);
    const one = substituteOutputs("deploy", { v: "{tasks.build.outputs.version}" }, spaced);
    if (!one.ok) throw new Error(one.message);
    expect(renderArgv(action, one.args)).toEqual({
      ok: true,
      argv: ["deploy", "--to=prod", "1 2; rm -rf /"],
    });
  });
});

describe("checks deferred to run time, and parameters", () => {
  it("publish checks that the action accepts an argument that refers to an output, not its value", () => {
    const dag = parsed(RELEASE);
    const deploy = {
      name: "deploy",
      argv: ["deploy", "{version}", "{note}"],
      args: { version: { pattern: "[0-9.]+" }, note: { pattern: "[a-z0-9 .]+" } },
    };
    const offers = new Map([["deploy", [{ template: deploy, nodes: ["n1"] }]]]);
    expect(checkTaskArguments({ ...dag, tasks: [dag.tasks[2]!] }, offers)).toEqual([]);
    const narrower = { ...deploy, argv: ["deploy", "{version}"], args: { version: deploy.args.version } };
    expect(
      checkTaskArguments(
        { ...dag, tasks: [dag.tasks[2]!] },
        new Map([["deploy", [{ template: narrower, nodes: ["n1"] }]]]),
      ),
    ).toEqual([
      { path: "tasks[0].args.note", message: 'argument "note" is not accepted by action "deploy"' },
    ]);
    // Without deferral the same value would be refused by the pattern.
    expect(checkArgs(deploy, dag.tasks[2]!.args).problems.map((p) => p.arg)).toEqual(["version", "note"]);
  });

  it("a parameter's value may not hold an output reference", () => {
    const dag = parsed(`id = "x"
[params.v]
pattern = ".{1,100}"
default = "ok"
[[tasks]]
id = "a"
action = "echo"
args = { m = "{params.v}" }
`);
    expect(resolveParams(dag, [["v", "{tasks.a.outputs.secret}"]])).toEqual({
      ok: false,
      message: 'parameter "v" holds an output reference ({tasks.…}), which a value may not',
    });
    expect(resolveParams(dag, [["v", "{params.v}"]])).toMatchObject({ ok: true });
  });
});

describe("the worker's reading of an attempt's file (withPublished)", () => {
  const exec = (published?: ExecResult["published"]): ExecResult => ({
    outcome: "succeeded",
    exitCode: 0,
    signal: null,
    output: "",
    outputTruncated: false,
    totalOutputBytes: 0,
    durationMs: 1,
    ...(published === undefined ? {} : { published }),
  });
  const claimed = (outputPatterns: Record<string, OutputDeclaration> | null): ClaimedTask => {
    const task = taskRecord("run-1", "build", "build");
    return {
      token: { runId: "run-1", taskId: "build", version: 2, session: { nodeId: "n", bootId: "b" } },
      task: { ...task, outputPatterns },
    };
  };
  const success: TaskResult = { outcome: "succeeded", exitCode: 0, output: "", error: null };

  it("keeps the checked values with the success", () => {
    expect(
      withPublished(success, exec({ text: "version=1.2.3\n" }), claimed({ version: "[0-9.]+" })),
    ).toEqual({
      ...success,
      outputs: { version: "1.2.3" },
    });
  });

  it("a task that declares none and wrote nothing publishes nothing; one that wrote something fails", () => {
    expect(withPublished(success, exec({ text: "\n" }), claimed(null))).toEqual(success);
    expect(withPublished(success, exec({ text: "v=1\n" }), claimed(null))).toEqual({
      ...success,
      outcome: "failed",
      error: 'outputs refused: output "v" is not declared by task build (it declares no outputs)',
    });
  });

  it("a file the executor could not read fails the success; a failure is left as it is", () => {
    expect(
      withPublished(success, exec({ problem: "$DAGBOT_OUTPUT is not UTF-8 text" }), claimed({ v: "." })),
    ).toMatchObject({
      outcome: "failed",
      error: "outputs refused: $DAGBOT_OUTPUT is not UTF-8 text",
    });
    const list = { hosts: { pattern: "[a-z0-9]+", list: true as const, maxItems: 50 } };
    expect(
      withPublished(
        success,
        exec({ oversize: { bytes: 90_000, lines: { hosts: 10_000 }, complete: true } }),
        claimed(list),
      ),
    ).toMatchObject({
      outcome: "failed",
      error: 'outputs refused: list output "hosts" of task build has 10000 items; at most 50 (its max_items)',
    });
    expect(withPublished(success, exec({ text: "hosts=a\nhosts=b\n" }), claimed(list))).toEqual({
      ...success,
      outputs: { hosts: ["a", "b"] },
    });
    const failed: TaskResult = { outcome: "failed", exitCode: 1, output: "", error: "exited with status 1" };
    expect(withPublished(failed, exec({ text: "v=x" }), claimed({ v: "[0-9]" }))).toEqual(failed);
  });
});

describe("chat shows a task's outputs", () => {
  const T0 = Date.UTC(2030, 0, 1, 12);
  const run: RunSummary = {
    runId: "run-1",
    dagId: "release",
    status: "succeeded",
    description: null,
    publisher: "@alice:test",
    confirmedBy: null,
    publishEventId: "$p",
    confirmDeadline: null,
    createdAt: T0,
    updatedAt: T0 + 2_000,
    taskCount: 2,
  };
  const build: TaskLine = {
    taskId: "build",
    action: "build",
    status: "succeeded",
    node: "n1",
    attempt: 1,
    maxAttempts: 1,
    startedAt: T0,
    finishedAt: T0 + 1_000,
    exitCode: 0,
    error: null,
    outputs: { version: "1.2.3", commit: "abc1234" },
  };

  it("in !dag status <run> <task> and !dag logs, as NAME=value", () => {
    const status = renderOutcome({
      kind: "status",
      run,
      summary: summarizeTasks(["succeeded", "succeeded"]),
      tasks: [build],
      at: T0 + 2_000,
    })!;
    expect(status.body).toContain("`build` Outputs: `version=1.2.3`, `commit=abc1234`");
    expect(status.html).toContain("<code>version=1.2.3</code>");
    const logs = renderOutcome({
      kind: "logs",
      run,
      task: build,
      output: "built\n",
      omittedChars: 0,
      at: T0,
    })!;
    expect(logs.body).toContain("Outputs: `version=1.2.3`, `commit=abc1234`");
    const none = renderOutcome({
      kind: "logs",
      run,
      task: { ...build, outputs: undefined } as TaskLine,
      output: "built\n",
      omittedChars: 0,
      at: T0,
    })!;
    expect(none.body).not.toContain("Outputs");
  });
});

describe("list outputs", () => {
  const DISCOVER = (hosts: string, more = ""): string => `id = "fleet"

[[tasks]]
id = "discover"
action = "discover"
outputs = { hosts = ${hosts}, region = "[a-z]+" }
${more}`;

  it("declares a list with its pattern and max_items (the bound when absent); the plain form stays a single value", () => {
    const dag = parsed(DISCOVER(`{ pattern = "[a-z0-9.-]+", list = true, max_items = 100 }`));
    expect(dag.tasks[0]?.outputs).toEqual({
      hosts: { pattern: "[a-z0-9.-]+", list: true, maxItems: 100 },
      region: "[a-z]+",
    });
    const unbounded = parsed(DISCOVER(`{ pattern = "[a-z0-9.-]+", list = true }`));
    expect(unbounded.tasks[0]?.outputs?.["hosts"]).toEqual({
      pattern: "[a-z0-9.-]+",
      list: true,
      maxItems: FAN_OUT_LIMITS.maxItems,
    });
  });

  it("refuses max_items above the bound naming it, a table without list = true, a bad pattern, and a list used as one value", () => {
    expect(issuesOf(DISCOVER(`{ pattern = "[a-z]+", list = true, max_items = 5000 }`))).toEqual([
      "tasks[0].outputs.hosts.max_items: is 5000; a list output may hold at most 1000 items (the fan-out bound)",
    ]);
    expect(issuesOf(DISCOVER(`{ pattern = "[a-z]+", list = false }`))).toEqual([
      "tasks[0].outputs.hosts.list: must be true: the table form declares a list output",
    ]);
    expect(issuesOf(DISCOVER(`{ pattern = "(", list = true }`))[0]).toMatch(
      /^tasks\[0\]\.outputs\.hosts\.pattern: /,
    );
    expect(issuesOf(DISCOVER(`{ pattern = "[a-z]+", list = true, extra = 1 }`))[0]).toMatch(
      /^tasks\[0\]\.outputs\.hosts/,
    );
    const used = DISCOVER(
      `{ pattern = "[a-z]+", list = true }`,
      `[[tasks]]\nid = "deploy"\naction = "deploy"\nneeds = ["discover"]\nargs = { to = "{tasks.discover.outputs.hosts}", r = "{tasks.discover.outputs.region}" }\n`,
    );
    expect(issuesOf(used)).toEqual([
      'tasks[1].args.to: refers to {tasks.discover.outputs.hosts}, but "hosts" of task "discover" is a list output, not one value: run a task once per item with for_each = { items = "{tasks.discover.outputs.hosts}" }',
    ]);
  });

  it("reads the repeated line as the items in order; zero lines is an empty list", () => {
    const declared = {
      hosts: { pattern: "[a-z0-9.-]+", list: true as const, maxItems: 3 },
      region: "[a-z]+",
    };
    expect(
      parseOutputFile("discover", declared, "hosts=b.example\nregion=eu\nhosts=a.example\nhosts=c\n"),
    ).toEqual({
      ok: true,
      values: { hosts: ["b.example", "a.example", "c"], region: "eu" },
    });
    expect(parseOutputFile("discover", declared, "region=eu\n")).toEqual({
      ok: true,
      values: { hosts: [], region: "eu" },
    });
  });

  it("refuses more items than max_items (or the bound) naming the output, the count and the bound, and checks each item", () => {
    const fail = (text: string, maxItems: number): string => {
      const r = parseOutputFile(
        "discover",
        { hosts: { pattern: "[a-z0-9.-]+", list: true, maxItems } },
        text,
      );
      if (r.ok) throw new Error("expected a refusal");
      return r.message;
    };
    const lines = (n: number): string => Array.from({ length: n }, (_, i) => `hosts=h${i}\n`).join("");
    expect(fail(lines(4), 3)).toBe(
      'list output "hosts" of task discover has 4 items; at most 3 (its max_items)',
    );
    expect(fail(lines(1001), 1000)).toBe(
      'list output "hosts" of task discover has 1001 items; at most 1000, the most a list output may hold',
    );
    expect(fail("hosts=ok\nhosts=NOT OK\n", 10)).toBe(
      'output "hosts" of task discover (value "NOT OK") does not match its pattern [a-z0-9.-]+ (item 1, line 2 of $DAGBOT_OUTPUT)',
    );
    // 1,000 items under a simple pattern fit the list's own check budget.
    expect(
      parseOutputFile(
        "discover",
        { hosts: { pattern: "[a-z0-9.-]+", list: true, maxItems: 1000 } },
        lines(1000),
      ),
    ).toMatchObject({ ok: true });
  });

  it("an oversize file is refused for a list's count before its size; otherwise for its size", () => {
    const declared = { hosts: { pattern: "[a-z0-9.-]+", list: true as const, maxItems: 1000 }, note: ".*" };
    expect(
      oversizeProblem("discover", declared, { bytes: 200_000, lines: { hosts: 10_000 }, complete: true }),
    ).toBe(
      'list output "hosts" of task discover has 10000 items; at most 1000, the most a list output may hold',
    );
    expect(
      oversizeProblem("discover", declared, { bytes: 9e7, lines: { hosts: 2_000 }, complete: false }),
    ).toBe(
      'list output "hosts" of task discover has at least 2000 items; at most 1000, the most a list output may hold',
    );
    expect(
      oversizeProblem("discover", declared, { bytes: 70_000, lines: { hosts: 10, note: 1 }, complete: true }),
    ).toBe("$DAGBOT_OUTPUT holds 70000 bytes; at most 65536");
  });

  it("a list is never put into an argument, and is shown short", () => {
    const producers = new Map([
      [
        "discover",
        {
          declared: { hosts: { pattern: "[a-z]+", list: true as const, maxItems: 5 } },
          values: { hosts: ["a", "b"] },
        },
      ],
    ]);
    expect(substituteOutputs("deploy", { to: "{tasks.discover.outputs.hosts}" }, producers)).toEqual({
      ok: false,
      message:
        'argument "to" of task deploy refers to {tasks.discover.outputs.hosts}, but "hosts" of task discover is a list output: a list is fanned out over (for_each), not put into an argument',
    });
    expect(outputValueText(["a", "b"])).toBe("[a, b]");
    expect(outputValueText(["a", "b", "c", "d"])).toBe("[a, b, c, … 4 items]");
    expect(outputValueText("1.2.3")).toBe("1.2.3");
  });
});
