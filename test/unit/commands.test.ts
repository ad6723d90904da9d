// The `!dag` grammar: good commands in their many spellings, chat that is not a command, and the
// malformed corpus of test/fixtures/commands, each answered with a typed error and its help line.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import type { Command, CommandErrorCode, CommandInput } from "../../src/domain/commands.js";
import { MAX_COMMAND_BYTES, parseCommand } from "../../src/domain/commands.js";

interface MalformedCase {
  name: string;
  body: string;
  formattedBody?: string;
  format?: string;
  code: CommandErrorCode;
  messageIncludes: string;
  helpLine: string;
}
const malformed = JSON.parse(
  readFileSync(new URL("../fixtures/commands/malformed.json", import.meta.url), "utf8"),
) as MalformedCase[];

const cmd = (body: string): Command | string => {
  const r = parseCommand({ body });
  return r.kind === "command"
    ? r.command
    : r.kind === "error"
      ? `${r.error.code}: ${r.error.message}`
      : r.kind;
};
const json = (text: string) => ({ verb: "publish", source: { kind: "inline", format: "json", text } });
const toml = (text: string) => ({ verb: "publish", source: { kind: "inline", format: "toml", text } });

describe("good commands", () => {
  const table: ReadonlyArray<readonly [string, unknown]> = [
    ["!dag", { verb: "help", topic: null }],
    ["   !DAG   ", { verb: "help", topic: null }],
    ["!dag help", { verb: "help", topic: null }],
    ["!dag HELP Publish", { verb: "help", topic: "publish" }],
    ["!dag help `cap`", { verb: "help", topic: "cap" }],
    ["!dag publish backup_daily", { verb: "publish", source: { kind: "library", name: "backup_daily" } }],
    ["!dag publish `backup.daily`", { verb: "publish", source: { kind: "library", name: "backup.daily" } }],
    ["!Dag   Confirm\tbackup_daily  ", { verb: "confirm", id: "backup_daily" }],
    ['!dag confirm "nightly-1"', { verb: "confirm", id: "nightly-1" }],
    ["!dag reject x", { verb: "reject", id: "x" }],
    ["!dag cancel A.b-c_9", { verb: "cancel", id: "A.b-c_9" }],
    ["!dag status", { verb: "status", id: null }],
    ["!dag status r1", { verb: "status", id: "r1" }],
    ["\n\n!dag\n\nstatus\n\n r1 \n", { verb: "status", id: "r1" }],
    ["!dag list", { verb: "list" }],
    ["!dag LOGS r1 dump", { verb: "logs", id: "r1", task: "dump" }],
    ["!dag retry r1", { verb: "retry", id: "r1" }],
    ["!dag nodes", { verb: "nodes" }],
    ["!dag cap 0", { verb: "cap", n: 0 }],
    ["!dag cap 007", { verb: "cap", n: 7 }],
    ["!dag cap 10000", { verb: "cap", n: 10000 }],
    [`!dag confirm ${"x".repeat(64)}`, { verb: "confirm", id: "x".repeat(64) }],
    ["> <@alice:example.org> !dag publish x\n> more\n\n!dag confirm x", { verb: "confirm", id: "x" }],
    ['!dag publish\n```json\n{"id": "a"}\n```', json('{"id": "a"}')],
    ['!dag publish\n```toml\nid = "a"\n[[tasks]]\nid = "t"\n```\n', toml('id = "a"\n[[tasks]]\nid = "t"')],
    ['!dag publish\n```\n  {"id": "a"}\n```', json('  {"id": "a"}')],
    ['!dag publish\n```\nid = "a"\n```', toml('id = "a"')],
    ['!dag publish ```json\n{"id": "a"}\n```', json('{"id": "a"}')],
    ["!dag publish```toml\nid = 1\n```", toml("id = 1")],
    ["!dag publish\n```JSON\n{}\n```", json("{}")],
    ["!dag publish\n```json title=x\n{}\n```", json("{}")],
    ["!dag publish\r\n```json\r\n{}\r\n```\r\n", json("{}")],
    ['!dag publish ```{"id": "a"}```', json('{"id": "a"}')],
    ['!dag publish ```toml id = "a"```', toml('id = "a"')],
    ['!dag publish\n```json\n{"id": "a"}```', json('{"id": "a"}')],
    ['!dag publish {"id": "a", "tasks": []}', json('{"id": "a", "tasks": []}')],
    ['!dag publish\n````toml\ndescription = "```"\n````', toml('description = "```"')],
    ["!dag publish\n```toml\nid = 1\n  ```  ", toml("id = 1")],
  ];
  it.each(table)("%j", (body, expected) => {
    expect(cmd(body)).toEqual(expected);
  });

  const html: ReadonlyArray<readonly [string, CommandInput, unknown]> = [
    [
      "an HTML-only publish with a language class and entities",
      {
        body: "",
        formattedBody:
          '<p>!dag publish</p>\n<pre><code class="language-json">{&quot;id&quot;: &quot;a&lt;b &amp; c&#39;s&quot;}\n</code></pre>\n',
        format: "org.matrix.custom.html",
      },
      json('{"id": "a<b & c\'s"}\n'),
    ],
    [
      "a body without the block, the block only in HTML",
      {
        body: "!dag publish",
        formattedBody: '<p>!dag publish</p><pre><code class="language-toml">id = "a"\n</code></pre>',
        format: "org.matrix.custom.html",
      },
      toml('id = "a"\n'),
    ],
    [
      "a pre without code, sniffed as TOML",
      { body: "[code]", formattedBody: "!dag publish<pre>id = 'x'</pre>" },
      toml("id = 'x'"),
    ],
    [
      "a reply: mx-reply and the body fallback both stripped",
      {
        body: "> <@a:example.org> !dag cancel other\n\n!dag status r1",
        formattedBody:
          '<mx-reply><blockquote><a href="x">In reply to</a> !dag cancel other</blockquote></mx-reply>!dag status r1',
        format: "org.matrix.custom.html",
      },
      { verb: "status", id: "r1" },
    ],
    [
      "an HTML-only reply",
      {
        body: "",
        formattedBody: "<MX-REPLY><blockquote>!dag cancel x</blockquote></MX-REPLY><p>!dag nodes</p>",
      },
      { verb: "nodes" },
    ],
    [
      "line breaks as <br>",
      { body: "", formattedBody: "!dag<br>status<br/>r1" },
      { verb: "status", id: "r1" },
    ],
    [
      "numeric entities",
      { body: "", formattedBody: "!dag confirm &#x61;b&#99;" },
      { verb: "confirm", id: "abc" },
    ],
    [
      "inline code around an id",
      { body: "", formattedBody: "<p>!dag logs <code>r1</code> <code>dump</code></p>" },
      { verb: "logs", id: "r1", task: "dump" },
    ],
  ];
  it.each(html)("%s", (_name, input, expected) => {
    const r = parseCommand(input);
    expect(r).toEqual({ kind: "command", command: expected });
  });
});

describe("not a command", () => {
  const chatter: ReadonlyArray<CommandInput> = [
    { body: "" },
    { body: "   \n  " },
    { body: "hello everyone" },
    { body: "!dagfoo" },
    { body: "!dag-status" },
    { body: "!dag:help" },
    { body: "dag status" },
    { body: "!da status" },
    { body: "please run !dag status" },
    { body: "> !dag cancel x" },
    { body: "> <@a:example.org> !dag cancel x\n\nthanks, that worked" },
    { body: "hello", formattedBody: "<p>hello <b>there</b></p>", format: "org.matrix.custom.html" },
    { body: "hello", formattedBody: "!dag cancel x", format: "text/markdown" },
    { body: "x".repeat(200_000) },
    { body: "", formattedBody: "<p>" + "hello ".repeat(50_000) + "</p>" },
  ];
  it.each(chatter)("%#: ignored", (input) => {
    expect(parseCommand(input)).toEqual({ kind: "not-a-command" });
  });
});

describe("malformed commands", () => {
  it("has a corpus of at least 20 cases with distinct names", () => {
    expect(malformed.length).toBeGreaterThanOrEqual(20);
    expect(new Set(malformed.map((c) => c.name)).size).toBe(malformed.length);
  });

  it.each(malformed.map((c) => [c.name, c] as const))("%s", (_name, c) => {
    const r = parseCommand({
      body: c.body,
      formattedBody: c.formattedBody ?? null,
      format: c.format ?? null,
    });
    expect(r.kind).toBe("error");
    if (r.kind !== "error") return;
    expect(r.error.code).toBe(c.code);
    expect(r.error.message).toContain(c.messageIncludes);
    expect(r.error.helpLine).toBe(c.helpLine);
    expect(r.error.message).not.toMatch(/[\p{Cc}\p{Cf}]/u);
  });

  it("refuses a message over 64 KiB, counted in UTF-8 bytes", () => {
    const big = "!dag publish\n```json\n" + "a".repeat(MAX_COMMAND_BYTES) + "\n```";
    const r = parseCommand({ body: big });
    expect(r.kind === "error" && r.error.code).toBe("too-large");
    expect(r.kind === "error" && r.error.message).toContain("at most 65536 bytes");
    // 22,000 three-byte characters: under the limit in characters, over it in bytes.
    const wide = parseCommand({ body: "!dag publish ```toml\n" + "€".repeat(22_000) + "\n```" });
    expect(wide.kind === "error" && wide.error.code).toBe("too-large");
    const fits = parseCommand({ body: "!dag publish ```toml\n" + "€".repeat(21_000) + "\n```" });
    expect(fits.kind).toBe("command");
  });

  it("quotes at most 40 characters of what was typed", () => {
    const r = parseCommand({ body: `!dag ${"q".repeat(5000)}` });
    expect(r.kind === "error" && r.error.message).toBe(`unknown command "${"q".repeat(40)}…"`);
  });

  it("keeps the recognised verb on the error, for the permission check", () => {
    const r = parseCommand({ body: "!dag cancel a/b" });
    expect(r.kind === "error" && r.error.verb).toBe("cancel");
    const u = parseCommand({ body: "!dag zap" });
    expect(u.kind === "error" && u.error.verb).toBe(null);
  });
});
