/**
 * The SQLite Store (better-sqlite3): one connection per Store, WAL, BEGIN IMMEDIATE for every
 * write, migrations at open. For nodes that share one host; PostgreSQL serves several hosts.
 */
import { existsSync } from "node:fs";
import { StoreMissingError } from "../../ports/errors.js";
import type { Store, StoreOptions } from "../../ports/store.js";
import { ChangeFeed } from "./change-feed.js";
import { SqliteConnection } from "./connection.js";
import { claimDemand } from "./demand.js";
import * as after from "./after.js";
import * as definitions from "./definitions.js";
import * as leases from "./leases.js";
import { checkSchemaVersion, currentSchemaVersion, LATEST_SCHEMA_VERSION, migrate } from "./migrations.js";
import * as nodes from "./nodes.js";
import * as runs from "./runs.js";
import * as scheduler from "./scheduler.js";
import * as tasks from "./tasks.js";

import { decideGate } from "../store-common/ops/decide-gate.js";
import * as inbox from "../store-common/ops/inbox.js";
import * as outbox from "../store-common/ops/outbox.js";
import * as policies from "../store-common/ops/policy.js";
import { pruneBatch } from "../store-common/ops/prune.js";
import * as renewOutput from "../store-common/ops/renew-output.js";
import { checkPruneLimits } from "../store-common/retention.js";
import { readScript, writeScript } from "./script-driver.js";
export { LATEST_SCHEMA_VERSION } from "./migrations.js";
export { DEFAULT_ROOM_CAP } from "./scheduler.js";

export interface SqliteStoreOptions extends StoreOptions {
  /** How long a write waits for another connection's lock before retrying (default 5000 ms). */
  busyTimeoutMs?: number;
  /** Where errors thrown by onChange listeners go (default: process.emitWarning). */
  onListenerError?: (error: unknown) => void;
  /** The synchronous pragma: full (default) or normal (see SqliteConnection). */
  synchronous?: "full" | "normal";
}

export const DEFAULT_BUSY_TIMEOUT_MS = 5000;

/** Open (creating if needed) the store at `path` and bring its schema up to date. */
export async function openSqliteStore(path: string, options: SqliteStoreOptions = {}): Promise<Store> {
  const clock = options.clock ?? Date.now;
  const onError =
    options.onListenerError ??
    ((e: unknown) => process.emitWarning(`dagbot sqlite store: change listener threw: ${String(e)}`));
  if (options.existing === true && !existsSync(path)) throw new StoreMissingError(`${path} does not exist`);
  // The notify closure runs only after a commit, by which time `changes` exists.
  const c = await SqliteConnection.open(
    path,
    options.busyTimeoutMs ?? DEFAULT_BUSY_TIMEOUT_MS,
    clock,
    (t, r, n) => changes.emit(t, r, n),
    options.synchronous ?? "full",
  );
  const changes = new ChangeFeed(() => c.dataVersion(), onError);
  try {
    const found = currentSchemaVersion(c.db);
    if (options.existing === true && found === 0)
      throw new StoreMissingError(`${path} holds no dagbot tables`);
    // Refused before the write transaction, so a refused store is not touched at all.
    checkSchemaVersion(found, options.migrate === true);
    if (found !== LATEST_SCHEMA_VERSION)
      await c.write(`migrate sqlite store ${path}`, (tx) => migrate(c.db, tx.now, options.migrate === true));
  } catch (e) {
    c.close();
    throw e;
  }
  let closed = false;

  // Every method is async so that a bad argument rejects rather than throws synchronously.
  const store: Store = {
    kind: "sqlite",
    now: async () => clock(),
    close: async () => {
      if (closed) return;
      closed = true;
      changes.close();
      c.close();
    },
    onChange: (listener) => changes.subscribe(listener),

    acquireLease: async (roomId, session, ttlMs) => leases.acquireLease(c, roomId, session, ttlMs),
    syncLeases: async (session, ttlMs, wishes) => leases.syncLeases(c, session, ttlMs, wishes),
    renewLease: async (fence, ttlMs) => leases.renewLease(c, fence, ttlMs),
    releaseLease: async (fence) => leases.releaseLease(c, fence),
    getLease: async (roomId) => leases.getLease(c, roomId),

    insertInboxEvent: async (event) =>
      writeScript(c, "insert inbox event", () => inbox.insertInboxEvent(event)),
    nextInboxEvent: async (fence) => readScript(c, "next inbox event", () => inbox.nextInboxEvent(fence)),
    markInboxHandled: async (fence, eventId, result, options) =>
      writeScript(c, "mark inbox handled", () => inbox.markInboxHandled(fence, eventId, result, options)),
    startInboxHandling: async (fence, eventId) =>
      writeScript(c, "start inbox handling", () => inbox.startInboxHandling(fence, eventId)),
    markInboxReplied: async (fence, eventId, replies) =>
      writeScript(c, "mark inbox replied", () => inbox.markInboxReplied(fence, eventId, replies)),
    getInboxEvent: async (eventId) => readScript(c, "get inbox event", () => inbox.getInboxEvent(eventId)),
    latestInboxEvent: async (roomId) =>
      readScript(c, "latest inbox event", () => inbox.latestInboxEvent(roomId)),

    createRun: async (ctx, input) => runs.createRun(c, ctx, input),
    confirmRun: async (ctx, roomId, dagId, by) => runs.confirmRun(c, ctx, roomId, dagId, by),
    rejectRun: async (ctx, roomId, dagId, by) => runs.rejectRun(c, ctx, roomId, dagId, by),
    cancelRun: async (ctx, roomId, dagId, by) => runs.cancelRun(c, ctx, roomId, dagId, by),
    decideGate: async (ctx, roomId, dagId, taskId, input) =>
      writeScript(c, `${input.decision} gate`, () => decideGate(ctx, roomId, dagId, taskId, input)),
    getRun: async (roomId, dagId) => runs.getRun(c, roomId, dagId),
    getRunById: async (runId) => runs.getRunById(c, runId),
    listRuns: async (roomId, opts) => runs.listRuns(c, roomId, opts),
    pageRuns: async (roomId, query) => runs.pageRuns(c, roomId, query),
    listTasks: async (runId) => runs.listTasks(c, runId),
    countTaskStatuses: async (runIds) => runs.countTaskStatuses(c, runIds),
    getTask: async (runId, taskId) => runs.getTask(c, runId, taskId),
    getDefinition: async (roomId, dagId) => definitions.getDefinition(c, roomId, dagId),
    listScheduledDefinitions: async (roomId, opts) => definitions.listScheduledDefinitions(c, roomId, opts),
    changeSchedule: async (ctx, roomId, dagId, change, notices) =>
      definitions.changeSchedule(c, ctx, roomId, dagId, change, notices),
    skipScheduleSlots: async (fence, roomId, dagId, skipped) =>
      definitions.skipScheduleSlots(c, fence, roomId, dagId, skipped),
    listDefinitionRuns: async (roomId, dagId, opts) => definitions.listDefinitionRuns(c, roomId, dagId, opts),
    listAfterDefinitions: async (roomId, opts) => after.listAfterDefinitions(c, roomId, opts),
    unfiredUpstreamRuns: async (roomId, dagId, upstream, since, opts) =>
      after.unfiredUpstreamRuns(c, roomId, dagId, upstream, since, opts),
    recordAfterFiring: async (fence, input) => after.recordAfterFiring(c, fence, input),
    listAfterFirings: async (roomId, opts) => after.listAfterFirings(c, roomId, opts),

    claimTask: async (offer) => tasks.claimTask(c, offer),
    claimTasks: async (offer, max) => tasks.claimTasks(c, offer, max),
    claimDemand: async (roomId, liveWithinMs) => claimDemand(c, roomId, liveWithinMs),
    // Other processes hear the scheduler's commit through the data_version poll (every worker wakes);
    // this process's workers hear the names.
    wakeNodes: async (roomId, nodeIds) => {
      if (nodeIds.length > 0) changes.emit("wake", roomId, nodeIds);
    },
    renewTaskLease: async (token, leaseMs) =>
      writeScript(c, "renew task lease", () => renewOutput.renewTaskLease(token, leaseMs)),
    releaseTask: async (token, why) => tasks.releaseTask(c, token, why),
    writeTaskOutput: async (token, output, bytes) =>
      writeScript(c, "write task output", () => renewOutput.writeTaskOutput(token, output, bytes)),
    finishTask: async (token, result) => tasks.finishTask(c, token, result),
    finishAndClaim: async (token, result, offer, max) => tasks.finishAndClaim(c, token, result, offer, max),

    scheduleStep: async (fence, incremental) => scheduler.scheduleStep(c, fence, incremental),
    reap: async (fence) => scheduler.reap(c, fence),
    deriveRunOutcomes: async (fence) => scheduler.deriveRunOutcomes(c, fence),
    setRoomCap: async (roomId, cap, ctx) => scheduler.setRoomCap(c, roomId, cap, ctx),
    getRoomCap: async (roomId) => scheduler.getRoomCap(c, roomId),
    roomLoad: async (roomId) => scheduler.roomLoad(c, roomId),
    initRoomCap: async (roomId, cap) => scheduler.initRoomCap(c, roomId, cap),
    initRoomPolicy: async (roomId, policy, setBy) =>
      writeScript(c, "init room policy", () => policies.initRoomPolicy(roomId, policy, setBy)),
    getRoomPolicy: async (roomId) => readScript(c, "get room policy", () => policies.getRoomPolicy(roomId)),
    setRoomPolicy: async (ctx, roomId, policy, by, options) =>
      writeScript(c, "set room policy", () => policies.setRoomPolicy(ctx, roomId, policy, by, options)),
    proposePolicyChange: async (ctx, roomId, proposal) =>
      writeScript(c, "propose a policy change", () => policies.proposePolicyChange(ctx, roomId, proposal)),
    getPolicyProposal: async (roomId, changeId) =>
      readScript(c, "get a policy proposal", () => policies.getPolicyProposal(roomId, changeId)),

    heartbeat: async (beat) => nodes.heartbeat(c, beat),
    listNodes: async () => nodes.listNodes(c),
    removeNode: async (session) => nodes.removeNode(c, session),

    enqueueOutbox: async (fence, messages) =>
      writeScript(c, "enqueue outbox", () => outbox.enqueueOutbox(fence, messages)),
    pendingOutbox: async (fence, limit) =>
      readScript(c, "pending outbox", () => outbox.pendingOutbox(fence, limit)),
    markOutboxSent: async (fence, txnId, sentEventId) =>
      writeScript(c, "mark outbox sent", () => outbox.markOutboxSent(fence, txnId, sentEventId)),
    markOutboxFailed: async (fence, txnId, error) =>
      writeScript(c, "mark outbox failed", () => outbox.markOutboxFailed(fence, txnId, error)),
    getOutbox: async (txnId) => readScript(c, "get outbox", () => outbox.getOutbox(txnId)),

    rememberIdempotencyKey: async (scope, key, result) => nodes.rememberIdempotencyKey(c, scope, key, result),
    readIdempotencyKey: async (scope, key) => nodes.readIdempotencyKey(c, scope, key),
    readEvents: async (roomId, sinceSeq, limit) => nodes.readEvents(c, roomId, sinceSeq, limit),
    runEndedBy: async (roomId, runId) => nodes.runEndedBy(c, roomId, runId),

    pruneBatch: async (fence, limits) => {
      checkPruneLimits(limits);
      return writeScript(c, "prune", () => pruneBatch(fence, limits));
    },
  };
  return store;
}
