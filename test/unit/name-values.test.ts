/** The one name=value grammar of run parameters and gate forms (src/domain/name-values.ts). */
import { describe, expect, it } from "vitest";
import type { PairWords } from "../../src/domain/name-values.js";
import { gateCommandFromData } from "../../src/app/commands/gate-decisions.js";
import { cliPair, MAX_PAIRS, pairsFromData, pairsFromWords } from "../../src/domain/name-values.js";

const W: PairWords = {
  verb: "approve",
  word: "value",
  plural: "values",
  nameOf: "a field of the gate's form",
  valueOf: "a form value",
  each: "field",
};

const refusal = (p: ReturnType<typeof pairsFromWords>): string =>
  p.kind === "error" ? p.error.message : `accepted ${JSON.stringify(p.command)}`;

describe("name=value", () => {
  it("typed: the value is everything after the first =, quotes around a word or a value dropped", () => {
    expect(pairsFromWords(["ticket=OPS-7", "`note=a=b`", 'v="2.7.0"', "empty="], W)).toEqual({
      kind: "command",
      command: [
        ["ticket", "OPS-7"],
        ["note", "a=b"],
        ["v", "2.7.0"],
        ["empty", ""],
      ],
    });
  });

  it("a word without = is refused at once, typed or given by the CLI, naming the word", () => {
    expect(refusal(pairsFromWords(["ticket"], W))).toBe(
      `bad value "ticket": write name=value, the name a field of the gate's form (letters, digits, _)`,
    );
    // The CLI's `dagbot approve r g ticket` used to queue a NUL value that only the leader refused.
    const approve = gateCommandFromData("approve", {
      verb: "approve",
      id: "rel",
      gate: "ok",
      values: [cliPair("ticket")],
    });
    expect(approve.kind === "error" ? approve.error.message : "accepted").toMatch(/^bad value "ticket"/);
    expect(refusal(pairsFromData([cliPair("ticket")], "values", W))).toBe(
      `bad value "ticket": write name=value, the name a field of the gate's form (letters, digits, _)`,
    );
  });

  it("typed and data forms refuse the same things with the same words", () => {
    const cases: Array<[string, string]> = [
      ["9lives", "x"],
      ["ticket", "two words"],
      ["ticket", "line\nbreak"],
    ];
    for (const [name, value] of cases) {
      const typed = refusal(pairsFromWords([`${name}=${value}`], W));
      const data = refusal(pairsFromData([[name, value]], "values", W));
      expect(typed, `${name}=${value}`).toMatch(/^bad /);
      expect(data.replace(/"[^"]*"/, "")).toBe(typed.replace(/"[^"]*"/, ""));
    }
    expect(
      refusal(
        pairsFromData(
          [
            ["a", "1"],
            ["a", "2"],
          ],
          "values",
          W,
        ),
      ),
    ).toBe("a is given twice: give each field once");
    expect(refusal(pairsFromWords(["a=1", "a=2"], W))).toBe("a is given twice: give each field once");
  });

  it("bounds the count, and data must be a list of [name, value] pairs of strings", () => {
    const many = Array.from({ length: MAX_PAIRS + 1 }, (_, i) => `f${i}=x`);
    expect(refusal(pairsFromWords(many, W))).toBe(`${MAX_PAIRS + 1} values given; at most ${MAX_PAIRS}`);
    expect(refusal(pairsFromData("ticket=x", "values", W))).toBe("values is a list of [name, value] pairs");
    expect(refusal(pairsFromData([["ticket", 7]], "values", W))).toBe(
      "values is a list of [name, value] pairs of strings",
    );
    expect(pairsFromData(undefined, "values", W)).toEqual({ kind: "command", command: [] });
  });
});
