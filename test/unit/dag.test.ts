// parseDag on valid documents (defaults, formats, durations, limits at their edge), checkActions,
// detectFormat, and fuzzing: whatever the input, an answer and never an exception.
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { ParseDagResult } from "../../src/domain/dag.js";
import { checkActions, detectFormat, formatIssue, parseDag, validateDocument } from "../../src/domain/dag.js";
import type { ParsedDag } from "../../src/domain/model.js";

const examplesDir = join(import.meta.dirname, "../../config/examples");

function ok(result: ParseDagResult): ParsedDag {
  if (!result.ok) throw new Error(`expected a valid DAG, got:\n${result.issues.map(formatIssue).join("\n")}`);
  return result.dag;
}

// Written out, not imported from test/support: this is the oracle for the defaults parseDag fills in.
const defaults = {
  args: {},
  needs: [],
  on: { labels: [], node: null },
  timeoutMs: null,
  queueTimeoutMs: null,
  retries: 0,
  retryBackoffMs: 1000,
  concurrencyKey: null,
  priority: 0,
};

describe("parseDag on valid documents", () => {
  it("fills every default of a minimal JSON document", () => {
    const result = parseDag('{"id":"d","tasks":[{"id":"a","action":"echo"}]}', "json");
    expect(result.ok && result.hash).toMatch(/^[0-9a-f]{64}$/);
    expect(ok(result)).toEqual({
      id: "d",
      description: null,
      maxParallel: null,
      tasks: [{ id: "a", action: "echo", ...defaults }],
    });
  });

  it("keeps rerun_if_lost only when false, so a DAG that does not say it keeps its hash", () => {
    const doc = (extra: string): string => `{"id":"d","tasks":[{"id":"a","action":"echo"${extra}}]}`;
    const plain = parseDag(doc(""), "json");
    const yes = parseDag(doc(',"rerun_if_lost":true'), "json");
    const no = parseDag(doc(',"rerun_if_lost":false'), "json");
    expect(plain.ok && yes.ok && plain.hash === yes.hash).toBe(true);
    expect(ok(no).tasks[0]?.rerunIfLost).toBe(false);
    expect(ok(yes).tasks[0]?.rerunIfLost).toBeUndefined();
    expect(no.ok && plain.ok && no.hash !== plain.hash).toBe(true);
    const gate = parseDag('{"id":"d","tasks":[{"id":"g","approve":{},"rerun_if_lost":false}]}', "json");
    expect(gate.ok).toBe(false);
    const bad = parseDag(doc(',"rerun_if_lost":"no"'), "json");
    expect(bad.ok).toBe(false);
  });

  it("keeps a run condition (when) other than succeeded, and refuses one that cannot be judged", () => {
    const dag = (tasks: string): ParseDagResult => parseDag(`id = "d"\n${tasks}`, "toml");
    const gate = '[[tasks]]\nid = "ship"\napprove = {}\n';
    const build = '[[tasks]]\nid = "build"\naction = "echo"\n';
    const task = (when: string, needs: string) =>
      `[[tasks]]\nid = "after"\naction = "echo"\nneeds = [${needs}]\nwhen = "${when}"\n`;
    const plain = dag(build + '[[tasks]]\nid = "after"\naction = "echo"\nneeds = ["build"]\n');
    const same = dag(build + task("succeeded", '"build"'));
    expect(plain.ok && same.ok && plain.hash === same.hash).toBe(true);
    expect(ok(same).tasks[1]?.when).toBeUndefined();
    expect(ok(dag(build + task("failed", '"build"'))).tasks[1]?.when).toBe("failed");
    expect(ok(dag(build + task("done", '"build"'))).tasks[1]?.when).toBe("done");
    expect(ok(dag(gate + task("denied", '"ship"'))).tasks[1]?.when).toBe("denied");
    const issues = (r: ParseDagResult): string[] => (r.ok ? [] : r.issues.map(formatIssue));
    expect(issues(dag(build + task("maybe", '"build"')))).toEqual([
      'tasks[1].when: must be one of "succeeded", "failed", "denied", "done"',
    ]);
    expect(issues(dag(build + task("failed", "")))).toEqual([
      'tasks[1].when: task "after" says when = "failed" but needs nothing: a condition judges how the tasks it needs ended',
    ]);
    expect(issues(dag(build + task("denied", '"build"')))).toEqual([
      'tasks[1].when: task "after" says when = "denied" but none of the tasks it needs (build) is an approval gate: only a gate is denied',
    ]);
  });

  it("reads every key of the hello example (TOML)", () => {
    const dag = ok(parseDag(readFileSync(join(examplesDir, "hello.toml"), "utf8"), "toml"));
    expect(dag).toEqual({
      id: "hello",
      description: "Say hello, wait a moment, say goodbye.",
      maxParallel: null,
      tasks: [
        { ...defaults, id: "greet", action: "echo", args: { message: "hello from dagbot" } },
        { ...defaults, id: "pause", action: "sleep", args: { seconds: 1 }, needs: ["greet"] },
        { ...defaults, id: "farewell", action: "echo", args: { message: "goodbye" }, needs: ["pause"] },
      ],
    });
  });

  it("converts every optional key", () => {
    const dag = ok(
      parseDag(
        JSON.stringify({
          id: "all",
          description: "every key",
          max_parallel: 3,
          tasks: [
            { id: "a", action: "echo" },
            {
              id: "b",
              action: "sleep",
              args: { s: "x", n: 2.5, f: false },
              needs: ["a"],
              on: { labels: ["gpu", "linux"], node: "node-1" },
              timeout: "1h30m",
              queue_timeout: "500ms",
              retry_backoff: "2s",
              retries: 10,
              concurrency_key: "db",
              priority: -1000,
            },
          ],
        }),
        "json",
      ),
    );
    expect(dag.maxParallel).toBe(3);
    expect(dag.description).toBe("every key");
    expect(dag.tasks[1]).toEqual({
      id: "b",
      action: "sleep",
      args: { s: "x", n: 2.5, f: false },
      needs: ["a"],
      on: { labels: ["gpu", "linux"], node: "node-1" },
      timeoutMs: 5_400_000,
      queueTimeoutMs: 500,
      retries: 10,
      retryBackoffMs: 2000,
      concurrencyKey: "db",
      priority: -1000,
    });
  });

  it.each([
    ["500ms", 500],
    ["30s", 30_000],
    ["10m", 600_000],
    ["1h", 3_600_000],
    ["1h30m", 5_400_000],
    ["1.5s", 1500],
    ["7d", 604_800_000],
  ])("reads the duration %s as %i ms", (text, ms) => {
    const dag = ok(
      parseDag(JSON.stringify({ id: "d", tasks: [{ id: "a", action: "e", timeout: text }] }), "json"),
    );
    expect(dag.tasks[0]!.timeoutMs).toBe(ms);
  });

  it("accepts every limit at its edge", () => {
    const id64 = "x".repeat(64);
    const tasks = Array.from({ length: 1000 }, (_, i) => ({ id: `t${i}`, action: "e" }));
    tasks[0] = { id: id64, action: id64 };
    const dag = ok(parseDag(JSON.stringify({ id: id64, tasks }), "json"));
    expect(dag.tasks).toHaveLength(1000);
    const big = ok(
      parseDag(
        JSON.stringify({ id: "d", tasks: [{ id: "a", action: "e", args: { m: "y".repeat(4096) } }] }),
        "json",
      ),
    );
    expect(big.tasks[0]!.args["m"]).toHaveLength(4096);
  });

  it("takes a byte order mark, CRLF line ends and JSON escapes in stride", () => {
    const toml = '\uFEFFid = "d"\r\n[[tasks]]\r\nid = "a"\r\naction = "e"\r\n';
    expect(ok(parseDag(toml, "toml")).tasks[0]!.id).toBe("a");
    expect(ok(parseDag('\uFEFF{"id":"\\u0064","tasks":[{"id":"a","action":"e"}]}', "json")).id).toBe("d");
  });

  it("parses every example in config/examples", () => {
    const files = exampleFiles();
    expect(files.length).toBeGreaterThanOrEqual(3);
    for (const file of files) {
      const text = readFileSync(join(examplesDir, file), "utf8");
      ok(parseDag(text, detectFormat(file, text)));
    }
  });

  it("validates an already-parsed value", () => {
    expect(validateDocument({ id: "d", tasks: [{ id: "a", action: "e" }] }).ok).toBe(true);
    expect(validateDocument(Object.assign(Object.create(null), { id: "d", tasks: [] }))).toEqual({
      ok: false,
      issues: [{ path: "tasks", message: "a DAG needs at least one task" }],
    });
  });

  it("keeps an argument named like an Object method as plain own data", () => {
    const dag = ok(
      parseDag('{"id":"d","tasks":[{"id":"a","action":"e","args":{"toString":"x","valueOf":1}}]}', "json"),
    );
    const args = dag.tasks[0]!.args;
    expect(Object.getPrototypeOf(args)).toBe(Object.prototype);
    expect(Object.keys(args)).toEqual(["toString", "valueOf"]);
    expect(args["toString"]).toBe("x");
  });
});

describe("checkActions", () => {
  const dag = ok(
    parseDag(
      JSON.stringify({
        id: "d",
        tasks: [
          { id: "a", action: "echo" },
          { id: "b", action: "ehco" },
          { id: "c", action: "rm" },
        ],
      }),
      "json",
    ),
  );

  it("places each unknown action and names what is known", () => {
    expect(checkActions(dag, new Set(["echo", "sleep"])).map(formatIssue)).toEqual([
      'tasks[1].action: unknown action "ehco" (did you mean "echo"?) (known: echo, sleep)',
      'tasks[2].action: unknown action "rm" (known: echo, sleep)',
    ]);
  });

  it("is empty when every action is known, and says so when none is", () => {
    expect(checkActions(dag, new Set(["echo", "ehco", "rm"]))).toEqual([]);
    expect(checkActions(dag, new Set())[0]?.message).toBe(
      'unknown action "echo" (no node offers any action)',
    );
  });
});

describe("detectFormat", () => {
  it.each([
    ["dag.json", "id = 1", "json"],
    ["DAG.TOML", "{}", "toml"],
    ["dag.txt", '  \n {"id": "x"}', "json"],
    ["dag.txt", 'id = "x"', "toml"],
    [null, "\uFEFF{}", "json"],
    [null, "[[tasks]]", "toml"],
  ] as const)("%s with %j → %s", (name, text, format) => {
    expect(detectFormat(name, text)).toBe(format);
  });
});

describe("fuzzing: parseDag always answers", () => {
  const answered = (result: ParseDagResult) => {
    if (result.ok) {
      expect(result.hash).toMatch(/^[0-9a-f]{64}$/);
      return;
    }
    expect(result.issues.length).toBeGreaterThan(0);
    for (const issue of result.issues) {
      expect(typeof issue.path).toBe("string");
      expect(issue.message).not.toMatch(/^internal error/);
    }
  };

  it("on arbitrary text, as JSON and as TOML", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary", maxLength: 200 }), (text) => {
        answered(parseDag(text, "json"));
        answered(parseDag(text, "toml"));
      }),
      { numRuns: 1000 },
    );
  });

  it("on arbitrary JSON values", () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 4 }), (value) => {
        answered(parseDag(JSON.stringify(value) ?? "", "json"));
        answered(parseDag(JSON.stringify({ id: "d", tasks: [value] }), "json"));
      }),
      { numRuns: 500 },
    );
  });

  it("on arbitrary JavaScript values given as the parsed document", () => {
    const anything = fc.anything({
      maxDepth: 3,
      withNullPrototype: true,
      withBigInt: true,
      withDate: true,
      withMap: true,
      withSet: true,
      withTypedArray: true,
      withSparseArray: true,
      withBoxedValues: true,
      withObjectString: true,
    });
    fc.assert(
      fc.property(anything, (value) => {
        answered(validateDocument(value));
        answered(
          validateDocument({ id: "d", tasks: [value, { id: "a", action: "e", args: value, on: value }] }),
        );
      }),
      { numRuns: 500 },
    );
  });

  it("on the examples with random edits", () => {
    const texts = exampleFiles().map((file) => readFileSync(join(examplesDir, file), "utf8"));
    const edit = fc.record({
      doc: fc.nat({ max: texts.length - 1 }),
      at: fc.nat(),
      cut: fc.nat({ max: 20 }),
      insert: fc.string({ unit: "binary", maxLength: 8 }),
    });
    fc.assert(
      fc.property(fc.array(edit, { minLength: 1, maxLength: 4 }), (edits) => {
        let text = texts[edits[0]!.doc]!;
        for (const { at, cut, insert } of edits) {
          const i = at % (text.length + 1);
          text = text.slice(0, i) + insert + text.slice(i + cut);
        }
        answered(parseDag(text, "json"));
        answered(parseDag(text, "toml"));
      }),
      { numRuns: 1000 },
    );
  });
});

/** The example DAGs: the files of config/examples (its folders hold other examples, e.g. webhooks). */
function exampleFiles(): string[] {
  return readdirSync(examplesDir, { withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => entry.name);
}
