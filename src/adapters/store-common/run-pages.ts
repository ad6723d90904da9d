/**
 * RunStore.pageRuns for both dialects: the filters asked for become the WHERE (only those, so each
 * combination is its own statement with its own plan, and a prepared statement never falls back to
 * a generic plan that ignores the indexes), the position a keyset condition, and one row more than
 * the page tells whether another page follows.
 */
import type { RunPage, RunPageQuery, RunPosition, RunRecord } from "../../ports/store.js";
import { MAX_RUN_PAGE } from "../../ports/store.js";
import type { Row } from "./records.js";

/** How a dialect writes the parts of the page query. */
export interface PageDialect {
  /** The placeholder of the next value (`?`, `$3`). */
  param(value: unknown): string;
  /** The run's insertion order: `seq` (PostgreSQL), `rowid` (SQLite). */
  readonly seq: string;
  /** `status` equal to one of these statuses (each dialect writes a list its own way). */
  statusIn(statuses: readonly string[]): string;
}

export function pageRunsWhere(roomId: string, query: RunPageQuery, d: PageDialect): string {
  const where = [`room_id = ${d.param(roomId)}`];
  if (query.definition !== undefined) where.push(`definition_id = ${d.param(query.definition)}`);
  if (query.statuses !== undefined) {
    const [only] = query.statuses;
    where.push(
      query.statuses.length === 1 && only !== undefined
        ? `status = ${d.param(only)}`
        : d.statusIn(query.statuses),
    );
  }
  if (query.after !== undefined) {
    // Written so that the first term is a range on the index's created_at; the second only filters.
    const at = query.after.createdAt;
    where.push(
      `created_at <= ${d.param(at)} AND (created_at < ${d.param(at)} OR ${d.seq} < ${d.param(query.after.seq)})`,
    );
  }
  return where.join(" AND ");
}

/** The rows a page reads: the page and one more (capped, whatever was asked for). */
export function pageReadLimit(query: RunPageQuery): number {
  return Math.min(MAX_RUN_PAGE, Math.max(1, Math.floor(query.limit))) + 1;
}

/** The page of `rows` (read with pageReadLimit, each with its insertion order as `page_seq`). */
export function cutPage(rows: Row[], query: RunPageQuery, toRun: (r: Row) => RunRecord): RunPage {
  const size = pageReadLimit(query) - 1;
  const page = rows.slice(0, size);
  const last = page.at(-1);
  const next: RunPosition | null =
    rows.length > size && last !== undefined
      ? { createdAt: Number(last.created_at), seq: Number(last.page_seq) }
      : null;
  return { runs: page.map(toRun), next };
}
