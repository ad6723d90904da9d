/** `!dag run <id> [<name>=<value> ...]`: a new run of a published DAG, under the next free `<id>.N`. */
import type { Parsed } from "../../../domain/command-grammar.js";
import { checkId, fail, ok } from "../../../domain/command-grammar.js";
import type { PairWords } from "../../../domain/name-values.js";
import { cliPair, pairsFromData, pairsFromWords } from "../../../domain/name-values.js";
import { quoteInput } from "../../../domain/command-text.js";
import type { HandlerContext } from "../context.js";
import type { Outcome } from "../outcome.js";
import { startRun } from "../run-creation.js";
import { notFoundRun } from "../shared.js";
import { defineVerb } from "../verb.js";
import { findRun } from "../../run-ref.js";
import type { HookOrigin } from "../../../domain/webhook.js";
import { hookSender } from "../../../domain/webhook.js";

export interface RunCommand {
  verb: "run";
  id: string;
  /** name=value pairs in the order given (checked against the DAG's declarations later). */
  params: Array<[string, string]>;
  /**
   * Set by the HTTP API for a webhook delivery (data only, never typed): which hook and delivery
   * started the run, kept on the run for its card. Honoured only from that hook's own sender.
   */
  hook?: HookOrigin;
}

export const run = defineVerb<RunCommand, never>({
  verb: "run",
  usage: "!dag run <id> [<name>=<value> ...]",
  summary: "start a new run of a published DAG, with values for its parameters",
  group: "run",
  permission: "operator",
  details: [
    "The run gets its own id (<id>.2, <id>.3, ...), status card and history (`!dag list <id>`);",
    "<id> may also name one of its runs (<id>.2): the new run is of the same published DAG.",
    "Each <name> is a parameter the DAG declares ([params.NAME] with a pattern and maybe a default);",
    "a value is one word (no spaces) that must match the whole pattern. Parameters with a default",
    "may be left out. Nothing is stored when a value is refused. The run awaits confirmation as a",
    "published DAG does (auto_confirm and the two-person rule apply); auto_confirm starts it at once",
    "only when someone confirmed the DAG's published run (or it never needed confirming).",
  ],
  parse: (args) => parseRun(args),
  fromData: (data) => runFromData(data),
  handle: (ctx, c) => handleRun(ctx, c.id, c.params, c.hook),
  // Its answers are publish's (a new run, a conflict, an invalid DAG): rendered there.
  render: {},
  writes: true,
  cli: {
    name: "trigger",
    description: "Start a new run of a published DAG, with values for its parameters.",
    about:
      "The run gets the next free id <dag_id>.2, <dag_id>.3, ... and awaits confirmation unless the sender is\n" +
      "on auto_confirm (and the DAG's published run was confirmed) or --confirm is given, like a published DAG.\n" +
      "<dag_id> may name one of its runs. Values are checked against the DAG's [params] before anything is\n" +
      "stored; a refused value names its parameter.",
    args: [
      { name: "dag_id", about: "the published DAG's id" },
      {
        name: "params",
        about: "name=value for a parameter the DAG declares (a value is one word)",
        variadic: true,
      },
    ],
    command: ([id, pairs]) => ({
      verb: "run",
      id: typeof id === "string" ? id : "",
      params: (Array.isArray(pairs) ? (pairs as readonly string[]) : []).map(cliPair),
    }),
    confirmOption: true,
  },
  http: (s) => ({
    method: "POST",
    path: "/v1/runs",
    summary: "Start a new run of a published DAG with values for its parameters",
    body: s.triggerBody,
    response: s.triggeredSchema,
    command: ({ body }) => {
      const b = body as { dagId: string; params?: Record<string, string> };
      return { verb: "run", id: b.dagId, params: Object.entries(b.params ?? {}) };
    },
    answer: (o) =>
      o.kind === "published" && o.run.definition !== undefined
        ? { result: "created", run: o.run, needsConfirmation: o.needsConfirmation }
        : null,
  }),
});

/** How a run's name=value words are called in refusals. */
const PARAMS: PairWords = {
  verb: "run",
  word: "parameter",
  plural: "parameters",
  nameOf: "a parameter the DAG declares",
  valueOf: "a parameter value",
  each: "parameter",
};

/** `{ verb: "run", id, params: [[name, value], ...] }`, with the rules of the typed command. */
function runFromData(data: Readonly<Record<string, unknown>>): Parsed<RunCommand> {
  const extra = Object.keys(data).find((k) => k !== "verb" && k !== "id" && k !== "params" && k !== "hook");
  if (extra !== undefined)
    return fail("extra-argument", "run", `unexpected field ${quoteInput(extra)}: run takes id and params`);
  const hook = data["hook"] === undefined ? undefined : hookFromData(data["hook"]);
  if (hook === null) return fail("bad-argument", "run", "hook is { id, delivery, link? }");
  const rawId = data["id"];
  if (typeof rawId !== "string")
    return fail("missing-argument", "run", "missing id, the id of a published DAG");
  const id = checkId("run", "id", rawId);
  if (typeof id !== "string") return id;
  const params = pairsFromData(data["params"], "params", PARAMS);
  if (params.kind === "error") return params;
  return ok({ verb: "run", id, params: params.command, ...(hook === undefined ? {} : { hook }) });
}

const HOOK_ID = /^[A-Za-z0-9_.-]{1,64}$/;
const DELIVERY_ID = /^[\x21-\x7e]{1,128}$/;
const LINK = /^https?:\/\/[\x21-\x7e]{1,500}$/;

/** A webhook origin given as data, checked field by field; null when it is not one. */
function hookFromData(value: unknown): HookOrigin | null {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return null;
  const v = value as Record<string, unknown>;
  if (Object.keys(v).some((k) => k !== "id" && k !== "delivery" && k !== "link")) return null;
  const { id, delivery, link } = v;
  if (typeof id !== "string" || !HOOK_ID.test(id)) return null;
  if (typeof delivery !== "string" || !DELIVERY_ID.test(delivery)) return null;
  if (link !== undefined && (typeof link !== "string" || !LINK.test(link))) return null;
  return { id, delivery, ...(link === undefined ? {} : { link }) };
}

/** `!dag run <id> [name=value ...]`: the id, then pairs; the value is everything after the first "=". */
function parseRun(args: string[]): Parsed<RunCommand> {
  const [rawId, ...pairs] = args;
  if (rawId === undefined)
    return fail("missing-argument", "run", "missing <id>, the id of a published DAG: !dag run needs it");
  const id = checkId("run", "id", rawId);
  if (typeof id !== "string") return id;
  const params = pairsFromWords(pairs, PARAMS);
  if (params.kind === "error") return params;
  return ok({ verb: "run", id, params: params.command });
}

/** `!dag run <id> [name=value ...]`: a new run of a published DAG, under the next free `<id>.N`. */
async function handleRun(
  ctx: HandlerContext,
  dagId: string,
  params: ReadonlyArray<readonly [string, string]>,
  hook?: HookOrigin,
): Promise<Outcome> {
  // Only the hook itself says that a delivery started a run: no other sender can claim one.
  if (hook !== undefined && ctx.sender !== hookSender(hook.id))
    return {
      kind: "command-error",
      message: "only a webhook's own delivery names its hook",
      helpLine: `usage: ${run.usage}`,
    };
  let definition = await ctx.store.getDefinition(ctx.roomId, dagId);
  if (definition === null) {
    // A run started by `!dag run` names its published DAG: another run of that one (`x.2` → `x.3`);
    // a first run named by its uuid is its definition's.
    const named = await findRun(ctx.store, ctx.roomId, dagId);
    if (named === null) return notFoundRun(ctx, dagId);
    const of = named.dag.definition ?? named.dagId;
    definition = await ctx.store.getDefinition(ctx.roomId, of);
    if (definition === null) return notFoundRun(ctx, of);
  }
  return startRun(ctx, definition, params, `usage: ${run.usage}`, hook);
}
