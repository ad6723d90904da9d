// Properties of the command parser: it never throws, whatever arrives from the room, and every
// command it can express survives being typed with any case, spacing or reply fallback.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { Command, ParseCommandResult } from "../../src/app/commands/verbs/index.js";
import { parseCommand } from "../../src/app/commands/verbs/index.js";
import { COMMAND_VERBS } from "../../src/app/commands/verbs/index.js";
import { decodeEntities, htmlToText, quoteInput, utf8Length } from "../../src/domain/command-text.js";

function expectWellFormed(r: ParseCommandResult): void {
  expect(["command", "not-a-command", "error"]).toContain(r.kind);
  if (r.kind === "error") {
    expect(r.error.message.length).toBeGreaterThan(0);
    expect(r.error.message.length).toBeLessThan(400);
    expect(r.error.message).not.toMatch(/[\p{Cc}\p{Cf}]/u);
    expect(r.error.helpLine.startsWith("usage: !dag")).toBe(true);
  }
}

const anyText = fc.oneof(
  fc.string({ unit: "binary", maxLength: 200 }),
  fc.string({ unit: "grapheme", maxLength: 200 }),
  fc.string({ maxLength: 200 }),
);

const commandishToken = fc.constantFrom(
  "!dag",
  "!DAG",
  "!dag ",
  "publish",
  "confirm",
  "logs",
  "cap",
  "help",
  "status",
  "retry",
  " ",
  "\n",
  "\r\n",
  "\t",
  "```",
  "```json",
  "```toml",
  "````",
  "`",
  "{",
  "}",
  "[",
  '"',
  "'",
  "id",
  "r1",
  "-1",
  "99999",
  "../x",
  ".",
  "> ",
  "> <@a:b> ",
  "\u0000",
  "\u202e",
  "\ud800",
  "💥",
  "é",
  "İ",
);
const commandish = fc
  .array(fc.oneof(commandishToken, anyText), { maxLength: 30 })
  .map((parts) => parts.join(""));

const htmlToken = fc.constantFrom(
  "<",
  ">",
  "</",
  "<p>",
  "</p>",
  "<pre>",
  "</pre>",
  '<code class="language-json">',
  '<code class="language-',
  "</code>",
  "<br>",
  "<br/>",
  "<mx-reply>",
  "</mx-reply>",
  "<MX-REPLY>",
  "<!--",
  "-->",
  "&amp;",
  "&lt;",
  "&#1114112;",
  "&#xD800;",
  "&#0;",
  "&#x1F4A5;",
  "&nbsp;",
  "&bogus;",
  "&",
  "!dag",
  "!dag publish",
  "```",
  "\n",
  "İ",
);
const htmlish = fc.array(fc.oneof(htmlToken, anyText), { maxLength: 30 }).map((parts) => parts.join(""));

describe("parseCommand never throws", () => {
  it("on arbitrary strings", () => {
    fc.assert(
      fc.property(anyText, (body) => {
        expectWellFormed(parseCommand({ body }));
      }),
      { numRuns: 1000 },
    );
  });

  it("on strings made of command fragments, in the body and after !dag", () => {
    fc.assert(
      fc.property(commandish, (text) => {
        expectWellFormed(parseCommand({ body: text }));
        expectWellFormed(parseCommand({ body: `!dag ${text}` }));
        expectWellFormed(parseCommand({ body: `!dag publish ${text}` }));
      }),
      { numRuns: 1000 },
    );
  });

  it("on arbitrary HTML-ish bodies", () => {
    fc.assert(
      fc.property(
        htmlish,
        anyText,
        fc.option(fc.constantFrom("org.matrix.custom.html", "x"), { nil: null }),
        (html, body, format) => {
          expectWellFormed(parseCommand({ body, formattedBody: html, format }));
          expectWellFormed(parseCommand({ body: "", formattedBody: `<p>!dag publish</p>${html}` }));
          expect(typeof htmlToText(html)).toBe("string");
        },
      ),
      { numRuns: 1000 },
    );
  });

  it("on huge and pathological inputs", () => {
    const mb = 1024 * 1024;
    const inputs = [
      { body: "x".repeat(mb) },
      { body: "!dag " + "`".repeat(mb) },
      { body: "!dag publish\n```\n" + "a```".repeat(16_000) },
      { body: "!dag publish\n```json\n" + "\n".repeat(60_000) },
      { body: ">".repeat(mb) },
      { body: "> a\n".repeat(mb / 4) + "!dag status" },
      { body: "", formattedBody: "<".repeat(mb) },
      { body: "", formattedBody: "<p".repeat(mb / 2) },
      { body: "", formattedBody: "<mx-reply>".repeat(mb / 10) },
      { body: "", formattedBody: "<pre>".repeat(mb / 5) + "!dag" },
      { body: "", formattedBody: "&#".repeat(mb / 2) },
      { body: "", formattedBody: "!dag publish <pre>" + "&lt;".repeat(mb / 4) },
      { body: "!dag " + "\ud800".repeat(mb) },
      { body: "", formattedBody: "<!--".repeat(mb / 4) },
      { body: "", formattedBody: "!dag publish<pre>" + '<code class="language-'.repeat(mb / 20) },
      { body: "!dag publish\n" + "```\n".repeat(16_000) },
      { body: "!dag publish " + "a ".repeat(30_000) },
      { body: "!dag " + "é".repeat(mb) },
      { body: undefined as unknown as string, formattedBody: 42 as unknown as string },
    ];
    for (const input of inputs) expectWellFormed(parseCommand(input));
    expect(parseCommand({ body: "> a\n".repeat(1000) + "!dag status" })).toEqual({
      kind: "command",
      command: { verb: "status", id: null, task: null },
    });
  });
});

describe("helpers never throw", () => {
  it("decodes any entity text, measures any string, quotes any input", () => {
    fc.assert(
      fc.property(fc.oneof(htmlish, anyText), (s) => {
        expect(typeof decodeEntities(s)).toBe("string");
        expect(utf8Length(s)).toBe(new TextEncoder().encode(s).length);
        const q = quoteInput(s);
        expect(Array.from(q).length).toBeLessThanOrEqual(43);
        expect(q).not.toMatch(/[\p{Cc}\p{Cf}]/u);
      }),
      { numRuns: 1000 },
    );
  });
});

// ---- round trip: every expressible command, typed with noise, parses back to itself ----

const idChar = fc.constantFrom(..."abcXYZ019_.-");
const id = fc.string({ unit: idChar, minLength: 1, maxLength: 64 });
const libraryName = fc
  .tuple(fc.constantFrom(..."aZ9_"), fc.string({ unit: idChar, maxLength: 63 }))
  .map(([a, b]) => a + b);

const commandArb: fc.Arbitrary<Command> = fc.oneof(
  fc
    .option(fc.constantFrom(...COMMAND_VERBS), { nil: null })
    .map((topic) => ({ verb: "help" as const, topic })),
  libraryName.map((name) => ({ verb: "publish" as const, source: { kind: "library" as const, name } })),
  fc
    .tuple(fc.constantFrom("json" as const, "toml" as const), fc.string({ maxLength: 80 }))
    .filter(([, text]) => text.trim() !== "" && !text.includes("`") && !text.includes("\r"))
    .map(([format, text]) => ({
      verb: "publish" as const,
      source: { kind: "inline" as const, format, text },
    })),
  fc
    .tuple(fc.constantFrom("reject" as const, "cancel" as const, "retry" as const), id)
    .map(([verb, i]) => ({ verb, id: i })),
  fc
    .tuple(id, fc.option(fc.stringMatching(/^[0-9a-f]{8,64}$/), { nil: null }))
    .map(([i, hash]) => ({ verb: "confirm" as const, id: i, hash })),
  fc
    .option(fc.tuple(id, fc.option(id, { nil: null })), { nil: null })
    .map((it) => ({ verb: "status" as const, id: it?.[0] ?? null, task: it?.[1] ?? null })),
  fc.option(id, { nil: null }).map((i) => ({ verb: "list" as const, id: i })),
  fc
    .tuple(
      id,
      fc.uniqueArray(
        fc.tuple(
          fc.stringMatching(/^[a-z_][a-z0-9_]{0,10}$/),
          fc.stringMatching(/^[A-Za-z0-9=.:$();-]{0,12}$/),
        ),
        { maxLength: 4, selector: ([n]) => n },
      ),
    )
    .map(([i, params]) => ({ verb: "run" as const, id: i, params })),
  fc.constantFrom({ verb: "nodes" as const, verbose: false }, { verb: "nodes" as const, verbose: true }),
  fc.tuple(id, id).map(([i, task]) => ({ verb: "logs" as const, id: i, task })),
  fc.integer({ min: 0, max: 10_000 }).map((n) => ({ verb: "cap" as const, n })),
);

const space = fc
  .array(fc.constantFrom(" ", "\t", "\n", "  "), { minLength: 1, maxLength: 3 })
  .map((s) => s.join(""));
const randomCase = (word: string, flips: number): string =>
  Array.from(word, (ch, i) => ((flips >> (i % 30)) & 1 ? ch.toUpperCase() : ch)).join("");

function render(c: Command, sep: string, flips: number): string {
  const head = `${randomCase("!dag", flips)}${sep}${randomCase(c.verb, flips >> 4)}`;
  switch (c.verb) {
    case "help":
      return c.topic === null ? head : `${head}${sep}${randomCase(c.topic, flips >> 9)}`;
    case "publish":
      return c.source.kind === "library"
        ? `${head}${sep}${c.source.name}`
        : `${head}\n\`\`\`${c.source.format}\n${c.source.text}\n\`\`\``;
    case "status":
      return [
        head,
        ...(c.id === null ? [] : [c.id]),
        ...(c.task === null || c.task === undefined ? [] : [c.task]),
      ].join(sep);
    case "logs":
      return `${head}${sep}${c.id}${sep}${c.task}`;
    case "cap":
      return `${head}${sep}${c.n}`;
    case "confirm":
      return c.hash === null ? `${head}${sep}${c.id}` : `${head}${sep}${c.id}${sep}${c.hash}`;
    case "list":
      return c.id === null || c.id === undefined ? head : `${head}${sep}${c.id}`;
    case "run":
      return [head, c.id, ...c.params.map(([n, v]) => `${n}=\`${v}\``)].join(sep);
    case "nodes":
      return c.verbose ? `${head}${sep}${randomCase("verbose", flips >> 11)}` : head;
    case "policy":
    case "schedules":
    case "triggers":
      return head;
    default:
      return `${head}${sep}${c.id}`;
  }
}

describe("round trip", () => {
  it("parses every rendered command back to itself, with a reply fallback or without", () => {
    fc.assert(
      fc.property(commandArb, space, fc.nat(), fc.boolean(), (c, sep, flips, reply) => {
        const text = render(c, sep, flips);
        const body = reply ? `> <@bob:example.org> earlier\n> words\n\n${text}` : `${sep}${text}${sep}`;
        expect(parseCommand({ body })).toEqual({ kind: "command", command: c });
      }),
      { numRuns: 1000 },
    );
  });
});
