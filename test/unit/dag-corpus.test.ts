// A corpus of malformed DAG documents: each must be answered with an issue at the exact place and a
// clear message, never an exception; plus the bad fixtures that `dagbot validate` is tested on.
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { DagFormat, DagIssue } from "../../src/domain/dag.js";
import { detectFormat, formatIssue, parseDag } from "../../src/domain/dag.js";

interface Case {
  name: string;
  format: DagFormat;
  text: string;
  /** The place of one expected issue ("" for the whole document)... */
  path: string;
  /** ...and a piece of its message. */
  message: string;
}

const json = (value: unknown) => JSON.stringify(value);
const task = (id: string, extra: Record<string, unknown> = {}) => ({ id, action: "echo", ...extra });
const doc = (...tasks: unknown[]) => json({ id: "d", tasks });
const toml = (...lines: string[]) => lines.join("\n");
const tomlTask = (id: string, ...lines: string[]) =>
  ["[[tasks]]", `id = "${id}"`, 'action = "echo"', ...lines].join("\n");
const manyTasks = (count: number) =>
  doc(...Array.from({ length: count }, (_, i) => ({ id: `t${i}`, action: "e" })));

const cases: Case[] = [
  // Empty and not a document.
  { name: "empty JSON", format: "json", text: "", path: "", message: "the document is empty" },
  { name: "blank TOML", format: "toml", text: " \n\t\n", path: "", message: "the document is empty" },
  { name: "only a BOM", format: "json", text: "\uFEFF", path: "", message: "the document is empty" },
  {
    name: "JSON root array",
    format: "json",
    text: "[]",
    path: "",
    message: 'must be a table with "id" and "tasks", got an array',
  },
  { name: "JSON root null", format: "json", text: "null", path: "", message: "got null" },
  { name: "JSON root string", format: "json", text: '"hi"', path: "", message: "got a string" },
  { name: "TOML comments only", format: "toml", text: "# nothing\n", path: "id", message: "is required" },
  // JSON syntax.
  {
    name: "JSON cut short",
    format: "json",
    text: "{",
    path: "",
    message: "invalid JSON at line 1, column 2: unexpected end of input",
  },
  {
    name: "JSON trailing comma",
    format: "json",
    text: '{"id": "d",\n  "tasks": [],\n}',
    path: "",
    message:
      'invalid JSON at line 3, column 1: unexpected "}", expected a quoted key (JSON allows no trailing comma)',
  },
  {
    name: "JSON single quotes",
    format: "json",
    text: "{'id': 'd'}",
    path: "",
    message: `line 1, column 2: unexpected "'", expected a quoted key`,
  },
  {
    name: "JSON unterminated string",
    format: "json",
    text: '{"id": "d',
    path: "",
    message: "line 1, column 8: unterminated string",
  },
  {
    name: "JSON raw newline in a string",
    format: "json",
    text: '{"id": "a\nb"}',
    path: "",
    message: "line 1, column 10: U+000A (a control character) inside a string",
  },
  {
    name: "JSON two documents",
    format: "json",
    text: "{} {}",
    path: "",
    message: 'line 1, column 4: unexpected "{", expected the end of the document',
  },
  {
    name: "JSON bad escape",
    format: "json",
    text: '{"id": "\\q"}',
    path: "",
    message: "line 1, column 9: invalid escape sequence",
  },
  {
    name: "JSON missing colon",
    format: "json",
    text: '{"id" "d"}',
    path: "",
    message: 'line 1, column 7: unexpected """, expected ":" after a key',
  },
  {
    name: "JSON bare word",
    format: "json",
    text: '{"id": yes}',
    path: "",
    message: 'line 1, column 8: unexpected "y", expected a value',
  },
  // TOML syntax.
  {
    name: "TOML value missing",
    format: "toml",
    text: 'id = "d"\nb =\n',
    path: "",
    message: "invalid TOML at line 2, column",
  },
  {
    name: "TOML duplicate key",
    format: "toml",
    text: 'id = "a"\nid = "b"\n',
    path: "",
    message: "invalid TOML at line 2",
  },
  {
    name: "TOML unclosed header",
    format: "toml",
    text: 'id = "d"\n[[tasks]\n',
    path: "",
    message: "invalid TOML at line 2",
  },
  {
    name: "TOML JSON given as TOML",
    format: "toml",
    text: '{"id": "d"}',
    path: "",
    message: "invalid TOML at line 1, column 1",
  },
  // Wrong types and missing keys.
  {
    name: "missing id",
    format: "json",
    text: json({ tasks: [task("a")] }),
    path: "id",
    message: "is required",
  },
  {
    name: "id is a number",
    format: "json",
    text: json({ id: 5, tasks: [task("a")] }),
    path: "id",
    message: "expected a string, got an integer (5)",
  },
  { name: "missing tasks", format: "toml", text: 'id = "d"', path: "tasks", message: "is required" },
  {
    name: "tasks is a table",
    format: "json",
    text: json({ id: "d", tasks: {} }),
    path: "tasks",
    message: "expected an array, got a table",
  },
  {
    name: "no tasks",
    format: "toml",
    text: 'id = "d"\ntasks = []',
    path: "tasks",
    message: "a DAG needs at least one task",
  },
  {
    name: "task is a string",
    format: "json",
    text: doc("a"),
    path: "tasks[0]",
    message: "expected a table, got a string",
  },
  {
    name: "task without action",
    format: "json",
    text: doc({ id: "a" }),
    path: "tasks[0].action",
    message: 'is required (or "approve", to make the task an approval gate)',
  },
  {
    name: "action is a number",
    format: "toml",
    text: toml('id = "d"', "[[tasks]]", 'id = "a"', "action = 1"),
    path: "tasks[0].action",
    message: "expected a string, got an integer (1)",
  },
  {
    name: "needs is a string",
    format: "json",
    text: doc(task("a"), task("b", { needs: "a" })),
    path: "tasks[1].needs",
    message: "expected an array, got a string",
  },
  {
    name: "need is a number",
    format: "json",
    text: doc(task("a"), task("b", { needs: [1] })),
    path: "tasks[1].needs[0]",
    message: "expected a string, got an integer (1)",
  },
  {
    name: "negative retries",
    format: "json",
    text: doc(task("a", { retries: -1 })),
    path: "tasks[0].retries",
    message: "must be at least 0, got -1",
  },
  {
    name: "too many retries",
    format: "toml",
    text: toml('id = "d"', tomlTask("a", "retries = 11")),
    path: "tasks[0].retries",
    message: "must be at most 10, got 11",
  },
  {
    name: "fractional retries",
    format: "json",
    text: doc(task("a", { retries: 1.5 })),
    path: "tasks[0].retries",
    message: "expected an integer, got a number (1.5)",
  },
  {
    name: "retries as a string",
    format: "json",
    text: doc(task("a", { retries: "2" })),
    path: "tasks[0].retries",
    message: "expected an integer, got a string",
  },
  {
    name: "priority too high",
    format: "json",
    text: doc(task("a", { priority: 1001 })),
    path: "tasks[0].priority",
    message: "must be at most 1000, got 1001",
  },
  {
    name: "max_parallel zero",
    format: "json",
    text: json({ id: "d", max_parallel: 0, tasks: [task("a")] }),
    path: "max_parallel",
    message: "must be at least 1, got 0",
  },
  {
    name: "description too long",
    format: "json",
    text: json({ id: "d", description: "x".repeat(1001), tasks: [task("a")] }),
    path: "description",
    message: "is 1001 characters long; at most 1000 allowed",
  },
  // Unknown keys.
  {
    name: "unknown document key",
    format: "json",
    text: json({ id: "d", owner: "me", tasks: [task("a")] }),
    path: "owner",
    message: "unknown key",
  },
  {
    name: "misspelt task key",
    format: "json",
    text: doc(task("a"), task("b", { neds: ["a"] })),
    path: "tasks[1].neds",
    message: 'unknown key (did you mean "needs"?)',
  },
  {
    name: "depends_on",
    format: "toml",
    text: toml('id = "d"', tomlTask("a"), tomlTask("b", 'depends_on = ["a"]')),
    path: "tasks[1].depends_on",
    message: 'unknown key (did you mean "needs"?)',
  },
  {
    name: "misspelt placement key",
    format: "json",
    text: doc(task("a", { on: { label: ["x"] } })),
    path: "tasks[0].on.label",
    message: 'unknown key (did you mean "labels"?)',
  },
  // Durations.
  {
    name: "timeout as a number",
    format: "json",
    text: doc(task("a", { timeout: 30 })),
    path: "tasks[0].timeout",
    message: 'expected a duration string like "30s", "10m" or "1h", got an integer',
  },
  {
    name: "zero timeout",
    format: "toml",
    text: toml('id = "d"', tomlTask("a", 'timeout = "0s"')),
    path: "tasks[0].timeout",
    message: '"0s" is zero',
  },
  {
    name: "negative duration",
    format: "json",
    text: doc(task("a", { queue_timeout: "-5s" })),
    path: "tasks[0].queue_timeout",
    message: '"-5s" is not a duration',
  },
  {
    name: "duration with a space",
    format: "json",
    text: doc(task("a", { timeout: "10 m" })),
    path: "tasks[0].timeout",
    message: '"10 m" is not a duration',
  },
  {
    name: "duration without unit",
    format: "json",
    text: doc(task("a", { retry_backoff: "10" })),
    path: "tasks[0].retry_backoff",
    message: '"10" is not a duration',
  },
  {
    name: "duration over a week",
    format: "json",
    text: doc(task("a", { timeout: "8d" })),
    path: "tasks[0].timeout",
    message: '"8d" is longer than the limit of 7 days',
  },
  {
    name: "TOML date as timeout",
    format: "toml",
    text: toml('id = "d"', tomlTask("a", "timeout = 1979-05-27")),
    path: "tasks[0].timeout",
    message: "got a date",
  },
  // Placement and arguments.
  {
    name: "labels as a string",
    format: "json",
    text: doc(task("a", { on: { labels: "gpu" } })),
    path: "tasks[0].on.labels",
    message: "expected an array, got a string",
  },
  {
    name: "args as an array",
    format: "json",
    text: doc(task("a", { args: [1] })),
    path: "tasks[0].args",
    message: "expected a table of arguments, got an array",
  },
  {
    name: "nested arg",
    format: "toml",
    text: toml('id = "d"', tomlTask("a", "args = { x = { y = 1 } }")),
    path: "tasks[0].args.x",
    message: "expected a string, number or boolean, got a table",
  },
  {
    name: "arg NaN",
    format: "toml",
    text: toml('id = "d"', tomlTask("a", "args = { x = nan }")),
    path: "tasks[0].args.x",
    message: "got NaN",
  },
  {
    name: "arg too long",
    format: "json",
    text: doc(task("a", { args: { msg: "x".repeat(5000) } })),
    path: "tasks[0].args.msg",
    message: "is 5000 characters long; at most 4096",
  },
  {
    name: "arg name with a space",
    format: "json",
    text: doc(task("a", { args: { "a b": 1 } })),
    path: 'tasks[0].args["a b"]',
    message: 'argument name contains " " at position 2',
  },
  {
    name: "arg name with a dash",
    format: "json",
    text: doc(task("a", { args: { "dry-run": true } })),
    path: 'tasks[0].args["dry-run"]',
    message: 'argument name contains "-" at position 4; argument names start with a letter or "_"',
  },
  {
    name: "arg name starting with a digit",
    format: "toml",
    text: toml('id = "d"', tomlTask("a", 'args = { 1st = "x" }')),
    path: 'tasks[0].args["1st"]',
    message: 'argument name contains "1" at position 1',
  },
  // Ids: characters, length.
  {
    name: "NUL in an id",
    format: "json",
    text: doc(task("a\u0000b")),
    path: "tasks[0].id",
    message: "contains U+0000 (a control character) at position 2",
  },
  {
    name: "escape in an id",
    format: "toml",
    text: toml('id = "d"', tomlTask("a\\u001b[31m")),
    path: "tasks[0].id",
    message: "contains U+001B (a control character) at position 2",
  },
  {
    name: "accent in an id",
    format: "json",
    text: doc(task("tâche")),
    path: "tasks[0].id",
    message: 'contains "\\u00e2" (U+00E2) at position 2',
  },
  {
    name: "emoji in an id",
    format: "toml",
    text: toml('id = "d"', tomlTask("go🚀")),
    path: "tasks[0].id",
    message: "(U+1F680) at position 3",
  },
  {
    name: "bidi override in an id",
    format: "json",
    text: doc(task("ab\u202Ecd")),
    path: "tasks[0].id",
    message: "(U+202E) at position 3",
  },
  {
    name: "id too long",
    format: "json",
    text: doc(task("x".repeat(65))),
    path: "tasks[0].id",
    message: "is 65 characters long; at most 64 are allowed",
  },
  {
    name: "empty id",
    format: "json",
    text: doc(task("")),
    path: "tasks[0].id",
    message: "must not be empty",
  },
  {
    name: "slash in the DAG id",
    format: "json",
    text: json({ id: "a/b", tasks: [task("a")] }),
    path: "id",
    message: 'contains "/" at position 2',
  },
  {
    name: "space in a label",
    format: "json",
    text: doc(task("a", { on: { labels: ["x y"] } })),
    path: "tasks[0].on.labels[0]",
    message: 'contains " " at position 2',
  },
  // Graph.
  {
    name: "self-loop",
    format: "json",
    text: doc(task("a", { needs: ["a"] })),
    path: "tasks[0].needs[0]",
    message: 'task "a" needs itself',
  },
  {
    name: "two-cycle",
    format: "json",
    text: doc(task("a", { needs: ["b"] }), task("b", { needs: ["a"] })),
    path: "tasks[0].needs[0]",
    message: "dependency cycle: a -> b -> a",
  },
  {
    name: "three-cycle behind a root",
    format: "toml",
    text: toml(
      'id = "d"',
      tomlTask("root"),
      tomlTask("x", 'needs = ["root", "z"]'),
      tomlTask("y", 'needs = ["x"]'),
      tomlTask("z", 'needs = ["y"]'),
    ),
    path: "tasks[1].needs[1]",
    message: "dependency cycle: x -> z -> y -> x",
  },
  {
    name: "unknown need",
    format: "json",
    text: doc(task("dump"), task("b", { needs: ["upload"] })),
    path: "tasks[1].needs[0]",
    message: 'unknown task "upload"',
  },
  {
    name: "misspelt need",
    format: "json",
    text: doc(task("upload"), task("b", { needs: ["uplaod"] })),
    path: "tasks[1].needs[0]",
    message: 'unknown task "uplaod" (did you mean "upload"?)',
  },
  {
    name: "duplicate task id",
    format: "json",
    text: doc(task("a"), task("a")),
    path: "tasks[1].id",
    message: 'duplicate task id "a" (first used by tasks[0])',
  },
  {
    name: "need listed twice",
    format: "json",
    text: doc(task("a"), task("b", { needs: ["a", "a"] })),
    path: "tasks[1].needs[1]",
    message: '"a" is already listed at needs[0]',
  },
  // Limits.
  {
    name: "1,001 tasks",
    format: "json",
    text: manyTasks(1001),
    path: "tasks",
    message: "has 1001 tasks; at most 1000 are allowed",
  },
  {
    name: "10,000 tasks",
    format: "json",
    text: manyTasks(10_000),
    path: "",
    message: "bytes; at most 65,536 bytes (64 KiB) are allowed",
  },
  {
    name: "a 1 MB string",
    format: "json",
    text: json({ id: "d", description: "x".repeat(1 << 20), tasks: [] }),
    path: "",
    message: "the document is at least 1,048,6",
  },
  {
    name: "64 KiB counted in UTF-8 bytes, not characters",
    format: "json",
    text: json({ id: "d", description: "€".repeat(22_000), tasks: [] }),
    path: "",
    message: "the document is 66,03",
  },
  {
    name: "100,000 nested arrays",
    format: "json",
    text: "[".repeat(100_000) + "]".repeat(100_000),
    path: "",
    message: "at most 65,536 bytes",
  },
  {
    name: "20,000 nested arrays in an argument",
    format: "json",
    text: `{"id":"d","tasks":[{"id":"a","action":"e","args":{"x":${"[".repeat(20_000)}${"]".repeat(20_000)}}}]}`,
    path: "tasks[0].args.x",
    message: "values are nested more than 32 levels deep",
  },
  {
    name: "nested TOML arrays",
    format: "toml",
    text: `id = "d"\nx = ${"[".repeat(5000)}${"]".repeat(5000)}`,
    path: "",
    message: "invalid TOML at line 2",
  },
  // Keys that would pollute prototypes if assigned naively.
  {
    name: "__proto__ in the document",
    format: "json",
    text: '{"id":"d","__proto__":{"polluted":1},"tasks":[{"id":"a","action":"e"}]}',
    path: "__proto__",
    message: "unknown key",
  },
  {
    name: "__proto__ in a task",
    format: "json",
    text: '{"id":"d","tasks":[{"id":"a","action":"e","__proto__":{"x":1}}]}',
    path: "tasks[0].__proto__",
    message: "unknown key",
  },
  {
    name: "constructor in a task",
    format: "toml",
    text: toml('id = "d"', tomlTask("a", "constructor = 1")),
    path: "tasks[0].constructor",
    message: "unknown key",
  },
  {
    name: "__proto__ argument (JSON)",
    format: "json",
    text: '{"id":"d","tasks":[{"id":"a","action":"e","args":{"__proto__":"x"}}]}',
    path: "tasks[0].args.__proto__",
    message: '"__proto__" is a reserved name',
  },
  {
    name: "__proto__ argument (TOML)",
    format: "toml",
    text: toml('id = "d"', tomlTask("a", 'args = { "__proto__" = { polluted = true } }')),
    path: "tasks[0].args.__proto__",
    message: "is a reserved name",
  },
  {
    name: "constructor argument",
    format: "toml",
    text: toml('id = "d"', tomlTask("a", 'args = { constructor = "x" }')),
    path: "tasks[0].args.constructor",
    message: "is a reserved name",
  },
  {
    name: "prototype argument",
    format: "json",
    text: doc(task("a", { args: { prototype: 1 } })),
    path: "tasks[0].args.prototype",
    message: "is a reserved name",
  },
  {
    name: "__proto__ in placement",
    format: "json",
    text: '{"id":"d","tasks":[{"id":"a","action":"e","on":{"__proto__":[]}}]}',
    path: "tasks[0].on.__proto__",
    message: "unknown key",
  },
];

function parse(c: { text: string; format: DagFormat }): DagIssue[] {
  let result: ReturnType<typeof parseDag> | undefined;
  expect(() => (result = parseDag(c.text, c.format))).not.toThrow();
  if (result === undefined || result.ok) throw new Error("expected the document to be rejected");
  return result.issues;
}

describe("malformed DAG documents", () => {
  it("has a corpus of at least 40 cases with distinct names", () => {
    expect(cases.length).toBeGreaterThanOrEqual(40);
    expect(new Set(cases.map((c) => c.name)).size).toBe(cases.length);
  });

  it.each(cases)("$name → $path: $message", (c) => {
    const issues = parse(c);
    const atPlace = issues.filter((issue) => issue.path === c.path);
    expect(
      atPlace.map((issue) => issue.message),
      formatAll(issues),
    ).toEqual(expect.arrayContaining([expect.stringContaining(c.message)]));
    for (const issue of issues) {
      expect(issue.message.length).toBeGreaterThan(0);
      // Messages are safe to print: no raw control characters from the input.
      const unsafe = [...issue.message].filter((ch) => ch < " " || ch === "\u007f" || ch === "\u202e");
      expect(unsafe, issue.message).toEqual([]);
    }
  });

  it("collects every issue of a document in one pass, in document order", () => {
    const text = json({
      id: "d",
      colour: "red",
      tasks: [
        task("a", { needs: ["b"] }),
        task("b", { needs: ["a"], retries: 99 }),
        task("c", { needs: ["nope"], timeout: "soon" }),
        task("a"),
      ],
    });
    expect(parse({ text, format: "json" }).map(formatIssue)).toEqual([
      "colour: unknown key",
      "tasks[0].needs[0]: dependency cycle: a -> b -> a",
      "tasks[1].retries: must be at most 10, got 99",
      'tasks[2].timeout: "soon" is not a duration; use a number and a unit, like "500ms", "30s", "10m", "1h" or "1h30m"',
      'tasks[2].needs[0]: unknown task "nope"',
      'tasks[3].id: duplicate task id "a" (first used by tasks[0])',
    ]);
  });

  it("reports one cycle per knot of tasks", () => {
    const text = doc(
      task("a", { needs: ["b"] }),
      task("b", { needs: ["a"] }),
      task("c", { needs: ["d"] }),
      task("d", { needs: ["c", "a"] }),
    );
    const cycles = parse({ text, format: "json" }).filter((issue) =>
      issue.message.startsWith("dependency cycle"),
    );
    expect(cycles.map(formatIssue)).toEqual([
      "tasks[0].needs[0]: dependency cycle: a -> b -> a",
      "tasks[2].needs[0]: dependency cycle: c -> d -> c",
    ]);
  });

  it("never pollutes Object.prototype, whatever the keys", () => {
    const before = Object.getOwnPropertyNames(Object.prototype).sort();
    for (const c of cases.filter((c) => /__proto__|constructor|prototype/.test(c.name))) parse(c);
    const stored = parseDag('{"id":"d","tasks":[{"id":"a","action":"e","args":{"ok":"x"}}]}', "json");
    expect(stored.ok).toBe(true);
    expect(Object.getOwnPropertyNames(Object.prototype).sort()).toEqual(before);
    expect(({} as Record<string, unknown>)["polluted"]).toBeUndefined();
  });

  it("answers input that is not text with an issue", () => {
    const result = parseDag(42 as unknown as string, "json");
    expect(result).toEqual({
      ok: false,
      issues: [{ path: "", message: "expected document text, got an integer" }],
    });
    expect(parseDag("{}", "yaml" as DagFormat)).toMatchObject({ ok: false, issues: [{ path: "" }] });
  });
});

const fixtureDir = join(import.meta.dirname, "../fixtures/dags");
const expected = JSON.parse(readFileSync(join(fixtureDir, "expected.json"), "utf8")) as Record<
  string,
  { path: string; message: string }[]
>;

describe("bad fixtures in test/fixtures/dags", () => {
  const files = readdirSync(fixtureDir).filter((name) => name !== "expected.json");

  it("lists every fixture file in expected.json and nothing else", () => {
    expect(Object.keys(expected).sort()).toEqual(files.sort());
  });

  it.each(files)("%s", (file) => {
    const text = readFileSync(join(fixtureDir, file), "utf8");
    const issues = parse({ text, format: detectFormat(file, text) });
    for (const want of expected[file] ?? []) {
      expect(
        issues.filter((issue) => issue.path === want.path).map((issue) => issue.message),
        formatAll(issues),
      ).toEqual(expect.arrayContaining([expect.stringContaining(want.message)]));
    }
  });
});

function formatAll(issues: DagIssue[]): string {
  return `issues were:\n${issues.map(formatIssue).join("\n")}`;
}
