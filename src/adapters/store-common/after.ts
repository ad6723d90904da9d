/**
 * What both stores' triggers share: a firing's row as a record, its event-log lines, and
 * the columns they read. The rule of a firing is src/domain/after.ts; the store holds it to once.
 */
import { numberedRunId } from "../../domain/after.js";
import { dagHash } from "../../domain/canonical-hash.js";
import type { ParsedDag, RunStatus } from "../../domain/model.js";
import type { AfterFiringInput, AfterFiringRecord, CreateRunInput, LeaderFence } from "../../ports/store.js";
import type { LogLine, Row } from "./records.js";
import { sessionKey } from "./records.js";

export const FIRING_COLUMNS =
  "room_id, dag_id, upstream_run_id, upstream_dag_id, upstream_status, run_id, run_dag_id, reason, fired_at, term";

/** Runs at or past this number are not given to a firing (`!dag run` stops at 9999 too). */
export const MAX_FIRED_RUN_NUMBER = 999_999;

/** Definitions with an `after` read at most, when the caller gives no limit. */
export const DEFAULT_DEFINITIONS_LIMIT = 1000;
/** Upstream runs or firings read at most, when the caller gives no limit. */
export const DEFAULT_LIMIT = 100;

/** A caller's limit (or the default) as a whole number of rows, never negative. */
export const limitOf = (n: number | undefined, d: number): number => Math.max(0, Math.floor(n ?? d));

/**
 * The run a firing starts: its definition's DAG as `<id>.N` (`n`), on the authority of the
 * definition's publisher, with no confirmation to wait for.
 */
export function firedRunInput(
  roomId: string,
  dagId: string,
  fire: NonNullable<AfterFiringInput["fire"]>,
  n: number,
): CreateRunInput {
  const dag: ParsedDag = { ...fire.dag, id: numberedRunId(dagId, n), definition: dagId };
  return {
    roomId,
    dag,
    hash: dagHash(dag),
    publisher: fire.publisher,
    publishEventId: null,
    needsConfirmation: false,
    confirmTimeoutMs: 0,
  };
}

export function firingFromRow(r: Row): AfterFiringRecord {
  return {
    roomId: r["room_id"] as string,
    dagId: r["dag_id"] as string,
    upstreamRunId: r["upstream_run_id"] as string,
    upstreamDagId: r["upstream_dag_id"] as string,
    upstreamStatus: r["upstream_status"] as RunStatus,
    runId: (r["run_id"] as string | null) ?? null,
    runDagId: (r["run_dag_id"] as string | null) ?? null,
    reason: (r["reason"] as string | null) ?? null,
    at: Number(r["fired_at"]),
    term: Number(r["term"]),
  };
}

/** `after.fired` on the upstream run (which definition it started, which run) and on the new run (after which run). */
export function firedLines(fence: LeaderFence, f: AfterFiringRecord): LogLine[] {
  const base = { term: fence.term, actor: sessionKey(fence.session) };
  const data = {
    dagId: f.dagId,
    upstream: f.upstreamDagId,
    upstreamRunId: f.upstreamRunId,
    status: f.upstreamStatus,
    run: f.runDagId,
    firedRunId: f.runId,
  };
  return [
    { kind: "after.fired", runId: f.upstreamRunId, ...base, data },
    { kind: "after.fired", runId: f.runId, ...base, data },
  ];
}

/** `after.skipped` on the upstream run, with the reason. */
export function skippedLine(fence: LeaderFence, f: AfterFiringRecord): LogLine {
  return {
    kind: "after.skipped",
    runId: f.upstreamRunId,
    term: fence.term,
    actor: sessionKey(fence.session),
    data: { dagId: f.dagId, upstream: f.upstreamDagId, status: f.upstreamStatus, reason: f.reason },
  };
}
