/** Row → record mapping for the PostgreSQL adapter (jsonb and text[] arrive parsed, bigint as number). */
import type { ParsedDag, RunStatus, TaskStatus } from "../../domain/model.js";
import type {
  InboxEvent,
  InboxStatus,
  LogEvent,
  NodeRecord,
  OutboxMessage,
  OutboxStatus,
  RunRecord,
  Session,
  TaskRecord,
} from "../../ports/store.js";
import type { Row } from "./db.js";

const str = (v: unknown): string => v as string;
const num = (v: unknown): number => v as number;
const strOrNull = (v: unknown): string | null => (v === null || v === undefined ? null : (v as string));
const numOrNull = (v: unknown): number | null => (v === null || v === undefined ? null : (v as number));

function session(node: unknown, boot: unknown): Session | null {
  return node === null || node === undefined ? null : { nodeId: str(node), bootId: str(boot) };
}

export const RUN_COLUMNS =
  "run_id, room_id, dag_id, hash, status, description, max_parallel, publisher, publish_event_id, confirmed_by, confirm_deadline, created_at, updated_at, dag";

export function toRun(r: Row): RunRecord {
  return {
    runId: str(r.run_id),
    roomId: str(r.room_id),
    dagId: str(r.dag_id),
    hash: str(r.hash),
    status: r.status as RunStatus,
    description: strOrNull(r.description),
    maxParallel: numOrNull(r.max_parallel),
    publisher: str(r.publisher),
    publishEventId: strOrNull(r.publish_event_id),
    confirmedBy: strOrNull(r.confirmed_by),
    confirmDeadline: numOrNull(r.confirm_deadline),
    createdAt: num(r.created_at),
    updatedAt: num(r.updated_at),
    dag: r.dag as ParsedDag,
  };
}

export const TASK_COLUMNS =
  "run_id, task_id, room_id, seq, status, version, claim_version, attempt, max_attempts, action, args, needs, labels, node_pin, priority, concurrency_key, timeout_ms, queue_timeout_ms, retry_backoff_ms, executor_node, executor_boot, lease_expires_at, not_before, deadline, queued_at, started_at, finished_at, exit_code, output, error";

export function toTask(r: Row): TaskRecord {
  return {
    runId: str(r.run_id),
    taskId: str(r.task_id),
    seq: num(r.seq),
    status: r.status as TaskStatus,
    version: num(r.version),
    attempt: num(r.attempt),
    maxAttempts: num(r.max_attempts),
    action: str(r.action),
    args: r.args as TaskRecord["args"],
    needs: r.needs as string[],
    on: { labels: r.labels as string[], node: strOrNull(r.node_pin) },
    priority: num(r.priority),
    concurrencyKey: strOrNull(r.concurrency_key),
    timeoutMs: numOrNull(r.timeout_ms),
    queueTimeoutMs: numOrNull(r.queue_timeout_ms),
    retryBackoffMs: num(r.retry_backoff_ms),
    executor: session(r.executor_node, r.executor_boot),
    leaseExpiresAt: numOrNull(r.lease_expires_at),
    notBefore: numOrNull(r.not_before),
    deadline: numOrNull(r.deadline),
    queuedAt: numOrNull(r.queued_at),
    startedAt: numOrNull(r.started_at),
    finishedAt: numOrNull(r.finished_at),
    exitCode: numOrNull(r.exit_code),
    output: strOrNull(r.output),
    error: strOrNull(r.error),
  };
}

export const INBOX_COLUMNS =
  "event_id, room_id, sender, origin_server_ts, content, seen_by, status, received_at, handled_term, result";

export function toInbox(r: Row): InboxEvent {
  return {
    eventId: str(r.event_id),
    roomId: str(r.room_id),
    sender: str(r.sender),
    originServerTs: num(r.origin_server_ts),
    content: r.content as Record<string, unknown>,
    seenBy: str(r.seen_by),
    status: r.status as InboxStatus,
    receivedAt: num(r.received_at),
    handledTerm: numOrNull(r.handled_term),
    result: (r.result ?? null) as Record<string, unknown> | null,
  };
}

export const OUTBOX_COLUMNS =
  "seq, txn_id, room_id, event_type, content, replaces_txn_id, coalesce_key, status, sent_event_id, created_at, attempts";

export function toOutbox(r: Row): OutboxMessage {
  return {
    seq: num(r.seq),
    txnId: str(r.txn_id),
    roomId: str(r.room_id),
    eventType: str(r.event_type),
    content: r.content as Record<string, unknown>,
    replacesTxnId: strOrNull(r.replaces_txn_id),
    coalesceKey: strOrNull(r.coalesce_key),
    status: r.status as OutboxStatus,
    sentEventId: strOrNull(r.sent_event_id),
    createdAt: num(r.created_at),
    attempts: num(r.attempts),
  };
}

export function toLogEvent(r: Row): LogEvent {
  return {
    seq: num(r.seq),
    roomId: str(r.room_id),
    at: num(r.at),
    kind: str(r.kind),
    runId: strOrNull(r.run_id),
    taskId: strOrNull(r.task_id),
    term: numOrNull(r.term),
    actor: strOrNull(r.actor),
    data: r.data as Record<string, unknown>,
  };
}

export function toNode(r: Row): NodeRecord {
  return {
    session: { nodeId: str(r.node_id), bootId: str(r.boot_id) },
    labels: r.labels as string[],
    capacity: num(r.capacity),
    actions: r.actions as string[],
    roomIds: r.room_ids as string[],
    heartbeatAt: num(r.heartbeat_at),
    heartbeatAgeMs: num(r.age_ms),
    runningTasks: num(r.running_tasks),
    startedAt: num(r.started_at),
  };
}
