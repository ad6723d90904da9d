/**
 * Fan-out (`for_each`): the document's checks, the parsed spec, and the instances' ids and
 * arguments (docs/dag-format.md "Fan-out").
 */
import { describe, expect, it } from "vitest";
import { dagHash } from "../../src/domain/canonical-hash.js";
import { checkTaskArguments, parseDag } from "../../src/domain/dag.js";
import {
  fanOutInstanceId,
  instanceArgs,
  needsAfterExpansion,
  planExpansion,
  retriedTaskIds,
} from "../../src/domain/fan-out.js";
import { groupOf, matrixGroups, parseInstanceId } from "../../src/domain/matrix.js";
import type { ParsedDag } from "../../src/domain/model.js";
import { checkTaskId } from "../../src/domain/command-grammar.js";
import { paramValueProblem } from "../../src/domain/params.js";
import { renderArgv } from "../../src/domain/action-argv.js";
import { substituteOutputs } from "../../src/domain/outputs.js";
import { fanOutOutputs } from "../../src/app/worker.js";
import type { TaskRecord } from "../../src/ports/store.js";
import { taskFixture } from "../support/task-record.js";
import { dagGraphOf } from "../../src/app/run-picture.js";
import { buildRunGraph } from "../../src/domain/run-graph.js";

const FLEET = (forEach: string, args = `{ host = "{item}" }`, more = ""): string => `id = "fleet"

[[tasks]]
id = "discover"
action = "discover"
outputs = { hosts = { pattern = "[a-z0-9.-]+", list = true, max_items = 100 }, region = "[a-z]+" }

[[tasks]]
id = "deploy"
action = "deploy"
needs = ["discover"]
args = ${args}
for_each = ${forEach}
${more}`;

function parsed(text: string): ParsedDag {
  const result = parseDag(text, "toml");
  if (!result.ok) throw new Error(JSON.stringify(result.issues));
  return result.dag;
}

function issuesOf(text: string): string[] {
  const result = parseDag(text, "toml");
  return result.ok ? [] : result.issues.map((i) => `${i.path}: ${i.message}`);
}

describe("for_each in the DAG document", () => {
  it("parses the template with its producer, list, limit and fail_fast (defaults: no own limit, false)", () => {
    const dag = parsed(
      FLEET(`{ items = "{tasks.discover.outputs.hosts}", max_parallel = 8, fail_fast = true }`),
    );
    expect(dag.tasks.map((t) => t.id)).toEqual(["discover", "deploy"]);
    expect(dag.tasks[1]?.forEach).toEqual({
      producer: "discover",
      output: "hosts",
      maxParallel: 8,
      failFast: true,
    });
    expect(dag.tasks[1]?.args).toEqual({ host: "{item}" });
    const plain = parsed(FLEET(`{ items = "{tasks.discover.outputs.hosts}" }`));
    expect(plain.tasks[1]?.forEach).toEqual({
      producer: "discover",
      output: "hosts",
      maxParallel: null,
      failFast: false,
    });
    expect(dag.tasks[0]).not.toHaveProperty("forEach");
    expect(dagHash(dag)).not.toBe(dagHash(plain));
  });

  it("refuses items that are not one reference to a declared list of a task it needs, naming the problem", () => {
    const at = "tasks[1].for_each.items: ";
    expect(issuesOf(FLEET(`{ items = "hosts" }`))).toEqual([
      `${at}must be exactly one list output reference, "{tasks.TASK.outputs.LIST}"; got "hosts"`,
    ]);
    expect(issuesOf(FLEET(`{ items = "x {tasks.discover.outputs.hosts}" }`))[0]).toMatch(
      /^tasks\[1\]\.for_each\.items: must be exactly one list output reference/,
    );
    expect(issuesOf(FLEET(`{ items = "{tasks.discover.outputs.region}" }`))).toEqual([
      `${at}refers to {tasks.discover.outputs.region}, but "region" of task "discover" is one value, not a list: declare it { pattern = "...", list = true }`,
    ]);
    expect(issuesOf(FLEET(`{ items = "{tasks.discover.outputs.nodes}" }`))).toEqual([
      `${at}refers to {tasks.discover.outputs.nodes}, but task "discover" declares no output "nodes" (it declares hosts, region)`,
    ]);
    expect(issuesOf(FLEET(`{ items = "{tasks.discovr.outputs.hosts}" }`))).toEqual([
      `${at}refers to {tasks.discovr.outputs.hosts}, but the DAG has no task "discovr"`,
    ]);
    const notANeed = `id = "fleet"
[[tasks]]
id = "discover"
action = "discover"
outputs = { hosts = { pattern = "[a-z]+", list = true } }
[[tasks]]
id = "between"
action = "echo"
needs = ["discover"]
[[tasks]]
id = "deploy"
action = "deploy"
needs = ["between"]
for_each = { items = "{tasks.discover.outputs.hosts}" }
`;
    expect(issuesOf(notANeed)).toEqual([
      `tasks[2].for_each.items: refers to {tasks.discover.outputs.hosts}, but "discover" is not among the needs of "deploy": a fan-out needs its producer directly (add it to needs)`,
    ]);
  });

  it("refuses for_each beside a matrix, on a gate, bad limits and unknown keys", () => {
    expect(
      issuesOf(
        FLEET(
          `{ items = "{tasks.discover.outputs.hosts}" }`,
          `{ host = "{item}" }`,
          `matrix = { tier = ["web"] }`,
        ),
      ),
    ).toContain(
      "tasks[1].for_each: a task has a matrix or a for_each, not both: fan out over one list, or expand one matrix",
    );
    expect(issuesOf(FLEET(`{ items = "{tasks.discover.outputs.hosts}", max_parallel = 0 }`))[0]).toMatch(
      /^tasks\[1\]\.for_each\.max_parallel: /,
    );
    expect(issuesOf(FLEET(`{ items = "{tasks.discover.outputs.hosts}", max_parallel = 1001 }`))[0]).toMatch(
      /^tasks\[1\]\.for_each\.max_parallel: /,
    );
    expect(issuesOf(FLEET(`{ items = "{tasks.discover.outputs.hosts}", each = 1 }`))[0]).toMatch(
      /^tasks\[1\]\.for_each/,
    );
    const gate = `id = "g"
[[tasks]]
id = "discover"
action = "discover"
outputs = { hosts = { pattern = "[a-z]+", list = true } }
[[tasks]]
id = "ok"
needs = ["discover"]
approve = {}
for_each = { items = "{tasks.discover.outputs.hosts}" }
`;
    expect(issuesOf(gate)).toEqual([
      "tasks[1].for_each: an approval gate cannot fan out: it runs nothing (fan out the task after it)",
    ]);
  });

  it("refuses a run condition on a fan-out: it runs over its producer's list, so only after a success", () => {
    expect(
      issuesOf(
        FLEET(`{ items = "{tasks.discover.outputs.hosts}" }`, `{ host = "{item}" }`, `when = "failed"`),
      ),
    ).toContain(
      `tasks[1].when: a fan-out runs over its producer's list, so only when its needs succeeded: give the condition to a task after it, not to "deploy"`,
    );
    expect(
      issuesOf(
        FLEET(`{ items = "{tasks.discover.outputs.hosts}" }`, `{ host = "{item}" }`, `when = "succeeded"`),
      ),
    ).toEqual([]);
  });

  it("refuses {item} outside a fan-out and a {item that is not whole; a value may not hold {item}", () => {
    const outside = `id = "x"
[[tasks]]
id = "a"
action = "echo"
args = { v = "{item}" }
`;
    expect(issuesOf(outside)).toEqual([
      `tasks[0].args.v: refers to the fan-out's item, but task "a" has no for_each (give it for_each = { items = "{tasks.TASK.outputs.LIST}" })`,
    ]);
    expect(
      issuesOf(FLEET(`{ items = "{tasks.discover.outputs.hosts}" }`, `{ host = "{item.name}" }`)),
    ).toEqual([
      `tasks[1].args.host: says "{item" but not as an item reference: write {item} or {item.index}`,
    ]);
    expect(paramValueProblem("p", { pattern: ".*", default: null }, "{item}")).toBe(
      'parameter "p" holds an item reference ({item}), which a value may not',
    );
  });

  it("takes a fan-out's output as a whole argument (the list of its instances' values), never inside a longer string", () => {
    const fanIn = (urls: string): string => `[[tasks]]
id = "report"
action = "echo"
needs = ["deploy"]
args = { urls = "${urls}" }
`;
    const text = FLEET(`{ items = "{tasks.discover.outputs.hosts}" }`).replace(
      'action = "deploy"',
      'action = "deploy"\noutputs = { url = "[a-z:/.]+" }',
    );
    expect(issuesOf(text + fanIn("{tasks.deploy.outputs.url}"))).toEqual([]);
    expect(issuesOf(text + fanIn("urls={tasks.deploy.outputs.url}"))).toEqual([
      `tasks[2].args.urls: refers to {tasks.deploy.outputs.url}, the list of fan-out "deploy"'s values, inside a longer string: a list must be the whole argument (it becomes one argv entry per item)`,
    ]);
    expect(issuesOf(text + fanIn("{tasks.deploy.outputs.nope}"))[0]).toMatch(/declares no output "nope"/);
  });

  it("an argument saying {item} is checked against the action when the instance runs, not at publish", () => {
    const dag = parsed(
      FLEET(`{ items = "{tasks.discover.outputs.hosts}" }`, `{ host = "{item}", n = "{item.index}" }`),
    );
    const template = {
      name: "deploy",
      argv: ["deploy", "{host}", "{n}"],
      args: { host: "[a-z.]+", n: "[0-9]+" },
    };
    const offers = new Map([
      ["deploy", [{ template, nodes: ["a"] }]],
      ["discover", [{ template: { name: "discover", argv: ["d"], args: {} }, nodes: ["a"] }]],
    ]);
    expect(checkTaskArguments(dag, offers as never)).toEqual([]);
  });
});

describe("fan-out instances", () => {
  it("are named by the matrix id grammar, so every face groups them and commands accept the id", () => {
    expect(fanOutInstanceId("deploy", 0)).toBe("deploy[item=0]");
    expect(parseInstanceId("deploy[item=12]")).toEqual({ task: "deploy", values: [["item", "12"]] });
    expect(groupOf("deploy[item=12]")).toBe("deploy");
    expect(checkTaskId("logs", "task id", "deploy[item=999]")).toBe("deploy[item=999]");
    expect(
      matrixGroups([
        { taskId: "discover", status: "succeeded" },
        { taskId: "deploy[item=0]", status: "succeeded" },
        { taskId: "deploy[item=1]", status: "running" },
      ]),
    ).toMatchObject([{ task: "deploy", instances: ["deploy[item=0]", "deploy[item=1]"] }]);
  });

  it("put their item and index into the template's string arguments, once", () => {
    expect(
      instanceArgs(
        { host: "{item}", label: "#{item.index} {item}", n: 3, keep: "{tasks.a.outputs.b}" },
        "web1",
        4,
      ),
    ).toEqual({ host: "web1", label: "#4 web1", n: 3, keep: "{tasks.a.outputs.b}" });
  });
});

describe("the expansion the leader writes", () => {
  const spec = { producer: "discover", output: "hosts", maxParallel: 8, failFast: false };

  it("plans one instance per item in order; none for an empty or missing list", () => {
    expect(planExpansion("deploy", spec, { host: "{item}" }, { hosts: ["a", "b"], region: "eu" })).toEqual([
      { id: "deploy[item=0]", args: { host: "a" }, item: "a" },
      { id: "deploy[item=1]", args: { host: "b" }, item: "b" },
    ]);
    expect(planExpansion("deploy", spec, {}, { hosts: [] })).toEqual([]);
    // A producer an operator marked succeeded published nothing: no item.
    expect(planExpansion("deploy", spec, {}, null)).toEqual([]);
    expect(planExpansion("deploy", spec, {}, { hosts: Array.from({ length: 1001 }, () => "h") })).toBe(
      'list output "hosts" of task discover holds 1001 items; a fan-out may have at most 1000',
    );
  });

  it("puts the instances in the template's place in what needed it", () => {
    expect(needsAfterExpansion(["a", "deploy", "b"], "deploy", ["deploy[item=0]", "deploy[item=1]"])).toEqual(
      ["a", "deploy[item=0]", "deploy[item=1]", "b"],
    );
    expect(needsAfterExpansion(["deploy"], "deploy", [])).toEqual([]);
    expect(needsAfterExpansion(["a"], "deploy", ["deploy[item=0]"])).toBeNull();
  });
});

describe("a fan-in's list", () => {
  const producers = (instances: Array<Record<string, string> | null>) =>
    new Map([["deploy", { declared: { url: "[a-z0-9:/.]+" }, values: null, instances }]]);

  it("is the instances' values in item order, checked again; one that published none is refused", () => {
    expect(
      substituteOutputs(
        "report",
        { urls: "{tasks.deploy.outputs.url}", n: 2 },
        producers([{ url: "h0" }, { url: "h1" }]),
      ),
    ).toEqual({ ok: true, args: { urls: ["h0", "h1"], n: 2 } });
    expect(substituteOutputs("report", { urls: "{tasks.deploy.outputs.url}" }, producers([]))).toEqual({
      ok: true,
      args: { urls: [] },
    });
    expect(
      substituteOutputs("report", { urls: "{tasks.deploy.outputs.url}" }, producers([{ url: "h0" }, null])),
    ).toEqual({
      ok: false,
      message:
        'argument "urls" of task report refers to {tasks.deploy.outputs.url}, but instance 1 of fan-out deploy has published no output "url"',
    });
    expect(
      substituteOutputs("report", { urls: "{tasks.deploy.outputs.url}" }, producers([{ url: "NO WAY" }])),
    ).toMatchObject({
      ok: false,
      message: expect.stringMatching(
        /output "url" of task deploy\[item=0\] \(value "NO WAY"\) does not match/,
      ),
    });
    expect(
      substituteOutputs("report", { urls: "x {tasks.deploy.outputs.url}" }, producers([{ url: "a" }])),
    ).toMatchObject({
      ok: false,
      message: expect.stringMatching(/inside a longer string: a list must be the whole argument/),
    });
  });

  it("fills each whole argv entry with one entry per item, checked against the action's pattern; never part of an entry", () => {
    const action = {
      name: "report",
      argv: ["report", "--", "{urls}"],
      args: { urls: { pattern: "[a-z0-9]+" } },
    };
    expect(renderArgv(action, { urls: ["h0", "h1", "h2"] })).toEqual({
      ok: true,
      argv: ["report", "--", "h0", "h1", "h2"],
    });
    expect(renderArgv(action, { urls: [] })).toEqual({ ok: true, argv: ["report", "--"] });
    expect(renderArgv(action, { urls: ["h0", "-rf"] })).toEqual({
      ok: false,
      message: 'argument "urls" item 1: does not match its pattern [a-z0-9]+',
    });
    const dashes = { ...action, args: { urls: { pattern: "[a-z0-9-]+" } } };
    expect(renderArgv(dashes, { urls: ["-rf"] })).toMatchObject({
      ok: false,
      message: expect.stringMatching(/item 0: starts with "-"/),
    });
    const embedded = { ...action, argv: ["report", "--urls={urls}"] };
    expect(renderArgv(embedded, { urls: ["h0"] })).toMatchObject({
      ok: false,
      message: expect.stringMatching(
        /is a list \(1 items, a fan-out's values\), which only fills a whole argv entry/,
      ),
    });
  });

  it("the worker reads the instances of a fan-out in item order, whatever order the store lists them in", () => {
    const row = (i: number, status: TaskRecord["status"], url: string) =>
      taskFixture({
        taskId: `deploy[item=${i}]`,
        status,
        fanOut: "deploy",
        outputPatterns: { url: "[a-z0-9]+" },
        outputValues: status === "succeeded" ? { url } : null,
      });
    const read = fanOutOutputs("deploy", [
      row(10, "succeeded", "ten"),
      row(2, "succeeded", "two"),
      row(9, "failed", "x"),
      taskFixture(),
    ]);
    expect(read).toEqual({
      declared: { url: "[a-z0-9]+" },
      values: null,
      instances: [{ url: "two" }, null, { url: "ten" }],
    });
  });
});

describe("a retry of a run with a fan-out", () => {
  const dag = parsed(
    FLEET(
      `{ items = "{tasks.discover.outputs.hosts}" }`,
      `{ host = "{item}" }`,
      `[[tasks]]\nid = "report"\naction = "report"\nneeds = ["deploy"]\nargs = { urls = "{tasks.deploy.outputs.url}" }\n[[tasks]]\nid = "side"\naction = "x"\nneeds = ["discover"]\n`,
    ).replace('action = "deploy"', 'action = "deploy"\noutputs = { url = "[a-z]+" }'),
  );
  const row = (taskId: string, status: TaskRecord["status"], fanOut: string | null = null) => ({
    taskId,
    status,
    fanOut,
  });

  it("runs the fan-out again from its producer when an instance did not succeed; what succeeded elsewhere stays", () => {
    const again = retriedTaskIds(dag, [
      row("discover", "succeeded"),
      row("side", "succeeded"),
      row("deploy[item=0]", "succeeded", "deploy"),
      row("deploy[item=1]", "failed", "deploy"),
      row("report", "skipped"),
    ]);
    expect([...again].sort()).toEqual(["deploy", "discover", "report"]);
  });

  it("runs it again when the fan-in that reads its outputs runs again, even if every instance succeeded", () => {
    const again = retriedTaskIds(dag, [
      row("discover", "succeeded"),
      row("side", "failed"),
      row("deploy[item=0]", "succeeded", "deploy"),
      row("report", "failed"),
    ]);
    expect([...again].sort()).toEqual(["deploy", "discover", "report", "side"]);
    // Only an unrelated task failed: the fan-out is not run again.
    const side = retriedTaskIds(dag, [
      row("discover", "succeeded"),
      row("side", "failed"),
      row("deploy[item=0]", "succeeded", "deploy"),
      row("report", "succeeded"),
    ]);
    expect([...side]).toEqual(["side"]);
  });

  it("an unexpanded template (its producer failed) is run again with it", () => {
    const again = retriedTaskIds(dag, [
      row("discover", "failed"),
      row("side", "skipped"),
      row("deploy", "skipped"),
      row("report", "skipped"),
    ]);
    expect([...again].sort()).toEqual(["deploy", "discover", "report", "side"]);
  });
});

describe("the picture of a fan-out", () => {
  it("draws the template before its expansion as `deploy × for each hosts`, its instances after as one box", () => {
    const dag = parsed(FLEET(`{ items = "{tasks.discover.outputs.hosts}" }`));
    const before = dagGraphOf(dag);
    expect(before.boxes.find((b) => b.title === "deploy")).toMatchObject({
      kind: "task",
      caption: "deploy × for each hosts",
    });
    const after = buildRunGraph({
      dagId: "fleet",
      runLabel: null,
      runStatusWord: "running",
      tasks: [
        { id: "discover", action: "discover", needs: [], status: "succeeded" },
        ...Array.from({ length: 12 }, (_, i) => ({
          id: `deploy[item=${i}]`,
          action: "deploy",
          needs: ["discover"],
          status: "succeeded" as const,
        })),
      ],
    });
    expect(after.boxes.map((b) => b.caption)).toEqual(["discover", "deploy × 12"]);
  });
});

describe("the bound on a run's instances", () => {
  const many = (fanOuts: number, maxItems: number): string =>
    `id = "wide"
[[tasks]]
id = "discover"
action = "discover"
outputs = { hosts = { pattern = "[a-z]+", list = true, max_items = ${maxItems} } }
` +
    Array.from(
      { length: fanOuts },
      (_, i) => `[[tasks]]
id = "f${i}"
action = "deploy"
needs = ["discover"]
for_each = { items = "{tasks.discover.outputs.hosts}" }
`,
    ).join("");

  it("refuses fan-outs whose lists' max_items add up past 5,000, naming the sum and the bound", () => {
    expect(issuesOf(many(5, 1000))).toEqual([]);
    expect(issuesOf(many(6, 1000))).toEqual([
      "tasks[1].for_each: the DAG's fan-outs may add up to 6000 instances (the sum of their lists' max_items); a run may have at most 5000: lower max_items",
    ]);
    expect(issuesOf(many(6, 800))).toEqual([]);
  });
});
