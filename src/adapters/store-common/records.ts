/**
 * Row → record mapping shared by the SQLite and PostgreSQL adapters. Each adapter passes its own
 * decoding of structured columns (SQLite: JSON text to parse; PostgreSQL: jsonb and text[] that the
 * driver has already parsed); everything after that decoding is the same for both.
 */
import type { GateSpec, GateState } from "../../domain/gates.js";
import type { ForEachSpec, ParsedDag, RunStatus, TaskSpec, TaskStatus } from "../../domain/model.js";
import type { OutputDeclaration, OutputValue } from "../../domain/outputs.js";
import type { RunWhen } from "../../domain/run-when.js";
import { isConditional } from "../../domain/run-when.js";
import type {
  DefinitionRecord,
  InboxEvent,
  InboxStatus,
  LogEvent,
  LeaseState,
  NodeRecord,
  OutboxMessage,
  OutboxStatus,
  RunRecord,
  ScheduleState,
  Session,
  TaskRecord,
} from "../../ports/store.js";

export type Row = Record<string, unknown>;

/** Turns a column holding JSON (an object or array) into its value, the way the driver returns it. */
export type DecodeJson = <T>(value: unknown) => T;

export const RUN_COLUMNS =
  "run_id, room_id, dag_id, hash, status, description, max_parallel, publisher, publish_event_id, confirmed_by, confirm_deadline, created_at, updated_at, dag";

export const TASK_COLUMNS =
  "run_id, task_id, room_id, seq, status, version, claim_version, attempt, max_attempts, action, args, needs, labels, node_pin, priority, concurrency_key, timeout_ms, queue_timeout_ms, retry_backoff_ms, executor_node, executor_boot, lease_expires_at, not_before, deadline, queued_at, started_at, finished_at, exit_code, output, output_bytes, error, output_patterns, output_values, gate, gate_state, run_when, for_each, fan_out, fan_out_limit, item";

/** A definition row with its first run's approval (LEFT JOIN runs o ON o.run_id = d.first_run_id). */
export const DEFINITION_COLUMNS =
  "d.room_id, d.dag_id, d.hash, d.dag, d.schedule_cron, d.schedule_timezone, d.schedule_missed, d.publisher, d.last_slot_at, d.slots_through, d.schedule_state, d.schedule_state_by, d.schedule_state_at, d.schedule_state_reason, d.last_run_number, d.created_at, d.updated_at, o.run_id AS origin_run_id, o.status AS origin_status, o.confirmed_by AS origin_confirmed_by, o.confirm_deadline AS origin_confirm_deadline";

export const DEFINITION_FROM = "definitions d LEFT JOIN runs o ON o.run_id = d.first_run_id";

export const INBOX_COLUMNS =
  "event_id, room_id, sender, origin_server_ts, content, seen_by, status, received_at, handled_term, result";

export const OUTBOX_COLUMNS =
  "seq, txn_id, room_id, event_type, content, replaces_txn_id, coalesce_key, status, sent_event_id, created_at, attempts";

/** A line of the event log as a write hands it over; seq and time are the store's to fill in. */
export interface LogLine {
  kind: string;
  runId?: string | null;
  taskId?: string | null;
  term?: number | null;
  actor?: string | null;
  data?: Record<string, unknown>;
}

export { sessionKey } from "../../ports/lease-answer.js";

/** A lease or claim holder as found in a row, in sessionKey's form; null when nobody holds it. */
export const holderKey = (node: string | null, boot: string | null): string | null =>
  node === null ? null : `${node}/${boot ?? ""}`;

const str = (v: unknown): string => v as string;
const num = (v: unknown): number => v as number;
const strOrNull = (v: unknown): string | null => (v === null || v === undefined ? null : (v as string));
const numOrNull = (v: unknown): number | null => (v === null || v === undefined ? null : (v as number));

function session(node: unknown, boot: unknown): Session | null {
  return node === null || node === undefined ? null : { nodeId: str(node), bootId: str(boot) };
}

/** The mappers of one driver, given how it decodes JSON columns. */
export function rowMappers(json: DecodeJson) {
  return {
    toRun: (r: Row): RunRecord => runFromRow(r, json),
    toDefinition: (r: Row): DefinitionRecord => definitionFromRow(r, json),
    toTask: (r: Row): TaskRecord => taskFromRow(r, json),
    toInbox: (r: Row): InboxEvent => inboxFromRow(r, json),
    toOutbox: (r: Row): OutboxMessage => outboxFromRow(r, json),
    toLogEvent: (r: Row): LogEvent => logEventFromRow(r, json),
    toNode: (r: Row): NodeRecord => nodeFromRow(r, json),
  };
}

export function runFromRow(r: Row, json: DecodeJson): RunRecord {
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

export function definitionFromRow(r: Row, json: DecodeJson): DefinitionRecord {
  const cron = strOrNull(r.schedule_cron);
  return {
    roomId: str(r.room_id),
    dagId: str(r.dag_id),
    hash: str(r.hash),
    dag: json<ParsedDag>(r.dag),
    schedule:
      cron === null
        ? null
        : {
            cron,
            timezone: str(r.schedule_timezone),
            missed: r.schedule_missed as NonNullable<ParsedDag["schedule"]>["missed"],
          },
    publisher: str(r.publisher),
    origin:
      r.origin_run_id === null || r.origin_run_id === undefined
        ? null
        : {
            runId: str(r.origin_run_id),
            status: r.origin_status as RunStatus,
            confirmedBy: strOrNull(r.origin_confirmed_by),
            confirmDeadline: numOrNull(r.origin_confirm_deadline),
          },
    lastSlotAt: numOrNull(r.last_slot_at),
    slotsThrough: numOrNull(r.slots_through),
    scheduleState: {
      state: r.schedule_state as ScheduleState,
      by: strOrNull(r.schedule_state_by),
      at: numOrNull(r.schedule_state_at),
      reason: strOrNull(r.schedule_state_reason),
    },
    lastRunNumber: num(r.last_run_number),
    createdAt: num(r.created_at),
    updatedAt: num(r.updated_at),
  };
}

export function taskFromRow(r: Row, json: DecodeJson): TaskRecord {
  return {
    runId: str(r.run_id),
    taskId: str(r.task_id),
    seq: num(r.seq),
    status: r.status as TaskStatus,
    version: num(r.version),
    attempt: num(r.attempt),
    maxAttempts: num(r.max_attempts),
    action: str(r.action),
    args: json<TaskRecord["args"]>(r.args),
    needs: json<string[]>(r.needs),
    on: { labels: json<string[]>(r.labels), node: strOrNull(r.node_pin) },
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
    outputBytes: numOrNull(r.output_bytes),
    error: strOrNull(r.error),
    outputPatterns:
      r.output_patterns === null || r.output_patterns === undefined
        ? null
        : json<Record<string, OutputDeclaration>>(r.output_patterns),
    outputValues:
      r.output_values === null || r.output_values === undefined
        ? null
        : json<Record<string, OutputValue>>(r.output_values),
    gate: r.gate === null || r.gate === undefined ? null : json<GateSpec>(r.gate),
    gateState: r.gate_state === null || r.gate_state === undefined ? null : json<GateState>(r.gate_state),
    ...(isConditional(r.run_when as RunWhen | null) ? { when: r.run_when as TaskSpec["when"] } : {}),
    forEach: r.for_each === null || r.for_each === undefined ? null : json<ForEachSpec>(r.for_each),
    fanOut: strOrNull(r.fan_out),
    fanOutLimit: numOrNull(r.fan_out_limit),
    item: strOrNull(r.item),
  };
}

export function inboxFromRow(r: Row, json: DecodeJson): InboxEvent {
  return {
    eventId: str(r.event_id),
    roomId: str(r.room_id),
    sender: str(r.sender),
    originServerTs: num(r.origin_server_ts),
    content: json<Record<string, unknown>>(r.content),
    seenBy: str(r.seen_by),
    status: r.status as InboxStatus,
    receivedAt: num(r.received_at),
    handledTerm: numOrNull(r.handled_term),
    result: r.result === null || r.result === undefined ? null : json<Record<string, unknown>>(r.result),
  };
}

export function outboxFromRow(r: Row, json: DecodeJson): OutboxMessage {
  return {
    seq: num(r.seq),
    txnId: str(r.txn_id),
    roomId: str(r.room_id),
    eventType: str(r.event_type),
    content: json<Record<string, unknown>>(r.content),
    replacesTxnId: strOrNull(r.replaces_txn_id),
    coalesceKey: strOrNull(r.coalesce_key),
    status: r.status as OutboxStatus,
    sentEventId: strOrNull(r.sent_event_id),
    createdAt: num(r.created_at),
    attempts: num(r.attempts),
  };
}

export function logEventFromRow(r: Row, json: DecodeJson): LogEvent {
  return {
    seq: num(r.seq),
    roomId: str(r.room_id),
    at: num(r.at),
    kind: str(r.kind),
    runId: strOrNull(r.run_id),
    taskId: strOrNull(r.task_id),
    term: numOrNull(r.term),
    actor: strOrNull(r.actor),
    data: json<Record<string, unknown>>(r.data),
  };
}

/** A `room_leases` row as the lease's state, with the store's clock at the read. */
export function leaseFromRow(
  roomId: string,
  r: { holder_node: string | null; holder_boot: string | null; term: number; expires_at: number },
  now: number,
): LeaseState {
  return {
    roomId,
    holder: r.holder_node === null ? null : { nodeId: r.holder_node, bootId: r.holder_boot ?? "" },
    term: r.term,
    expiresAt: r.expires_at,
    now,
  };
}

/** A `nodes` row with two computed columns: age_ms (store clock minus heartbeat_at) and running_tasks. */
export function nodeFromRow(r: Row, json: DecodeJson): NodeRecord {
  return {
    session: { nodeId: str(r.node_id), bootId: str(r.boot_id) },
    labels: json<string[]>(r.labels),
    capacity: num(r.capacity),
    actions: json<string[]>(r.actions),
    roomIds: json<string[]>(r.room_ids),
    actionSpecs: r.action_specs === undefined || r.action_specs === null ? {} : json(r.action_specs),
    heartbeatAt: num(r.heartbeat_at),
    heartbeatAgeMs: num(r.age_ms),
    runningTasks: num(r.running_tasks),
    startedAt: num(r.started_at),
    undecryptable: r.undecryptable === undefined || r.undecryptable === null ? 0 : num(r.undecryptable),
    undecryptableReason: strOrNull(r.undecryptable_reason ?? null),
    // SQLite stores the flag as 0/1, PostgreSQL as a boolean.
    deviceSigned: r.device_signed === undefined || r.device_signed === null ? null : Boolean(r.device_signed),
    release: r.release === undefined || r.release === null ? null : str(r.release),
    protocol: r.protocol === undefined || r.protocol === null ? null : num(r.protocol),
  };
}
