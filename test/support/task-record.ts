/** A task record for pure-logic tests (renderers, fakes): a plain queued `echo` of run-1 unless told otherwise. */
import type { TaskRecord } from "../../src/ports/store.js";

export function taskFixture(fields: Partial<TaskRecord> = {}): TaskRecord {
  return {
    runId: "run-1",
    taskId: "a",
    seq: 1,
    status: "queued",
    version: 1,
    attempt: 1,
    maxAttempts: 1,
    action: "echo",
    args: {},
    needs: [],
    on: { labels: [], node: null },
    priority: 0,
    concurrencyKey: null,
    timeoutMs: null,
    queueTimeoutMs: null,
    retryBackoffMs: 1000,
    executor: null,
    leaseExpiresAt: null,
    notBefore: null,
    deadline: null,
    queuedAt: null,
    startedAt: null,
    finishedAt: null,
    exitCode: null,
    output: null,
    outputBytes: null,
    error: null,
    outputPatterns: null,
    outputValues: null,
    gate: null,
    gateState: null,
    ...fields,
  };
}
