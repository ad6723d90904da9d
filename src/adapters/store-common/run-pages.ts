/**
 * RunStore.pageRuns's limit and cut, for the statement of store-common/ops/run-reads.ts: one row
 * more than the page tells whether another page follows.
 */
import type { RunPage, RunPageQuery, RunPosition, RunRecord } from "../../ports/store.js";
import { MAX_RUN_PAGE } from "../../ports/store.js";
import type { Row } from "./records.js";

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
