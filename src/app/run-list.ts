/**
 * A page of a room's runs, for every face (`!dag list`, `dagbot list`, GET /v1/runs): newest first,
 * filtered by status and by DAG, continued with an opaque cursor. The cursor is a position in the
 * list, not an offset, so runs created while someone pages neither shift nor repeat a page
 * (docs/architecture.md §1, "Run ids and lists").
 */
import type { RunStatus } from "../domain/model.js";
import type { DefinitionStore, RunPosition, RunRecord, RunStore } from "../ports/store.js";
import { findRun } from "./run-ref.js";

/** The largest page any face may ask for: a member's list costs the reader at most this many runs (and their tasks). */
export const MAX_LIST_LIMIT = 100;

export interface RunListRequest {
  /** A published DAG's id: its runs (or a run's id or uuid: that run alone, or its definition's runs). */
  dag?: string | null;
  statuses?: readonly RunStatus[] | null;
  limit: number;
  /** The previous page's `next`. */
  cursor?: string | null;
}

export type RunListAnswer =
  | {
      kind: "page";
      runs: RunRecord[];
      /** The cursor of the next page; null on the last. */
      next: string | null;
      /** The DAG (canonical id) whose runs these are, when one was asked for. */
      of: string | null;
    }
  | { kind: "bad-cursor" }
  | { kind: "no-such-dag"; ref: string };

export type RunListStore = Pick<RunStore, "pageRuns" | "getRun" | "getRunById"> &
  Pick<DefinitionStore, "getDefinition">;

const CURSOR_PREFIX = "r1";

export function encodeCursor(p: RunPosition): string {
  return Buffer.from(`${CURSOR_PREFIX}:${p.createdAt}:${p.seq}`).toString("base64url");
}

/** The position a cursor stands for; null for anything this code did not write. */
export function decodeCursor(cursor: string): RunPosition | null {
  if (!/^[A-Za-z0-9_-]{1,80}$/.test(cursor)) return null;
  const m = /^r1:(\d{1,16}):(\d{1,16})$/.exec(Buffer.from(cursor, "base64url").toString("latin1"));
  if (m === null) return null;
  const position = { createdAt: Number(m[1]), seq: Number(m[2]) };
  return Number.isSafeInteger(position.createdAt) && Number.isSafeInteger(position.seq) ? position : null;
}

export async function listRunPage(
  store: RunListStore,
  roomId: string,
  request: RunListRequest,
): Promise<RunListAnswer> {
  const limit = Math.min(MAX_LIST_LIMIT, Math.max(1, Math.floor(request.limit)));
  let after: RunPosition | undefined;
  if (request.cursor !== undefined && request.cursor !== null) {
    const position = decodeCursor(request.cursor);
    if (position === null) return { kind: "bad-cursor" };
    after = position;
  }
  const statuses =
    request.statuses === undefined || request.statuses === null ? undefined : [...request.statuses];
  const query = {
    limit,
    ...(statuses === undefined ? {} : { statuses }),
    ...(after === undefined ? {} : { after }),
  };
  const dag = request.dag ?? null;
  if (dag === null) return page(await store.pageRuns(roomId, query), null);
  if ((await store.getDefinition(roomId, dag)) !== null)
    return page(await store.pageRuns(roomId, { ...query, definition: dag }), dag);
  const run = await findRun(store, roomId, dag);
  if (run === null) return { kind: "no-such-dag", ref: dag };
  // A definition's first run named by its uuid stands for its definition.
  if (run.dagId !== dag && (await store.getDefinition(roomId, run.dagId)) !== null)
    return page(await store.pageRuns(roomId, { ...query, definition: run.dagId }), run.dagId);
  // A run that is no definition (`x.2`) lists itself: one page, if it passes the filter.
  const shown = after === undefined && (statuses === undefined || statuses.includes(run.status));
  return { kind: "page", runs: shown ? [run] : [], next: null, of: run.dagId };
}

function page(p: { runs: RunRecord[]; next: RunPosition | null }, of: string | null): RunListAnswer {
  return { kind: "page", runs: p.runs, next: p.next === null ? null : encodeCursor(p.next), of };
}
