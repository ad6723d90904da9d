/** DAG parameters: declaration checks at parse, `!dag run` grammar, value checks and substitution. */
import { describe, expect, it } from "vitest";
import { parseCommand, parseCommandData } from "../../src/app/commands/verbs/index.js";
import { parseDag } from "../../src/domain/dag.js";
import type { ParsedDag } from "../../src/domain/model.js";
import { appliedDag, definitionOf, resolveParams, taskArgs } from "../../src/domain/params.js";
import { renderArgv } from "../../src/domain/action-argv.js";
import { run } from "../../src/app/commands/verbs/run.js";

const TOML = `id = "nightly"
[params.day]
pattern = "[0-9]{4}-[0-9]{2}-[0-9]{2}"
default = "2026-01-01"
[params.who]
pattern = "[a-z]+"
[[tasks]]
id = "a"
action = "echo"
args = { message = "day {params.day} by {params.who}", n = 3 }
`;

function parsed(text = TOML): ParsedDag {
  const result = parseDag(text, "toml");
  if (!result.ok) throw new Error(JSON.stringify(result.issues));
  return result.dag;
}

function issuesOf(text: string): string[] {
  const result = parseDag(text, "toml");
  return result.ok ? [] : result.issues.map((i) => `${i.path}: ${i.message}`);
}

describe("params in the DAG document", () => {
  it("parses [params.NAME] with pattern and optional default", () => {
    expect(parsed().params).toEqual({
      day: { pattern: "[0-9]{4}-[0-9]{2}-[0-9]{2}", default: "2026-01-01" },
      who: { pattern: "[a-z]+", default: null },
    });
  });

  it("leaves a DAG without params exactly as before (same hash, no params key)", () => {
    const plain = parseDag('id = "x"\n[[tasks]]\nid = "a"\naction = "echo"\n', "toml");
    expect(plain.ok && "params" in plain.dag).toBe(false);
    const empty = parseDag('id = "x"\n[params]\n[[tasks]]\nid = "a"\naction = "echo"\n', "toml");
    expect(plain.ok && empty.ok && plain.hash === empty.hash).toBe(true);
  });

  it("refuses a reference to an undeclared parameter, naming it", () => {
    expect(issuesOf(TOML.replace("{params.who}", "{params.whom}")).join("\n")).toMatch(
      /declares no parameter "whom"/,
    );
  });

  it("refuses a default that does not match, an invalid or backtracking pattern, bad names", () => {
    expect(issuesOf(TOML.replace('default = "2026-01-01"', 'default = "yesterday"')).join("\n")).toMatch(
      /params\.day\.default.*does not match its pattern/,
    );
    expect(issuesOf(TOML.replace('pattern = "[a-z]+"', 'pattern = "(a"')).join("\n")).toMatch(
      /params\.who\.pattern.*not a valid RE2 pattern/,
    );
    // RE2 has no backreferences: refused at publish rather than matched in exponential time.
    expect(issuesOf(TOML.replace('pattern = "[a-z]+"', 'pattern = "(a)\\\\1"'))).not.toEqual([]);
    expect(issuesOf(TOML.replace("[params.who]", '[params."bad-name"]')).join("\n")).toMatch(
      /parameter name/,
    );
    expect(issuesOf(TOML.replace("[params.who]", '[params."__proto__"]')).join("\n")).toMatch(/reserved/);
    expect(
      issuesOf(TOML.replace('pattern = "[a-z]+"', 'pattern = "[a-z]+"\nshell = true')).join("\n"),
    ).toMatch(/shell/);
  });
});

describe("resolveParams", () => {
  const dag = parsed();

  it("fills defaults and requires the rest", () => {
    expect(resolveParams(dag, [["who", "ann"]])).toEqual({
      ok: true,
      values: { day: "2026-01-01", who: "ann" },
    });
    expect(resolveParams(dag, [])).toMatchObject({
      ok: false,
      message: expect.stringMatching(/"who" is required/),
    });
  });

  it("names the parameter: unknown, twice, pattern mismatch (anchored), too long, NUL", () => {
    const bad = (given: Array<[string, string]>) => {
      const r = resolveParams(dag, given);
      return r.ok ? "" : r.message;
    };
    expect(
      bad([
        ["who", "ann"],
        ["whom", "x"],
      ]),
    ).toMatch(/unknown parameter "whom" for nightly: it declares day, who/);
    expect(
      bad([
        ["who", "ann"],
        ["who", "bob"],
      ]),
    ).toMatch(/"who" is given twice/);
    // Anchored: a matching part is not enough.
    expect(bad([["who", "ann; rm -rf /"]])).toMatch(
      /parameter "who": .* does not match its pattern \[a-z\]\+/,
    );
    expect(bad([["who", "ANN"]])).toMatch(/does not match/);
    expect(bad([["who", "a".repeat(5000)]])).toMatch(/at most 4096/);
    expect(bad([["who", "a\0b"]])).toMatch(/NUL/);
    expect(
      bad([
        ["__proto__", "x"],
        ["who", "a"],
      ]),
    ).toMatch(/unknown parameter "__proto__"/);
    expect(
      bad([
        ["constructor", "x"],
        ["who", "a"],
      ]),
    ).toMatch(/unknown parameter "constructor"/);
  });

  it("matches in linear time: a pathological value against a nested pattern returns at once", () => {
    const nested = parsed(TOML.replace('pattern = "[a-z]+"', 'pattern = "(a+)+b"'));
    const r = resolveParams(nested, [["who", `${"a".repeat(4000)}c`]]);
    expect(r.ok).toBe(false);
  });
});

describe("substitution", () => {
  it("puts values into string arguments only, once, without expanding a value again", () => {
    const dag = parsed();
    const values = { day: "{params.who}", who: "ann" };
    const run: ParsedDag = { ...dag, values };
    expect(taskArgs(run, run.tasks[0]!)).toEqual({ message: "day {params.who} by ann", n: 3 });
    expect(appliedDag(run).tasks[0]!.args["message"]).toBe("day {params.who} by ann");
    expect(definitionOf({ ...run, definition: "nightly" })).toEqual(dag);
  });

  it("a hostile value is one argv entry, and the action's leading '-' rule still applies", () => {
    const echo = {
      name: "echo",
      argv: ["echo", "{message}"],
      args: { message: { pattern: "[^\\n]{0,200}" } },
    };
    const dag = parsed(`id = "x"
[params.text]
pattern = ".{1,100}"
[[tasks]]
id = "a"
action = "echo"
args = { message = "{params.text}" }
`);
    const run = (text: string): ParsedDag => ({ ...dag, values: { text } });
    const hostile = "$(touch /tmp/pwned); echo `id` | sh";
    expect(renderArgv(echo, taskArgs(run(hostile), dag.tasks[0]!))).toEqual({
      ok: true,
      argv: ["echo", hostile],
    });
    const dash = renderArgv(echo, taskArgs(run("-rf"), dag.tasks[0]!));
    expect(dash.ok).toBe(false);
  });
});

describe("!dag run grammar", () => {
  it("parses the id and name=value pairs in order, values unquoted", () => {
    expect(parseCommand({ body: "!dag run nightly day=2026-02-03 who=`a=b`" })).toEqual({
      kind: "command",
      command: {
        verb: "run",
        id: "nightly",
        params: [
          ["day", "2026-02-03"],
          ["who", "a=b"],
        ],
      },
    });
    expect(parseCommand({ body: "!dag run nightly" })).toMatchObject({
      command: { verb: "run", id: "nightly", params: [] },
    });
  });

  it("refuses a missing id, a bad id, a pair without =, a bad name, a code block", () => {
    const err = (body: string) => {
      const r = parseCommand({ body });
      return r.kind === "error" ? r.error.message : "";
    };
    expect(err("!dag run")).toMatch(/missing <id>/);
    expect(err("!dag run ../etc")).toMatch(/bad id/);
    expect(err("!dag run x day")).toMatch(/bad parameter "day": write name=value/);
    expect(err("!dag run x 1day=2")).toMatch(/bad parameter/);
    expect(err("!dag run x =2")).toMatch(/bad parameter/);
    expect(err("!dag run x a=```json\n{}\n```")).toMatch(/no code block/);
  });

  it("!dag list takes an optional DAG id", () => {
    expect(parseCommand({ body: "!dag list nightly" })).toMatchObject({
      command: { verb: "list", id: "nightly" },
    });
    expect(parseCommand({ body: "!dag list" })).toMatchObject({ command: { verb: "list", id: null } });
  });

  it("dagbot trigger's command carries each value exactly as typed, as data, or refuses it", () => {
    const made = (id: string, pairs: string[]) => parseCommandData(run.cli!.command!([id, pairs]));
    expect(
      made("nightly", ["who='quoted'", 'x="y"', "eq=a=b", "empty=", "tick=`x", "dash=-rf"]),
    ).toMatchObject({
      command: {
        verb: "run",
        params: [
          ["who", "'quoted'"],
          ["x", '"y"'],
          ["eq", "a=b"],
          ["empty", ""],
          ["tick", "`x"],
          ["dash", "-rf"],
        ],
      },
    });
    const error = (id: string, pairs: string[]): string => {
      const parsed = made(id, pairs);
      return parsed.kind === "error" ? parsed.error.message : "";
    };
    expect(error("nightly", ["who=a b"])).toMatch(/one word/);
    expect(error("nightly", ["noequals"])).toMatch(/name=value/);
    expect(error("a b", [])).toMatch(/bad id/);
    // Data is read by its own rules, never as text: no field may come from outside the declaration.
    expect(parseCommandData({ verb: "run", id: "x", params: [], extra: 1 })).toMatchObject({ kind: "error" });
  });
});
