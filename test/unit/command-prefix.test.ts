// isCommandText is how Matrix intake tells a command from chatter without the verb list: it must
// agree with the full parser's "not-a-command" on every input, or intake would drop commands (or
// store chatter the leader then answers).
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseCommand } from "../../src/app/commands/verbs/index.js";
import { isCommandText } from "../../src/domain/command-grammar.js";

const piece = fc.oneof(
  fc.constantFrom("!dag", "!DAG", "!dagx", " !dag", "> quoted\n\n", "<p>", "</p>", "<mx-reply>x</mx-reply>"),
  fc.constantFrom(" ", "\n", "\t", "status", "publish", "```json\n{}\n```", "&nbsp;", "!"),
  fc.string({ maxLength: 12 }),
);
const text = fc.array(piece, { maxLength: 8 }).map((parts) => parts.join(""));

describe("isCommandText", () => {
  it("agrees with parseCommand on plain and formatted bodies", () => {
    fc.assert(
      fc.property(
        text,
        fc.option(text, { nil: undefined }),
        fc.option(fc.constantFrom("org.matrix.custom.html", "other"), { nil: undefined }),
        (body, formattedBody, format) => {
          const input = { body, formattedBody, format };
          expect(isCommandText(input)).toBe(parseCommand(input).kind !== "not-a-command");
        },
      ),
      { numRuns: 2000 },
    );
  });

  it("sees a command only in the HTML body, and none in a reply's fallback", () => {
    const html = { body: "hello", formattedBody: "<p>!dag status</p>", format: "org.matrix.custom.html" };
    expect(isCommandText(html)).toBe(true);
    expect(isCommandText({ body: "> <@a:b> !dag status\n\nthanks" })).toBe(false);
    expect(isCommandText({ body: "!dagger" })).toBe(false);
  });
});
