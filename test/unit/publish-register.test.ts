// Publishing without running, in every face's form: chat's `--register`, a command given as data
// (the CLI's `submit --register`), and the HTTP body's `register: true` all make the same command.
import { describe, expect, it } from "vitest";
import * as shapes from "../../src/app/commands/http-shapes.js";
import { httpRoutesOf } from "../../src/app/commands/verb.js";
import { publish } from "../../src/app/commands/verbs/publish.js";
import { COMMANDS } from "../../src/app/commands/verbs/index.js";
import { finalWords } from "../../src/app/render/messages.js";
import { grammarOf } from "../../src/domain/command-grammar.js";
import type { RunRecord } from "../../src/ports/store.js";

const grammar = grammarOf(COMMANDS);
const toml = 'id = "tick"\nschedule = "0 * * * *"\n[[tasks]]\nid = "a"\naction = "echo"';

describe("publish --register", () => {
  it("chat: `--register` before a library name or a block registers; without it, publish runs as before", () => {
    expect(grammar.parseCommand({ body: "!dag publish --register release" })).toEqual({
      kind: "command",
      command: { verb: "publish", source: { kind: "library", name: "release" }, register: true },
    });
    const block = grammar.parseCommand({ body: `!dag publish --register\n\`\`\`toml\n${toml}\n\`\`\`` });
    expect(block).toMatchObject({ kind: "command", command: { register: true, source: { kind: "inline" } } });
    expect(grammar.parseCommand({ body: "!dag publish release" })).toEqual({
      kind: "command",
      command: { verb: "publish", source: { kind: "library", name: "release" } },
    });
    // Not a flag of its own: a library name that merely starts so is refused as a name.
    expect(grammar.parseCommand({ body: "!dag publish --registered" })).toMatchObject({ kind: "error" });
  });

  it("as data (the CLI): `register: true` is kept, anything but a boolean is refused", () => {
    const source = { kind: "inline", format: "toml", text: toml };
    expect(grammar.parseData({ verb: "publish", source, register: true })).toEqual({
      kind: "command",
      command: { verb: "publish", source, register: true },
    });
    expect(grammar.parseData({ verb: "publish", source, register: "yes" })).toMatchObject({ kind: "error" });
  });

  it("HTTP: the body's `register` becomes the command's", () => {
    const body = shapes.publishBody.parse({ text: toml, format: "toml", register: true });
    const route = httpRoutesOf(publish, shapes)[0]!;
    expect(route.command({ body, query: {}, params: {} } as never)).toEqual({
      verb: "publish",
      source: { kind: "inline", format: "toml", text: toml },
      register: true,
    });
    expect(shapes.publishBody.safeParse({ library: "x", register: "yes" }).success).toBe(false);
  });
});

describe("a registering run in chat", () => {
  it("ends with words that say nothing ran, not `succeeded — 0/0`", () => {
    const run = {
      runId: "r1",
      roomId: "!r:x",
      dagId: "tick",
      status: "succeeded",
      dag: { id: "tick", tasks: [{ id: "a" }], registered: true },
    } as unknown as RunRecord;
    const said = finalWords(run, []).body;
    expect(said).toBe(
      "✅ `tick` registered without running: its schedule, after and webhooks start its runs.",
    );
    expect(said).not.toContain("0/0");
  });
});
