/** `!dag list [<id>]`: the room's recent runs, or the runs of one published DAG. */
import { listing } from "../../render/blocks.js";
import { code, r } from "../../render/html.js";
import { plural } from "../../render/words.js";
import type { HandlerContext } from "../context.js";
import type { Outcome } from "../outcome.js";
import { progressOfRuns } from "../outcome.js";
import { MAX_LISTED_RUNS, notFoundRun } from "../shared.js";
import { defineVerb } from "../verb.js";
import { findRun } from "../../run-ref.js";

export const list = defineVerb<{ verb: "list"; id?: string | null }, "list">({
  verb: "list",
  args: [{ name: "id", kind: "run-id", about: "the id of a published DAG", optional: true }],
  summary: "list the room's recent DAG runs, or the runs of one published DAG",
  permission: "open",
  details: ["With <id>, the runs of that published DAG: the one publishing started and each `!dag run`."],
  handle: (ctx, c) => handleList(ctx, c.id ?? null),
  render: {
    list: (o) => {
      if (o.of !== undefined)
        return listing(
          r`${plural(o.runs.length, "run")} of ${code(o.of)}, newest first (start another with ${code(
            `!dag run ${o.of}`,
          )}):`,
          o.runs,
        );
      return o.runs.length === 0
        ? r`No runs in this room yet. Publish one with ${code("!dag publish")} and a json or toml block.`
        : listing(r`The ${plural(o.runs.length, "latest run")} in this room:`, o.runs);
    },
  },
});

async function handleList(ctx: HandlerContext, of: string | null = null): Promise<Outcome> {
  const at = await ctx.store.now();
  if (of !== null) {
    // A definition's runs through its index, however many newer runs of other DAGs the room has;
    // a run that is no definition (`x.2`) lists itself.
    const definition = await ctx.store.getDefinition(ctx.roomId, of);
    let runs =
      definition === null
        ? []
        : await ctx.store.listDefinitionRuns(ctx.roomId, of, { limit: MAX_LISTED_RUNS });
    let name = of;
    if (definition === null) {
      const run = await findRun(ctx.store, ctx.roomId, of);
      if (run === null) return notFoundRun(ctx, of);
      runs = [run];
      name = run.dagId;
    }
    return { kind: "list", runs: await progressOfRuns(ctx.store, runs), at, of: name };
  }
  const runs = await ctx.store.listRuns(ctx.roomId, { limit: MAX_LISTED_RUNS });
  return { kind: "list", runs: await progressOfRuns(ctx.store, runs), at };
}
