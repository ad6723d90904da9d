/** `policy` given as data (the CLI's and HTTP's way, and the inbox's kept form) reads as its typed text does. */
import { describe, expect, it } from "vitest";
import { parseCommand, parseCommandData } from "../../src/app/commands/verbs/index.js";

const typed = (text: string) => {
  const p = parseCommand({ body: text });
  return p.kind === "command" ? p.command : p;
};

describe("policy as data", () => {
  it("takes a change as its words or as the parsed change, and a confirmation, as chat does", () => {
    expect(parseCommandData({ verb: "policy", change: { setting: "logs", value: "anyone" } })).toEqual({
      kind: "command",
      command: typed("!dag policy logs anyone"),
    });
    const allow = typed("!dag policy allow +@ops:example.org");
    expect(
      parseCommandData({ verb: "policy", change: { setting: "allow", value: "+@ops:example.org" } }),
    ).toEqual({ kind: "command", command: allow });
    // The kept form of a parsed command reads back as itself.
    expect(parseCommandData(allow)).toEqual({ kind: "command", command: allow });
    const pl = typed("!dag policy power_level 60");
    expect(parseCommandData(pl)).toEqual({ kind: "command", command: pl });
    expect(parseCommandData({ verb: "policy", change: null, confirm: "ABCDEF12" })).toEqual({
      kind: "command",
      command: { verb: "policy", change: null, confirm: "abcdef12" },
    });
    expect(parseCommandData({ verb: "policy" })).toEqual({
      kind: "command",
      command: { verb: "policy", change: null },
    });
  });

  it("refuses what the typed command refuses, and shapes it does not know", () => {
    for (const data of [
      { verb: "policy", change: { setting: "logs", value: "all" } },
      { verb: "policy", change: { setting: "two_person_rule", value: "maybe" } },
      { verb: "policy", change: { setting: "allow", value: "@no-sign:example.org" } },
      { verb: "policy", change: { setting: "logs" } },
      { verb: "policy", change: "logs anyone" },
      { verb: "policy", change: { setting: "logs", value: "anyone" }, confirm: "abcdef12" },
      { verb: "policy", confirm: "xyz" },
      { verb: "policy", extra: 1 },
    ])
      expect(parseCommandData(data).kind, JSON.stringify(data)).toBe("error");
  });
});
