// A task's matrix (docs/dag-format.md "Matrix"): expansion into instances, their ids and order,
// needs, {matrix.AXIS} references and their checks, the bounds and their refusals, the hash, and
// the grouping every face uses.
import { describe, expect, it } from "vitest";
import type { ParseDagResult } from "../../src/domain/dag.js";
import { checkActions, checkTaskArguments, formatIssue, parseDag } from "../../src/domain/dag.js";
import { isTaskId } from "../../src/domain/command-grammar.js";
import { parseCommand } from "../../src/app/commands/verbs/index.js";
import type { ParsedDag } from "../../src/domain/model.js";
import { groupCounts, matrixGroups, parseInstanceId } from "../../src/domain/matrix.js";
import { planLevels } from "../../src/domain/plan.js";
import { resolveParams } from "../../src/domain/params.js";
import { taskParams } from "../../src/app/commands/http-shapes.js";

function ok(result: ParseDagResult): ParsedDag {
  if (!result.ok) throw new Error(`expected a valid DAG, got:\n${result.issues.map(formatIssue).join("\n")}`);
  return result.dag;
}

function issues(result: ParseDagResult): string[] {
  if (result.ok) throw new Error("expected issues, the DAG is valid");
  return result.issues.map(formatIssue);
}

const DEPLOY = `id = "rollout"

[[tasks]]
id = "build"
action = "echo"

[[tasks]]
id = "deploy"
action = "echo"
needs = ["build"]
matrix = { region = ["eu", "us"], tier = ["web", "db", "cache"] }
args = { message = "{matrix.tier}@{matrix.region}", fixed = "x", n = 3 }

[[tasks]]
id = "smoke"
action = "echo"
needs = ["deploy"]
`;

describe("expansion", () => {
  it("makes one task per combination, first axis slowest, values in order", () => {
    const dag = ok(parseDag(DEPLOY, "toml"));
    expect(dag.tasks.map((t) => t.id)).toEqual([
      "build",
      "deploy[region=eu,tier=web]",
      "deploy[region=eu,tier=db]",
      "deploy[region=eu,tier=cache]",
      "deploy[region=us,tier=web]",
      "deploy[region=us,tier=db]",
      "deploy[region=us,tier=cache]",
      "smoke",
    ]);
  });

  it("puts each instance's values into its arguments, leaving the others as written", () => {
    const dag = ok(parseDag(DEPLOY, "toml"));
    const byId = new Map(dag.tasks.map((t) => [t.id, t]));
    expect(byId.get("deploy[region=us,tier=db]")!.args).toEqual({ message: "db@us", fixed: "x", n: 3 });
    expect(byId.get("deploy[region=eu,tier=cache]")!.args).toEqual({ message: "cache@eu", fixed: "x", n: 3 });
  });

  it("gives each instance the matrix task's needs, and a need of the matrix task all its instances", () => {
    const dag = ok(parseDag(DEPLOY, "toml"));
    const instances = dag.tasks.filter((t) => t.id.startsWith("deploy["));
    for (const t of instances) expect(t.needs).toEqual(["build"]);
    expect(dag.tasks.at(-1)!.needs).toEqual(instances.map((t) => t.id));
    expect(planLevels(dag)).toEqual([["build"], instances.map((t) => t.id), ["smoke"]]);
  });

  it("expands a matrix task that needs another: each instance needs every instance of it", () => {
    const dag = ok(
      parseDag(
        JSON.stringify({
          id: "m",
          tasks: [
            { id: "a", action: "echo", matrix: { x: ["1", "2"] } },
            { id: "b", action: "echo", needs: ["a"], matrix: { y: ["p", "q"] } },
          ],
        }),
        "json",
      ),
    );
    expect(dag.tasks.map((t) => [t.id, t.needs])).toEqual([
      ["a[x=1]", []],
      ["a[x=2]", []],
      ["b[y=p]", ["a[x=1]", "a[x=2]"]],
      ["b[y=q]", ["a[x=1]", "a[x=2]"]],
    ]);
  });

  it("hashes the same document the same way every time, JSON or TOML, and a change of order differently", () => {
    const toml = parseDag(DEPLOY, "toml");
    const again = parseDag(DEPLOY, "toml");
    const json = parseDag(
      JSON.stringify({
        id: "rollout",
        tasks: [
          { id: "build", action: "echo" },
          {
            id: "deploy",
            action: "echo",
            needs: ["build"],
            matrix: { region: ["eu", "us"], tier: ["web", "db", "cache"] },
            args: { message: "{matrix.tier}@{matrix.region}", fixed: "x", n: 3 },
          },
          { id: "smoke", action: "echo", needs: ["deploy"] },
        ],
      }),
      "json",
    );
    expect(toml.ok && again.ok && json.ok).toBe(true);
    if (!toml.ok || !again.ok || !json.ok) return;
    expect(again.hash).toBe(toml.hash);
    expect(json.hash).toBe(toml.hash);
    const swapped = parseDag(DEPLOY.replace('["eu", "us"]', '["us", "eu"]'), "toml");
    expect(swapped.ok && swapped.hash).not.toBe(toml.hash);
  });

  it("leaves a DAG without a matrix as it was: same tasks, same hash", () => {
    const plain = `id = "p"\n[[tasks]]\nid = "a"\naction = "echo"\n[[tasks]]\nid = "b"\naction = "echo"\nneeds = ["a"]\n`;
    const result = parseDag(plain, "toml");
    // The hash of this document before matrices existed (main at 0.3.1).
    expect(result.ok && result.hash).toBe("9f2dbdfd1cd7d32f5ee78fda815b06d256d6fa034913c7c6c19297c997a8815a");
  });

  it("makes a gate per instance when the gate has a matrix", () => {
    const dag = ok(
      parseDag(
        JSON.stringify({
          id: "g",
          tasks: [{ id: "ok", approve: {}, matrix: { env: ["staging", "prod"] } }],
        }),
        "json",
      ),
    );
    expect(dag.tasks.map((t) => [t.id, t.gate !== undefined])).toEqual([
      ["ok[env=staging]", true],
      ["ok[env=prod]", true],
    ]);
  });
});

function doc(matrix: unknown, args: Record<string, unknown> = {}, extra: object[] = []): string {
  return JSON.stringify({ id: "m", tasks: [{ id: "t", action: "echo", matrix, args }, ...extra] });
}

describe("bounds and refusals", () => {
  it("accepts exactly 256 instances and refuses 257 or more, naming the bound and the count", () => {
    const values = (n: number) => Array.from({ length: n }, (_, i) => `v${i}`);
    expect(ok(parseDag(doc({ a: values(16), b: values(16) }), "json")).tasks).toHaveLength(256);
    expect(issues(parseDag(doc({ a: values(257) }), "json"))).toEqual([
      "tasks[0].matrix.a: expected a list of 1 to 256 values, got 257 values",
    ]);
    expect(issues(parseDag(doc({ a: values(2), b: values(129) }), "json"))).toEqual([
      "tasks[0].matrix: expands to 258 instances (2 × 129); a matrix task may have at most 256",
    ]);
  });

  it("refuses a DAG that expands past 1000 tasks", () => {
    const values = Array.from({ length: 250 }, (_, i) => `v${i}`);
    const tasks = Array.from({ length: 5 }, (_, i) => ({
      id: `t${i}`,
      action: "echo",
      matrix: { a: values },
    }));
    expect(issues(parseDag(JSON.stringify({ id: "m", tasks }), "json"))).toEqual([
      "tasks: expands to 1250 tasks with its matrices; a DAG may have at most 1000",
    ]);
  });

  it("refuses values that are not id characters, repeated, empty lists, no axes, and too many axes", () => {
    expect(issues(parseDag(doc({ a: ["ok", "a b", "-x;rm", "{params.p}", "ok"] }), "json"))).toEqual([
      'tasks[0].matrix.a[1]: "a b" is not a matrix value: 1 to 64 characters of A-Z a-z 0-9 _ . - (it becomes part of the instance\'s id)',
      'tasks[0].matrix.a[2]: "-x;rm" is not a matrix value: 1 to 64 characters of A-Z a-z 0-9 _ . - (it becomes part of the instance\'s id)',
      'tasks[0].matrix.a[3]: "{params.p}" is not a matrix value: 1 to 64 characters of A-Z a-z 0-9 _ . - (it becomes part of the instance\'s id)',
      'tasks[0].matrix.a[4]: "ok" is listed twice',
    ]);
    expect(issues(parseDag(doc({ a: [1] }), "json"))).toEqual([
      'tasks[0].matrix.a[0]: expected a string (write "1"), got an integer',
    ]);
    expect(issues(parseDag(doc({ a: [] }), "json"))).toEqual([
      "tasks[0].matrix.a: expected a list of 1 to 256 values, got 0 values",
    ]);
    expect(issues(parseDag(doc({}), "json"))).toEqual([
      "tasks[0].matrix: names no axis; a matrix needs at least one list of values",
    ]);
    const nine = Object.fromEntries(Array.from({ length: 9 }, (_, i) => [`a${i}`, ["x"]]));
    expect(issues(parseDag(doc(nine), "json"))).toEqual(["tasks[0].matrix: has 9 axes; at most 8"]);
    expect(issues(parseDag(doc({ "1a": ["x"], __proto__x: ["y"] }), "json"))).toEqual([
      'tasks[0].matrix["1a"]: axis name contains "1" at position 1; argument names start with a letter or "_" and use only letters, digits and "_"',
    ]);
  });

  it("answers a malformed matrix with issues, never an exception", () => {
    for (const matrix of [null, "x", 3, [["a"]], { a: "x" }, { a: [null] }, { a: [{}] }, { a: [[]] }])
      expect(issues(parseDag(doc(matrix, { m: "{matrix.a}" }), "json")).length).toBeGreaterThan(0);
  });

  it("refuses instance ids longer than 256 characters", () => {
    const long = "v".repeat(64);
    const axes = Object.fromEntries(Array.from({ length: 4 }, (_, i) => [`axis_${i}`, [long]]));
    expect(issues(parseDag(doc(axes), "json"))).toEqual([
      "tasks[0].matrix: makes instance ids up to 290 characters long; at most 256 (shorten the task id, axis names or values)",
    ]);
  });

  it("refuses instance arguments past the document's argument length", () => {
    const arg = "{matrix.a}".repeat(400);
    expect(issues(parseDag(doc({ a: ["vvvvvvvvvvvv"] }, { m: arg }), "json"))).toEqual([
      "tasks[0].args.m: is 4800 characters long in t[a=vvvvvvvvvvvv], with its matrix values put in; at most 4096",
    ]);
  });
});

describe("{matrix.AXIS} references", () => {
  it("refuses a reference outside a matrix task, to an unknown axis, or not written whole", () => {
    const text = JSON.stringify({
      id: "m",
      tasks: [
        { id: "a", action: "echo", args: { x: "{matrix.region}" } },
        {
          id: "b",
          action: "echo",
          matrix: { region: ["eu"] },
          args: { x: "{matrix.regoin}", y: "{matrix.}" },
        },
      ],
    });
    expect(issues(parseDag(text, "json"))).toEqual([
      'tasks[0].args.x: refers to {matrix.region}, but task "a" has no matrix (give it matrix = { region = [...] })',
      'tasks[1].args.x: refers to {matrix.regoin}, but the matrix of "b" has no axis "regoin" (it has region)',
      'tasks[1].args.y: says "{matrix." but not as a matrix reference: write {matrix.AXIS}',
    ]);
  });

  it("refuses an output reference to a matrix task: its instances each have their own", () => {
    const text = JSON.stringify({
      id: "m",
      tasks: [
        { id: "build", action: "echo", matrix: { os: ["linux", "mac"] }, outputs: { v: "[0-9]+" } },
        { id: "ship", action: "echo", needs: ["build"], args: { v: "{tasks.build.outputs.v}" } },
      ],
    });
    expect(issues(parseDag(text, "json"))).toEqual([
      'tasks[1].args.v: refers to {tasks.build.outputs.v}, but "build" is a matrix task, whose instances each have their own outputs: no one value is its',
    ]);
  });

  it("keeps parameters for the run and matrix values in one pass: a parameter reference stays", () => {
    const dag = ok(
      parseDag(
        JSON.stringify({
          id: "m",
          params: { day: { pattern: "[0-9]+", default: "1" } },
          tasks: [{ id: "t", action: "echo", matrix: { r: ["eu"] }, args: { x: "{params.day}-{matrix.r}" } }],
        }),
        "json",
      ),
    );
    expect(dag.tasks[0]!.args).toEqual({ x: "{params.day}-eu" });
  });

  it("puts a value into the argument only: the action's checks still apply, placed at the document's task", () => {
    const dag = ok(
      parseDag(
        JSON.stringify({
          id: "m",
          tasks: [
            { id: "first", action: "echo" },
            { id: "t", action: "deploy", matrix: { to: ["eu", "-rf"] }, args: { target: "{matrix.to}" } },
          ],
        }),
        "json",
      ),
    );
    const deploy = { name: "deploy", argv: ["deploy", "{target}"], args: { target: { pattern: "[a-z-]+" } } };
    const offers = new Map([["deploy", [{ template: deploy, nodes: ["n1"] }]]]);
    expect(checkTaskArguments(dag, offers).map(formatIssue)).toEqual([
      'tasks[1].args.target: argument "target" starts with "-", which the program would read as an option; action "deploy" does not allow that for "target" (in t[to=-rf])',
    ]);
    expect(checkActions(dag, new Set(["echo"])).map(formatIssue)).toEqual([
      'tasks[1].action: unknown action "deploy" (known: echo)',
    ]);
  });
});

describe("instance ids on every face", () => {
  it("parses an instance id back into its task and values, and nothing else as one", () => {
    expect(parseInstanceId("deploy[region=eu,tier=web]")).toEqual({
      task: "deploy",
      values: [
        ["region", "eu"],
        ["tier", "web"],
      ],
    });
    for (const id of ["deploy", "deploy[]", "deploy[region]", "deploy[region=e u]", "[a=b]", "d[a=b]x"])
      expect(parseInstanceId(id)).toBeNull();
  });

  it("lets commands name an instance, and still refuses what is neither an id nor an instance's", () => {
    expect(isTaskId("deploy[region=eu,tier=web]")).toBe(true);
    expect(isTaskId("deploy[region=eu;rm]")).toBe(false);
    const parsed = parseCommand({ body: "!dag logs rollout deploy[region=eu,tier=web]" });
    expect(parsed).toMatchObject({
      kind: "command",
      command: { verb: "logs", task: "deploy[region=eu,tier=web]" },
    });
    expect(parseCommand({ body: "!dag logs rollout deploy[region=eu;rm]" })).toMatchObject({ kind: "error" });
  });

  it("lets an HTTP path name an instance, and refuses what is neither an id nor an instance's", () => {
    expect(taskParams.safeParse({ id: "rollout", task: "deploy[region=eu,tier=web]" }).success).toBe(true);
    expect(taskParams.safeParse({ id: "rollout", task: "deploy[region=eu,tier=web" }).success).toBe(false);
  });

  it("places a parameter's refusal on an instance at the document's task", () => {
    const dag = ok(
      parseDag(
        JSON.stringify({
          id: "m",
          params: { v: { pattern: "[a-z]+", default: "x" } },
          tasks: [
            { id: "first", action: "echo", matrix: { q: ["1", "2"] } },
            { id: "t", action: "echo", matrix: { r: ["a", "b"] }, args: { x: "{params.v}".repeat(20) } },
          ],
        }),
        "json",
      ),
    );
    const result = resolveParams(dag, [["v", "y".repeat(4000)]]);
    expect(result).toMatchObject({
      ok: false,
      message: expect.stringMatching(
        /^with these parameter values, tasks\[1\]\.args\.x would be 80000 characters long/,
      ),
    });
  });

  it("groups a run's instances by matrix task, counting each status", () => {
    const groups = matrixGroups([
      { taskId: "build", status: "succeeded" },
      { taskId: "deploy[r=eu]", status: "succeeded" },
      { taskId: "deploy[r=us]", status: "failed" },
      { taskId: "deploy[r=ap]", status: "running" },
    ]);
    expect(groups).toHaveLength(1);
    expect(groups[0]).toMatchObject({
      task: "deploy",
      instances: ["deploy[r=eu]", "deploy[r=us]", "deploy[r=ap]"],
      summary: { total: 3, byStatus: { succeeded: 1, failed: 1, running: 1, blocked: 0 } },
    });
    expect(groupCounts(groups[0]!.summary.byStatus)).toEqual([
      ["succeeded", 1],
      ["failed", 1],
      ["running", 1],
    ]);
  });
});
