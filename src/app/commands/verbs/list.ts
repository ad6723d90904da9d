/** `!dag list [<id>]`: the room's recent runs, or the runs of one published DAG. */
import { listing, runLines } from "../../render/blocks.js";
import { code, r, text } from "../../render/html.js";
import { emptyListWords, plural } from "../../render/words.js";
import type { HandlerContext } from "../context.js";
import type { Outcome, RunProgress } from "../outcome.js";
import { progressOfRuns } from "../outcome.js";
import type { RunStatus } from "../../../domain/model.js";
import { RUN_STATUSES } from "../../../domain/model.js";
import { isRunStatus } from "../../../domain/run-states.js";
import { decodeCursor, listRunPage, MAX_LIST_LIMIT } from "../../run-list.js";
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
    json: (o) => (o.kind === "list" ? listPage(o) : null),
  },
  http: (s) => ({
    method: "GET",
    path: "/v1/runs",
    summary:
      "The room's runs, newest first, a page at a time: filtered by status and DAG; the next page's cursor is `next` and the Link header",
    query: s.listQuery,
    response: s.runListSchema,
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
    answer: (o) => (o.kind === "list" ? listPage(o) : null),
    // The next page, with the same filters.
    headers: (o, { query }): Record<string, string> => {
      if (o.kind !== "list" || o.next === undefined) return {};
      const next = new URLSearchParams();
      for (const k of ["room", "limit", "status", "dag"])
        if (query[k] !== undefined) next.set(k, String(query[k]));
      next.set("cursor", o.next);
      return { link: `</v1/runs?${next.toString()}>; rel="next"` };
    },
  }),
  render: {
    list: (o, say) => {
      if (say.chat !== true) {
        const where = o.of !== undefined ? `of ${o.of}` : o.room !== undefined ? `in room ${o.room}` : "here";
        const lines = text(runLines(o.runs, emptyListWords(o.statuses, o.others, where)));
        return o.next === undefined
          ? lines
          : { ...lines, aside: `more: the next page with ${say.command("list", ["--cursor", o.next])}` };
      }
      if (o.of !== undefined)
        return listing(
          r`${plural(o.runs.length, "run")} of ${code(o.of)}, newest first (start another with ${code(
            `!dag run ${o.of}`,
          )}):`,
          o.runs,
        );
      if (o.runs.length === 0 && o.statuses !== undefined)
        return r`${capitalized(emptyListWords(o.statuses, o.others, "in this room"))}.`;
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
  const statuses = c.status ?? null;
  return {
    kind: "list",
    runs: await progressOfRuns(ctx.store, answer.runs),
    at,
    ...(answer.of === null ? {} : { of: answer.of }),
    ...(answer.next === null ? {} : { next: answer.next }),
    room: ctx.roomId,
    ...(statuses === null ? {} : { statuses }),
    ...(statuses !== null && answer.runs.length === 0 && (c.cursor ?? null) === null
      ? { others: await othersOutsideFilter(ctx, answer.of) }
      : {}),
  };
}

/**
 * A filtered list that found nothing: how many runs there are in other states, so "no failed
 * runs" is not read as "no runs". One more page read, only in that case.
 */
async function othersOutsideFilter(
  ctx: HandlerContext,
  of: string | null,
): Promise<{ count: number; more: boolean }> {
  const all = await listRunPage(ctx.store, ctx.roomId, { dag: of, limit: MAX_LIST_LIMIT });
  return all.kind === "page"
    ? { count: all.runs.length, more: all.next !== null }
    : { count: 0, more: false };
}

/** What a list is as data, the same on every face: GET /v1/runs and `dagbot list --json` (with `ok`, `answer`, `room`). */
export function listPage(o: Extract<Outcome, { kind: "list" }>): {
  runs: RunProgress[];
  next: string | null;
  at: number;
} {
  return { runs: o.runs, next: o.next ?? null, at: o.at };
}

function capitalized(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}
