/**
 * The guarantees the chaos scenarios check, read from the store's event log and rows after the fact
 * (docs/architecture.md §8): leader terms that never overlap, each task recorded succeeded once, each inbox
 * event handled and answered once. Each check returns the violations it found (empty when it holds),
 * so a failure lists every offending entry instead of the first.
 */
import { readFileSync, existsSync } from "node:fs";
import type { LogEvent, Store } from "../../src/ports/store.js";

/**
 * Leader-fenced entries (term set) must form non-overlapping terms: as seq increases the term never
 * decreases, every term has exactly one `lease.acquired`, and every entry of term t was written by
 * the session that acquired t. A deposed leader's late write would break one of these.
 */
export function leaderTermViolations(events: readonly LogEvent[]): string[] {
  const out: string[] = [];
  const holder = new Map<number, string>();
  for (const e of events) {
    if (e.kind !== "lease.acquired" || e.term === null) continue;
    if (holder.has(e.term)) out.push(`seq ${e.seq}: term ${e.term} acquired a second time (by ${e.actor})`);
    else holder.set(e.term, e.actor ?? "?");
  }
  let highest = 0;
  let highestSeq = 0;
  for (const e of events) {
    if (e.term === null) continue;
    if (e.term < highest) {
      out.push(`seq ${e.seq} ${e.kind}: term ${e.term} after term ${highest} (seq ${highestSeq})`);
    } else if (e.term > highest) {
      highest = e.term;
      highestSeq = e.seq;
      if (e.kind !== "lease.acquired")
        out.push(`seq ${e.seq} ${e.kind}: term ${e.term} begins before its lease.acquired`);
    }
    const h = holder.get(e.term);
    if (h === undefined) out.push(`seq ${e.seq} ${e.kind}: term ${e.term} was never acquired`);
    else if (e.actor !== h)
      out.push(`seq ${e.seq} ${e.kind}: term ${e.term} written by ${e.actor}, held by ${h}`);
  }
  return out;
}

/** Terms taken over after the first: how often leadership changed hands (or was re-taken after expiry). */
export function leaseAcquisitions(events: readonly LogEvent[]): LogEvent[] {
  return events.filter((e) => e.kind === "lease.acquired");
}

/**
 * Every task of the run is succeeded in the tasks table and has exactly one task.succeeded entry in
 * the log; nothing else of the run ended succeeded.
 */
export async function exactlyOnceSuccess(
  store: Store,
  events: readonly LogEvent[],
  runId: string,
  expectedTasks: number,
): Promise<string[]> {
  const out: string[] = [];
  const tasks = await store.listTasks(runId);
  if (tasks.length !== expectedTasks) out.push(`run has ${tasks.length} tasks, expected ${expectedTasks}`);
  for (const t of tasks) if (t.status !== "succeeded") out.push(`task ${t.taskId} ended ${t.status}`);
  const counts = new Map<string, number>();
  for (const e of events) {
    if (e.kind === "task.succeeded" && e.runId === runId && e.taskId !== null)
      counts.set(e.taskId, (counts.get(e.taskId) ?? 0) + 1);
  }
  for (const t of tasks) {
    const n = counts.get(t.taskId) ?? 0;
    if (n !== 1) out.push(`task ${t.taskId} has ${n} task.succeeded entries`);
  }
  for (const id of counts.keys())
    if (!tasks.some((t) => t.taskId === id)) out.push(`task.succeeded for unknown task ${id}`);
  return out;
}

/**
 * Each inbox event was handled once and answered once: its row is `replied`, the log holds exactly
 * one inbox.handled and one inbox.replied entry naming it, and its reply is in the outbox under
 * `reply.<event id>`, unless `replyless` says it gets none (a command ignored by design, or any
 * command in an engine-only room, where nothing would send it): then there must be no such row.
 */
export async function inboxOnceViolations(
  store: Store,
  events: readonly LogEvent[],
  eventIds: readonly string[],
  replyless: (eventId: string) => boolean = () => false,
): Promise<string[]> {
  const out: string[] = [];
  const handled = new Map<string, number>();
  const replied = new Map<string, number>();
  for (const e of events) {
    const id = e.data["eventId"];
    if (typeof id !== "string") continue;
    if (e.kind === "inbox.handled") handled.set(id, (handled.get(id) ?? 0) + 1);
    if (e.kind === "inbox.replied") replied.set(id, (replied.get(id) ?? 0) + 1);
  }
  for (const id of eventIds) {
    const row = await store.getInboxEvent(id);
    if (row?.status !== "replied") out.push(`${id}: inbox row is ${row?.status ?? "missing"}`);
    if ((handled.get(id) ?? 0) !== 1) out.push(`${id}: ${handled.get(id) ?? 0} inbox.handled entries`);
    if ((replied.get(id) ?? 0) !== 1) out.push(`${id}: ${replied.get(id) ?? 0} inbox.replied entries`);
    const reply = await store.getOutbox(`reply.${id}`);
    if (!replyless(id) && reply === null) out.push(`${id}: no reply in the outbox`);
    if (replyless(id) && reply !== null) out.push(`${id}: a reply was queued though none is due`);
  }
  return out;
}

/** Log lines of a node (pino JSON on stderr, one per line), parsed; other lines are skipped. */
export function readNodeLog(path: string): Array<Record<string, unknown>> {
  if (!existsSync(path)) return [];
  const out: Array<Record<string, unknown>> = [];
  for (const line of readFileSync(path, "utf8").split("\n")) {
    if (!line.startsWith("{")) continue;
    try {
      out.push(JSON.parse(line) as Record<string, unknown>);
    } catch {
      // A line cut by kill -9 mid-write.
    }
  }
  return out;
}

/** What the nodes said about writes the store refused them: each a ConflictError seen and obeyed. */
export const STALE_WRITE_MESSAGES = [
  "deposed: a fenced write was rejected",
  "task lease lost; killing the action and writing nothing",
  "finish rejected: the task moved on without us",
] as const;

/** What the nodes said about store failures they rode out (hard errors, with backoff). */
export const STORE_FAILURE_MESSAGES = [
  "leader pass failed",
  "claim failed",
  "heartbeat failed",
  "lease renewal failed",
  "lease acquire failed",
  "finish failed",
  "task lease renewal failed",
] as const;

/** Counts of the given messages over some nodes' logs. */
export function countMessages(
  logs: ReadonlyArray<ReadonlyArray<Record<string, unknown>>>,
  messages: readonly string[],
): Record<string, number> {
  const counts: Record<string, number> = Object.fromEntries(messages.map((m) => [m, 0]));
  for (const log of logs)
    for (const line of log) {
      const msg = line["msg"];
      if (typeof msg === "string" && msg in counts) counts[msg] = (counts[msg] ?? 0) + 1;
    }
  return counts;
}

/** Lines at error or fatal level (pino levels 50, 60): a node reporting a bug of its own. */
export function errorLines(log: ReadonlyArray<Record<string, unknown>>): Array<Record<string, unknown>> {
  return log.filter((l) => typeof l["level"] === "number" && l["level"] >= 50);
}
