/**
 * `!dag publish <name> | !dag publish + a code block`: validate a DAG (inline or from the node's
 * library folder), check its actions against what live nodes offer, and create its first run.
 */
import type { z } from "zod";
import {
  ID_RULE,
  LIBRARY_NAME_PATTERN,
  MAX_COMMAND_BYTES,
  arity,
  fail,
  ok,
  splitArgs,
  unquote,
} from "../../../domain/command-grammar.js";
import type { Parsed } from "../../../domain/command-grammar.js";
import { quoteInput, readFence, utf8Length } from "../../../domain/command-text.js";
import { afterCycle, afterMappingProblems } from "../../../domain/after.js";
import type { DagIssue } from "../../../domain/dag.js";
import { parseDag } from "../../../domain/dag.js";
import type { ParsedDag } from "../../../domain/model.js";
import { appliedDag, resolveParams } from "../../../domain/params.js";
import { isTerminalRun } from "../../../domain/run-states.js";
import { paragraphs, usage } from "../../render/blocks.js";
import { r } from "../../render/html.js";
import type { HandlerContext } from "../context.js";
import type { Outcome } from "../outcome.js";
import {
  CREATION_RENDERERS,
  createAndDescribe,
  invalidDag,
  startRun,
  unknownActions,
} from "../run-creation.js";
import type { publishBody } from "../http-shapes.js";
import { defineVerb } from "../verb.js";
import { codeIn, markIn } from "../face.js";

export type PublishSource =
  { kind: "inline"; format: "json" | "toml"; text: string } | { kind: "library"; name: string };

export interface PublishCommand {
  verb: "publish";
  source: PublishSource;
  /**
   * Register the definition without starting a run now (its published run holds no task; README,
   * "Publishing without running"). Absent: publishing runs it once, as it always did.
   */
  register?: boolean;
}

export const publish = defineVerb<
  PublishCommand,
  "published" | "exists" | "conflict" | "invalid-dag" | "library-error"
>({
  verb: "publish",
  usage: "!dag publish <name> | !dag publish + a ```json or ```toml code block",
  summary: "publish a DAG from the library folder or inline; it waits for confirm",
  group: "run",
  permission: "operator",
  details: [
    "The code block goes after the command, in the same message:",
    "!dag publish",
    "```toml",
    'id = "hello"',
    "[[tasks]]",
    'id = "greet"',
    'action = "echo"',
    "```",
    "A block without a language is read as JSON when it starts with { and as TOML otherwise.",
    "<name> is a DAG file of the node's library folder (letters, digits, _ . -).",
    "Publishing runs the DAG once. With `!dag publish --register <name>` (or the block after `--register`) it only registers it: confirmed like any publish, no task runs now; its schedule, `after` and webhooks start its runs, and `!dag run` too.",
  ],
  takesCodeBlock: true,
  parse: (_args, after) => parsePublish(after),
  fromData: (data) => publishFromData(data),
  same: sameCommand,
  handle: (ctx, c) => handlePublish(ctx, c.source, c.register === true),
  writes: true,
  http: (s) => ({
    method: "POST",
    path: "/v1/dags",
    summary: "Publish a DAG (a run that waits for confirmation unless the publisher is on auto_confirm)",
    body: s.publishBody,
    response: s.publishedSchema,
    command: ({ body }) => ({
      verb: "publish",
      source: publishSourceOf(body as PublishBody),
      ...((body as PublishBody).register === true ? { register: true } : {}),
    }),
    answer: (o) =>
      o.kind === "published" || o.kind === "exists"
        ? {
            result: o.kind,
            run: o.run,
            needsConfirmation: o.kind === "published" ? o.needsConfirmation : o.run.status === "pending",
          }
        : null,
  }),
  render: {
    ...CREATION_RENDERERS,
    "library-error": (o, say) => {
      const said = r`${markIn(say, "⚠️")}Cannot publish ${codeIn(say, o.name)} from the DAG library: ${o.message}`;
      // The usage line is chat's grammar: the other faces name the library in their own options.
      return say.chat === true
        ? paragraphs([
            said,
            usage(
              "!dag publish <name>  (a DAG file from the node's library folder), or a ```json / ```toml block",
            ),
          ])
        : said;
    },
  },
});

type PublishBody = z.output<typeof publishBody>;

/** A document travels as JSON text: the leader parses it as data, as a code block's text. */
function publishSourceOf(body: PublishBody): PublishSource {
  if ("library" in body) return { kind: "library", name: body.library };
  if ("document" in body) return { kind: "inline", format: "json", text: JSON.stringify(body.document) };
  return { kind: "inline", format: body.format, text: body.text };
}

/** `{ verb: "publish", source: { kind: "inline", format, text } | { kind: "library", name }, register? }`. */
function publishFromData(data: Readonly<Record<string, unknown>>): Parsed<PublishCommand> {
  const extra = Object.keys(data).find((k) => k !== "verb" && k !== "source" && k !== "register");
  if (extra !== undefined)
    return fail(
      "extra-argument",
      "publish",
      `unexpected field ${quoteInput(extra)}: publish takes source and register`,
    );
  const register = data["register"];
  if (register !== undefined && typeof register !== "boolean")
    return fail("extra-argument", "publish", "register is true or false");
  const parsed = publishSourceFromData(data);
  return parsed.kind === "command" && register === true ? ok({ ...parsed.command, register: true }) : parsed;
}

function publishSourceFromData(data: Readonly<Record<string, unknown>>): Parsed<PublishCommand> {
  const source = data["source"];
  const s = typeof source === "object" && source !== null ? (source as Record<string, unknown>) : {};
  if (s["kind"] === "library") {
    const name = s["name"];
    if (typeof name !== "string" || !LIBRARY_NAME_PATTERN.test(name))
      return fail("bad-name", "publish", `bad library name: ${ID_RULE}, not starting with . or -`);
    return ok({ verb: "publish", source: { kind: "library", name } });
  }
  const { format, text } = s;
  if (s["kind"] !== "inline" || (format !== "json" && format !== "toml") || typeof text !== "string")
    return fail(
      "missing-source",
      "publish",
      "publish needs a source: a library name, or a json or toml text",
    );
  if (text.trim() === "") return fail("empty-code-block", "publish", "the DAG document is empty");
  if (utf8Length(text) > MAX_COMMAND_BYTES)
    return fail("too-large", "publish", `the DAG document is larger than ${MAX_COMMAND_BYTES} bytes`);
  return ok({ verb: "publish", source: { kind: "inline", format, text } });
}

/** `--register` before the name or the block: publish without running (PublishCommand.register). */
const REGISTER_FLAG = /^\s*--register(?=\s|$)/;

function parsePublish(text: string): Parsed<PublishCommand> {
  const flag = REGISTER_FLAG.exec(text);
  const parsed = parsePublishSource(flag === null ? text : text.slice(flag[0].length));
  return flag !== null && parsed.kind === "command" ? ok({ ...parsed.command, register: true }) : parsed;
}

function parsePublishSource(after: string): Parsed<PublishCommand> {
  const fenceAt = after.indexOf("```");
  if (fenceAt < 0) {
    const trimmed = after.trim();
    if (trimmed === "") {
      return fail(
        "missing-source",
        "publish",
        "publish needs a DAG: a library name or a ```json / ```toml code block",
      );
    }
    if (trimmed.startsWith("{"))
      return ok({ verb: "publish", source: { kind: "inline", format: "json", text: trimmed } });
    const args = splitArgs(trimmed);
    const arityError = arity("publish", args, 1, 1, "<name>");
    if (arityError !== null) return arityError;
    const raw = args[0] ?? "";
    const name = unquote(raw);
    if (!LIBRARY_NAME_PATTERN.test(name)) {
      return fail(
        "bad-name",
        "publish",
        `bad library name ${quoteInput(raw)}: ${ID_RULE}, not starting with . or -`,
      );
    }
    return ok({ verb: "publish", source: { kind: "library", name } });
  }
  const before = after.slice(0, fenceAt).trim();
  if (before !== "") {
    const message = LIBRARY_NAME_PATTERN.test(unquote(before))
      ? `give a library name or a code block, not both (${quoteInput(before)} and a block)`
      : `unexpected text ${quoteInput(before)} before the code block`;
    return fail("text-outside-code-block", "publish", message);
  }
  const fence = readFence(after, fenceAt);
  if ("unclosed" in fence)
    return fail("unclosed-code-block", "publish", `the code block is not closed: ${fence.unclosed}`);
  const rest = fence.rest.trim();
  if (rest !== "") {
    return fail(
      "text-outside-code-block",
      "publish",
      `unexpected text ${quoteInput(rest)} after the code block: send one block per publish`,
    );
  }
  const lang = (splitArgs(fence.info)[0] ?? "").toLowerCase();
  if (lang !== "" && lang !== "json" && lang !== "toml") {
    return fail(
      "unsupported-format",
      "publish",
      `unsupported code block language ${quoteInput(lang)}: use json or toml`,
    );
  }
  const head = fence.content.trimStart();
  if (head === "")
    return fail("empty-code-block", "publish", "the code block is empty: put the DAG document in it");
  const format =
    lang === "json" || lang === "toml"
      ? lang
      : head.startsWith("{") || head.startsWith("[")
        ? "json"
        : "toml";
  return ok({ verb: "publish", source: { kind: "inline", format, text: fence.content } });
}

/** Equal commands, with an inline DAG's text compared line by line without trailing spaces. */
function sameCommand(a: PublishCommand, b: PublishCommand): boolean {
  if ((a.register === true) !== (b.register === true)) return false;
  const [x, y] = [a.source, b.source];
  if (x.kind === "inline" && y.kind === "inline")
    return x.format === y.format && normalizeBlock(x.text) === normalizeBlock(y.text);
  return JSON.stringify(a) === JSON.stringify(b);
}

function normalizeBlock(text: string): string {
  return text
    .replace(/\r\n?/g, "\n")
    .split("\n")
    .map((line) => line.trimEnd())
    .join("\n")
    .trim();
}

async function handlePublish(
  ctx: HandlerContext,
  source: PublishSource,
  register: boolean,
): Promise<Outcome> {
  let text: string;
  let format: "json" | "toml";
  let where: string;
  if (source.kind === "library") {
    const loaded = await ctx.loadDag(source.name);
    if (!loaded.ok) return { kind: "library-error", name: source.name, message: loaded.message };
    ({ text, format } = loaded);
    where = `from the library file "${source.name}" (${format})`;
  } else {
    ({ text, format } = source);
    where = `in the message (${format})`;
  }
  const parsed = parseDag(text, format);
  if (!parsed.ok) return invalidDag(where, parsed.issues);
  if (source.kind === "library" && !register) {
    // A library DAG is a definition: published again unchanged once its run ended, it runs again.
    const existing = await ctx.store.getDefinition(ctx.roomId, parsed.dag.id);
    if (
      existing !== null &&
      existing.hash === parsed.hash &&
      existing.origin !== null &&
      isTerminalRun(existing.origin.status)
    )
      return startRun(ctx, existing, [], `usage: ${publish.usage}`);
  }
  const afterIssues = await afterProblems(ctx, parsed.dag);
  if (afterIssues.length > 0) return invalidDag(where, afterIssues);
  if (register) {
    // Nothing runs now, so no parameter needs a value yet: each run's values are checked when it
    // is started (startRun, a slot, a firing). Its actions are checked with those values then.
    return createAndDescribe(ctx, { ...parsed.dag, registered: true }, parsed.hash, null, []);
  }
  let dag = parsed.dag;
  if (dag.params !== undefined) {
    // Publishing starts the definition's first run, with every parameter at its default.
    const resolved = resolveParams(dag, []);
    if (!resolved.ok) {
      const why =
        resolved.missing === true
          ? ". Publishing starts a run at once, so every parameter of a published DAG needs a default; `!dag run` then gives other values"
          : "";
      return {
        kind: "command-error",
        message: `${resolved.message}${why}`,
        helpLine: "usage: !dag publish <name> | !dag publish + a code block",
      };
    }
    dag = { ...dag, values: resolved.values };
  }
  const unknown = await unknownActions(ctx, appliedDag(dag));
  if (unknown.length > 0) return invalidDag(where, unknown);
  return createAndDescribe(ctx, dag, parsed.hash, null, []);
}

/**
 * What the room's published definitions tell of an `after` declaration: a cycle of
 * `after` links it would close is refused (so no chain loops), and a mapping to a parameter or task
 * the upstream definition does not have, when it is published; one published later is checked when
 * it fires.
 */
async function afterProblems(ctx: HandlerContext, dag: ParsedDag): Promise<DagIssue[]> {
  const after = dag.after;
  if (after === undefined) return [];
  const cycle = await afterCycle(
    dag.id,
    after.dag,
    async (id) => (await ctx.store.getDefinition(ctx.roomId, id))?.dag.after?.dag,
  );
  if (cycle !== null)
    return [
      {
        path: "after.dag",
        message: `would close a cycle of after links (${cycle.join(" → ")}): a DAG cannot run after its own runs`,
      },
    ];
  const upstream = await ctx.store.getDefinition(ctx.roomId, after.dag);
  if (upstream === null) return [];
  return afterMappingProblems(after, upstream.dag).map((p) => ({
    path: `after.params.${p.param}`,
    message: p.message,
  }));
}
