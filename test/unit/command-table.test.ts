// The command table as data: every verb once, the permission split of docs/architecture.md §5, help rendered from it.
import { describe, expect, it } from "vitest";
import {
  COMMANDS,
  COMMAND_VERBS,
  GENERAL_HELP_LINE,
  helpLineFor,
  renderHelp,
  suggestVerb,
} from "../../src/app/commands/verbs/index.js";
import { parseCommand } from "../../src/app/commands/verbs/index.js";

describe("COMMANDS", () => {
  it("lists every verb once with the design's permissions", () => {
    expect(COMMANDS.map((c) => c.verb).sort()).toEqual([...COMMAND_VERBS].sort());
    const operator = COMMANDS.filter((c) => c.permission === "operator").map((c) => c.verb);
    // logs and policy are operators': task output can hold what an action printed about
    // its host, and the policy decides who may do what.
    expect(operator.sort()).toEqual([
      "cancel",
      "cap",
      "confirm",
      "logs",
      "mark",
      "policy",
      "publish",
      "reject",
      "retry",
      "run",
      "schedule",
    ]);
    const open = COMMANDS.filter((c) => c.permission === "open").map((c) => c.verb);
    // approve and deny are open: the gate's own `who` decides, in the handler.
    expect(open.sort()).toEqual([
      "approve",
      "deny",
      "graph",
      "help",
      "list",
      "nodes",
      "schedules",
      "status",
      "triggers",
    ]);
  });

  it("gives each verb a usage that starts with its own spelling", () => {
    for (const c of COMMANDS) {
      expect(c.usage.startsWith(`!dag ${c.verb}`)).toBe(true);
      expect(c.summary.length).toBeGreaterThan(0);
      expect(helpLineFor(c.verb)).toBe(`usage: ${c.usage}`);
    }
    expect(helpLineFor(null)).toBe(GENERAL_HELP_LINE);
    // Short: `!dag help` lists the verbs, grouped; an error does not append all of them.
    expect(GENERAL_HELP_LINE).toContain("!dag help");
    expect(GENERAL_HELP_LINE.length).toBeLessThan(80);
  });

  it("parses the simplest form of every usage line", () => {
    const examples: Record<string, string> = {
      "<id>": "r1",
      "[<id>]": "",
      "<task>": "t1",
      "[<task>]": "",
      "<n>": "3",
      "[<command>]": "cap",
      "<name>": "lib",
      "[<hash>]": "",
      "[verbose]": "",
      "[<name>=<value> ...]": "day=2026-01-01",
      "<run>": "r1",
      "<gate>": "g1",
      "[<reason> ...]": "",
    };
    for (const c of COMMANDS) {
      const first = c.usage.split(" | ")[0]!;
      const typed = first.replace(
        /\[<name>=<value> \.\.\.\]|\[<reason> \.\.\.\]|\[?<[a-z]+>\]?|\[[a-z]+\]|[a-z]+\|[a-z]+/g,
        // A choice of words (`succeeded|skipped`): its first.
        (m) => examples[m] ?? (m.includes("|") ? m.split("|")[0]! : m),
      );
      const r = parseCommand({ body: typed });
      expect(r.kind === "command" && r.command.verb, typed).toBe(c.verb);
    }
  });
});

describe("renderHelp", () => {
  it("renders every command, marking the operator ones", () => {
    const lines = renderHelp();
    expect(lines).toHaveLength(COMMANDS.length + 1);
    for (const c of COMMANDS) {
      const line = lines.find((l) => l.startsWith(c.usage));
      expect(line, c.verb).toBeDefined();
      expect(line!.includes(" * — ")).toBe(c.permission === "operator");
    }
  });

  it("filters by permission and explains one verb", () => {
    expect(
      renderHelp("open")
        .slice(1)
        .every((l) => !l.includes(" * — ")),
    ).toBe(true);
    expect(renderHelp("open")).toHaveLength(10);
    expect(renderHelp("operator")).toHaveLength(12);
    const cap = renderHelp("cap");
    expect(cap[0]).toBe("!dag cap <n>");
    expect(cap[1]).toContain("operators only");
    expect(cap.join("\n")).toContain("0 pauses the room");
    expect(renderHelp("publish").join("\n")).toContain("```toml");
    expect(renderHelp("status")[1]).toContain("anyone in the room");
  });
});

describe("suggestVerb", () => {
  it.each([
    ["publsh", "publish"],
    ["PUBLSH", "publish"],
    ["stauts", "status"],
    ["lsit", "list"],
    ["cnacel", "cancel"],
    ["stat", "status"],
    ["conf", "confirm"],
    ["log", "logs"],
    ["node", "nodes"],
    ["capp", "cap"],
  ])("%s → %s", (typed, verb) => {
    expect(suggestVerb(typed)).toBe(verb);
  });

  it.each(["xyz", "frobnicate", "", "re", "q".repeat(100)])("%j → nothing", (typed) => {
    expect(suggestVerb(typed)).toBe(null);
  });
});

describe("declared arguments", () => {
  it("every verb but help, publish, run, approve, deny, mark, nodes, policy and schedule declares its arguments, and its usage line is made from them", () => {
    const own = COMMANDS.filter((c) => c.args === undefined).map((c) => c.verb);
    expect(own.sort()).toEqual([
      "approve",
      "deny",
      "help",
      "mark",
      "nodes",
      "policy",
      "publish",
      "run",
      "schedule",
    ]);
    for (const c of COMMANDS) {
      if (c.args === undefined) continue;
      const shown = c.args.map((a) => (a.optional === true ? `[<${a.name}>]` : `<${a.name}>`));
      expect(c.usage).toBe(["!dag", c.verb, ...shown].join(" "));
    }
  });

  it("parses each declared argument into the command field of its name, optional ones as null", () => {
    const parsed = (body: string): unknown => {
      const r = parseCommand({ body });
      return r.kind === "command" ? r.command : r.kind === "error" ? r.error.message : r.kind;
    };
    expect(parsed("!dag logs nightly backup")).toEqual({ verb: "logs", id: "nightly", task: "backup" });
    expect(parsed("!dag confirm nightly")).toEqual({ verb: "confirm", id: "nightly", hash: null });
    expect(parsed("!dag confirm nightly ABCDEF0123")).toEqual({
      verb: "confirm",
      id: "nightly",
      hash: "abcdef0123",
    });
    expect(parsed("!dag status")).toEqual({ verb: "status", id: null, task: null });
    expect(parsed("!dag status nightly build")).toEqual({ verb: "status", id: "nightly", task: "build" });
    expect(parsed("!dag cap 7")).toEqual({ verb: "cap", n: 7 });
    expect(parsed("!dag logs")).toBe("missing <id> and <task>: !dag logs needs it");
    expect(parsed("!dag logs nightly")).toBe("missing <task>, the id of a task: !dag logs needs it");
  });
});
