/**
 * Builders for store tests, shared by both adapters: DAGs and tasks with every default filled,
 * sessions, a leader set up in a fresh room, and a claim offer that fits everything.
 */
import { randomUUID } from "node:crypto";
import type { ParsedDag, TaskSpec } from "../../src/domain/model.js";
import type {
  CommandContext,
  CreateRunInput,
  LeaderFence,
  NodeOffer,
  RunRecord,
  Session,
  Store,
  TaskResult,
} from "../../src/ports/store.js";

export function session(nodeId: string, bootId: string = randomUUID().slice(0, 8)): Session {
  return { nodeId, bootId };
}

export function task(id: string, spec: Partial<Omit<TaskSpec, "id">> = {}): TaskSpec {
  return {
    id,
    action: "echo",
    args: {},
    needs: [],
    on: { labels: [], node: null },
    timeoutMs: null,
    queueTimeoutMs: null,
    retries: 0,
    retryBackoffMs: 1000,
    concurrencyKey: null,
    priority: 0,
    ...spec,
  };
}

export function dag(
  id: string,
  tasks: TaskSpec[],
  extra: Partial<Omit<ParsedDag, "id" | "tasks">> = {},
): ParsedDag {
  return { id, description: null, maxParallel: null, tasks, ...extra };
}

/** A chain a → b → c … of `n` tasks. */
export function chainDag(id: string, n: number): ParsedDag {
  return dag(
    id,
    Array.from({ length: n }, (_, i) => task(`t${i}`, { needs: i === 0 ? [] : [`t${i - 1}`] })),
  );
}

export function runInput(roomId: string, d: ParsedDag, extra: Partial<CreateRunInput> = {}): CreateRunInput {
  return {
    roomId,
    dag: d,
    hash: `hash-of-${JSON.stringify(d).length}-${d.id}-${d.tasks.map((t) => t.id).join(",")}`,
    publisher: "@alice:example.org",
    publishEventId: null,
    needsConfirmation: false,
    confirmTimeoutMs: 60_000,
    ...extra,
  };
}

export const LEASE_TTL_MS = 10_000;

/** Take the room's lease for a new leader session. */
export async function becomeLeader(store: Store, roomId: string, nodeId = "leader"): Promise<LeaderFence> {
  const { expiresAt: _expiresAt, ...fence } = await store.acquireLease(roomId, session(nodeId), LEASE_TTL_MS);
  return fence;
}

/**
 * A command's context; given an inbox row, the row keeps `{ answered: <the operation's result> }`
 * (the app keeps its outcome there: ports/store.ts CommandContext).
 */
export const cmd = (fence: LeaderFence, inboxEventId?: string): CommandContext =>
  inboxEventId === undefined ? { fence } : { fence, inboxEventId, answer: answered };

/** What `cmd` keeps on the row: the operation's result as given to its answer. */
export const answered = (result: unknown): Record<string, unknown> => ({ answered: result });

/** Publish a running (auto-confirmed) run and queue what is ready. */
export async function publishRunning(store: Store, fence: LeaderFence, d: ParsedDag): Promise<RunRecord> {
  const r = await store.createRun(cmd(fence), runInput(fence.roomId, d));
  if (r.kind !== "created") throw new Error(`publishRunning: expected created, got ${r.kind}`);
  await store.scheduleStep(fence);
  return r.run;
}

export function offer(s: Session, roomIds: string[], extra: Partial<NodeOffer> = {}): NodeOffer {
  return { session: s, roomIds, labels: [], actions: ["echo"], leaseMs: 30_000, ...extra };
}

export const ok: TaskResult = { outcome: "succeeded", exitCode: 0, output: "done\n", error: null };
export const failed: TaskResult = { outcome: "failed", exitCode: 1, output: "boom\n", error: "exit 1" };

/** Settle every promise and count fulfilled vs rejected (and rejected by what). */
export async function race<T>(ops: Array<() => Promise<T>>): Promise<{ values: T[]; errors: unknown[] }> {
  const settled = await Promise.allSettled(ops.map((op) => op()));
  const values: T[] = [];
  const errors: unknown[] = [];
  for (const s of settled) {
    if (s.status === "fulfilled") values.push(s.value);
    else errors.push(s.reason);
  }
  return { values, errors };
}
