/** `!dag list [<id>]`: the room's recent runs, or the runs of one published DAG. */
import { listing } from "../../render/blocks.js";
import { code, r } from "../../render/html.js";
import { plural } from "../../render/words.js";
import type { HandlerContext } from "../context.js";
import type { Outcome } from "../outcome.js";
import { progressOfRuns } from "../outcome.js";
import type { RunStatus } from "../../../domain/model.js";
import { RUN_STATUSES } from "../../../domain/model.js";
import { isRunStatus } from "../../../domain/run-states.js";
import { decodeCursor, listRunPage, MAX_LIST_LIMIT } from "../../run-list.js";
import { listQuery, runListSchema } from "../http-shapes.js";
import { MAX_LISTED_RUNS, notFoundRun } from "../shared.js";
import { defineVerb } from "../verb.js";

/** The list as chat types it (`id` only) or as the CLI and HTTP ask for it (filters and a page). */
export interface ListCommand {
  verb: "list";
  id?: string | null;
  status?: RunStatus[] | null;
  limit?: number;
  cursor?: string | null;
}

export const list = defineVerb<ListCommand, "list">({
  verb: "list",
  args: [{ name: "id", kind: "run-id", about: "the id of a published DAG", optional: true }],
  dataFields: {
    status: (v) =>
      v === null || (Array.isArray(v) && v.length > 0 && v.every((x) => isRunStatus(x)))
        ? null
        : `a list of run statuses (${RUN_STATUSES.join(", ")})`,
    limit: (v) =>
      typeof v === "number" && Number.isInteger(v) && v >= 1 && v <= MAX_LIST_LIMIT
        ? null
        : `a whole number from 1 to ${MAX_LIST_LIMIT}`,
    cursor: (v) => (v === null || typeof v === "string" ? null : "the cursor a list gave"),
  },
  summary: "list the room's recent DAG runs, or the runs of one published DAG",
  group: "follow",
  permission: "open",
  details: ["With <id>, the runs of that published DAG: the one publishing started and each `!dag run`."],
  handle: (ctx, c) => handleList(ctx, c),
  cli: {
    description:
      "List the room's runs, newest first: run id, status, tasks succeeded and what else happened. " +
      "With DAG_ID, the runs of that published DAG.",
    about:
      "A page with more after it ends with the next page's cursor (on stderr; `next` with --json); runs\n" +
      "created meanwhile do not shift the pages.",
    args: [
      {
        name: "dag_id",
        about: "only the runs of this published DAG (a run's id or uuid: that run)",
        optional: true,
      },
    ],
    options: [
      {
        flags: "--status <statuses>",
        about: `only runs in these statuses, comma-separated (${RUN_STATUSES.join(", ")})`,
      },
      { flags: "--limit <n>", about: `how many runs on a page (1 to ${MAX_LIST_LIMIT})`, default: "20" },
      { flags: "--cursor <cursor>", about: "the next page: the cursor the previous page printed" },
    ],
    command: ([id], options = {}) => ({
      verb: "list",
      id: typeof id === "string" ? id : null,
      status:
        typeof options["status"] === "string" ? options["status"].split(",").map((s) => s.trim()) : null,
      limit: Number(options["limit"] ?? 20),
      cursor: typeof options["cursor"] === "string" ? options["cursor"] : null,
    }),
    check: (c) => {
      const cursor = (c as ListCommand).cursor;
      return typeof cursor === "string" && decodeCursor(cursor) === null
        ? "--cursor is not a cursor a list printed: start again without it"
        : null;
    },
    json: (o) => (o.kind === "list" ? runsJson(o) : null),
  },
  http: {
    method: "GET",
    path: "/v1/runs",
    summary:
      "The room's runs, newest first, a page at a time: filtered by status and DAG; the next page's cursor is `next` and the Link header",
    query: listQuery,
    response: runListSchema,
    command: ({ query }) => {
      const q = query as { limit?: number; cursor?: string; status?: string; dag?: string };
      return {
        verb: "list",
        id: q.dag ?? null,
        status: q.status === undefined ? null : (q.status.split(",") as RunStatus[]),
        limit: q.limit ?? MAX_LISTED_RUNS,
        cursor: q.cursor ?? null,
      };
    },
    answer: (o) => (o.kind === "list" ? { runs: o.runs, next: o.next ?? null, at: o.at } : null),
    // The next page, with the same filters.
    headers: (o, { query }): Record<string, string> => {
      if (o.kind !== "list" || o.next === undefined) return {};
      const next = new URLSearchParams();
      for (const k of ["room", "limit", "status", "dag"])
        if (query[k] !== undefined) next.set(k, String(query[k]));
      next.set("cursor", o.next);
      return { link: `</v1/runs?${next.toString()}>; rel="next"` };
    },
  },
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

async function handleList(ctx: HandlerContext, c: ListCommand): Promise<Outcome> {
  const at = await ctx.store.now();
  const dag = c.id ?? null;
  const answer = await listRunPage(ctx.store, ctx.roomId, {
    dag,
    statuses: c.status ?? null,
    limit: c.limit ?? MAX_LISTED_RUNS,
    cursor: c.cursor ?? null,
  });
  if (answer.kind === "no-such-dag") {
    const missing = await notFoundRun(ctx, answer.ref);
    return missing.kind === "not-found" ? { ...missing, dag: true } : missing;
  }
  if (answer.kind === "bad-cursor")
    return {
      kind: "command-error",
      message: "the cursor is not one a list gave: start again without it",
      helpLine: `usage: ${list.usage}`,
    };
  return {
    kind: "list",
    runs: await progressOfRuns(ctx.store, answer.runs),
    at,
    ...(answer.of === null ? {} : { of: answer.of }),
    ...(answer.next === null ? {} : { next: answer.next }),
    room: ctx.roomId,
  };
}

/** The runs of a list as the CLI's --json prints them: each run's fields with its task summary, and `next`. */
export function runsJson(o: Extract<Outcome, { kind: "list" }>): Record<string, unknown> {
  return { runs: o.runs.map((p) => ({ ...p.run, summary: p.summary })), next: o.next ?? null };
}
