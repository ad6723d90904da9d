/** Row ↔ record mapping for the SQLite adapter: JSON columns, nullable sessions, typed statuses. */
import type { ParsedDag, RunStatus, TaskStatus } from "../../domain/model.js";
import type {
  InboxEvent,
  InboxStatus,
  LogEvent,
  OutboxMessage,
  OutboxStatus,
  RunRecord,
  Session,
  TaskRecord,
} from "../../ports/store.js";
import type { Row } from "./connection.js";

const str = (v: unknown): string => v as string;
const num = (v: unknown): number => v as number;
const strOrNull = (v: unknown): string | null => (v === null || v === undefined ? null : (v as string));
const numOrNull = (v: unknown): number | null => (v === null || v === undefined ? null : (v as number));
const json = <T>(v: unknown): T => JSON.parse(v as string) as T;

function session(node: unknown, boot: unknown): Session | null {
  return node === null || node === undefined ? null : { nodeId: str(node), bootId: str(boot) };
}

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
    dag: json<ParsedDag>(r.dag),
  };
}

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
    args: json(r.args),
    needs: json(r.needs),
    on: { labels: json(r.labels), node: strOrNull(r.node_pin) },
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

export function toInbox(r: Row): InboxEvent {
  return {
    eventId: str(r.event_id),
    roomId: str(r.room_id),
    sender: str(r.sender),
    originServerTs: num(r.origin_server_ts),
    content: json(r.content),
    seenBy: str(r.seen_by),
    status: r.status as InboxStatus,
    receivedAt: num(r.received_at),
    handledTerm: numOrNull(r.handled_term),
    result: r.result === null ? null : json(r.result),
  };
}

export function toOutbox(r: Row): OutboxMessage {
  return {
    seq: num(r.seq),
    txnId: str(r.txn_id),
    roomId: str(r.room_id),
    eventType: str(r.event_type),
    content: json(r.content),
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
    data: json(r.data),
  };
}
