/**
 * The SQLite Store (better-sqlite3): one connection per Store, WAL, BEGIN IMMEDIATE for every
 * write, migrations at open. For nodes that share one host; PostgreSQL serves several hosts.
 */
import { existsSync } from "node:fs";
import { StoreMissingError } from "../../ports/errors.js";
import type { Store, StoreOptions } from "../../ports/store.js";
import { ChangeFeed } from "./change-feed.js";
import { SqliteConnection } from "./connection.js";
import { claimDemand, queuedShapes } from "../store-common/ops/claim-demand.js";
import * as leases from "../store-common/ops/leases.js";
import { checkSchemaVersion, currentSchemaVersion, LATEST_SCHEMA_VERSION, migrate } from "./migrations.js";
import * as nodes from "../store-common/ops/nodes.js";
import { ScheduleViews } from "../store-common/schedule-views.js";
import * as step from "../store-common/ops/schedule-step.js";

import { decideGate } from "../store-common/ops/decide-gate.js";
import { markTask } from "../store-common/ops/mark-task.js";
import * as inbox from "../store-common/ops/inbox.js";
import * as outbox from "../store-common/ops/outbox.js";
import * as after from "../store-common/ops/after.js";
import * as definitions from "../store-common/ops/definitions.js";
import * as reads from "../store-common/ops/run-reads.js";
import * as runs from "../store-common/ops/runs.js";
import * as policies from "../store-common/ops/policy.js";
import * as caps from "../store-common/ops/caps.js";
import * as runOutcomes from "../store-common/ops/run-outcomes.js";
import * as reaper from "../store-common/ops/reap.js";
import * as release from "../store-common/ops/release-task.js";
import { pruneBatch } from "../store-common/ops/prune.js";
import * as renewOutput from "../store-common/ops/renew-output.js";
import * as claims from "../store-common/ops/claims.js";
import * as finish from "../store-common/ops/finish.js";
import { checkFinish } from "../store-common/ops/finish.js";
import { checkClaim } from "../store-common/checks.js";
import { checkPruneLimits } from "../store-common/retention.js";
import { readScript, writeScript } from "./script-driver.js";
export { LATEST_SCHEMA_VERSION } from "./migrations.js";
export { DEFAULT_ROOM_CAP } from "../store-common/checks.js";

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
    joinCommits: (joiner) => c.joinCommits(joiner, onError),

    acquireLease: async (roomId, session, ttlMs) =>
      writeScript(c, "acquire lease", () => leases.acquireLease(roomId, session, ttlMs)),
    syncLeases: async (session, ttlMs, wishes) =>
      writeScript(c, "sync leases", () => leases.syncLeases(session, ttlMs, wishes)),
    renewLease: async (fence, ttlMs) => writeScript(c, "renew lease", () => leases.renewLease(fence, ttlMs)),
    releaseLease: async (fence) => writeScript(c, "release lease", () => leases.releaseLease(fence)),
    getLease: async (roomId) => readScript(c, "get lease", () => leases.getLease(roomId)),

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

    createRun: async (ctx, input) => writeScript(c, "create run", () => runs.createRun(ctx, input)),
    confirmRun: async (ctx, roomId, dagId, by) =>
      writeScript(c, "confirm run", () => runs.confirmRun(ctx, roomId, dagId, by)),
    rejectRun: async (ctx, roomId, dagId, by) =>
      writeScript(c, "reject run", () => runs.rejectRun(ctx, roomId, dagId, by)),
    cancelRun: async (ctx, roomId, dagId, by) =>
      writeScript(c, "cancel run", () => runs.cancelRun(ctx, roomId, dagId, by)),
    decideGate: async (ctx, roomId, dagId, taskId, input) =>
      writeScript(c, `${input.decision} gate`, () => decideGate(ctx, roomId, dagId, taskId, input)),
    markTask: async (ctx, roomId, dagId, taskId, input) =>
      writeScript(c, `mark task ${input.to}`, () => markTask(ctx, roomId, dagId, taskId, input)),
    getRun: async (roomId, dagId) => readScript(c, "get run", () => reads.getRun(roomId, dagId)),
    getRunById: async (runId) => readScript(c, "get run by id", () => reads.getRunById(runId)),
    listRuns: async (roomId, opts) => readScript(c, "list runs", () => reads.listRuns(roomId, opts)),
    pageRuns: async (roomId, query) => readScript(c, "page runs", () => reads.pageRuns(roomId, query)),
    listTasks: async (runId) => readScript(c, "list tasks", () => reads.listTasks(runId)),
    countTaskStatuses: async (runIds) =>
      readScript(c, "count task statuses", () => reads.countTaskStatuses(runIds)),
    getTask: async (runId, taskId) => readScript(c, "get task", () => reads.getTask(runId, taskId)),
    getDefinition: async (roomId, dagId) =>
      readScript(c, "get definition", () => definitions.getDefinition(roomId, dagId)),
    listScheduledDefinitions: async (roomId, opts) =>
      readScript(c, "list scheduled definitions", () => definitions.listScheduledDefinitions(roomId, opts)),
    changeSchedule: async (ctx, roomId, dagId, change, notices) =>
      writeScript(c, `${change.action} schedule`, () =>
        definitions.changeSchedule(ctx, roomId, dagId, change, notices),
      ),
    skipScheduleSlots: async (fence, roomId, dagId, skipped) =>
      writeScript(c, "skip schedule slots", () =>
        definitions.skipScheduleSlots(fence, roomId, dagId, skipped),
      ),
    listDefinitionRuns: async (roomId, dagId, opts) =>
      readScript(c, "list definition runs", () => definitions.listDefinitionRuns(roomId, dagId, opts)),
    listAfterDefinitions: async (roomId, opts) =>
      readScript(c, "list after definitions", () => after.listAfterDefinitions(roomId, opts)),
    unfiredUpstreamRuns: async (roomId, dagId, upstream, since, opts) =>
      readScript(c, "unfired upstream runs", () =>
        after.unfiredUpstreamRuns(roomId, dagId, upstream, since, opts),
      ),
    recordAfterFiring: async (fence, input) =>
      writeScript(c, "record after firing", () => after.recordAfterFiring(fence, input)),
    listAfterFirings: async (roomId, opts) =>
      readScript(c, "list after firings", () => after.listAfterFirings(roomId, opts)),

    claimTask: async (offer) => {
      checkClaim(offer, 1);
      return writeScript(c, "claim task", () => claims.claimTask(offer));
    },
    claimTasks: async (offer, max) => {
      checkClaim(offer, max);
      return writeScript(c, "claim task", () => claims.claimTasks(offer, max));
    },
    claimDemand: async (roomId, liveWithinMs) =>
      readScript(c, "claim demand", () => claimDemand(roomId, liveWithinMs)),
    queuedShapes: async (roomIds) => readScript(c, "queued shapes", () => queuedShapes(roomIds)),
    // Other processes hear the scheduler's commit through the data_version poll (every worker wakes);
    // this process's workers hear the names.
    wakeNodes: async (roomId, nodeIds) => {
      if (nodeIds.length > 0) changes.emit("wake", roomId, nodeIds);
    },
    renewTaskLease: async (token, leaseMs) =>
      writeScript(c, "renew task lease", () => renewOutput.renewTaskLease(token, leaseMs)),
    releaseTask: async (token, why) => writeScript(c, "release task", () => release.releaseTask(token, why)),
    writeTaskOutput: async (token, output, bytes) =>
      writeScript(c, "write task output", () => renewOutput.writeTaskOutput(token, output, bytes)),
    // Bad input is refused before the write, as on PostgreSQL.
    finishTask: async (token, result) => {
      checkFinish(result, null);
      return writeScript(c, "finish task", () => finish.finishTask(token, result));
    },
    finishAndClaim: async (token, result, offer, max) => {
      checkFinish(result, { offer, max });
      return writeScript(c, "finish task", () => finish.finishAndClaim(token, result, offer, max));
    },

    scheduleStep: async (fence, incremental) => {
      const kept = ScheduleViews.of(c);
      return kept.guard(
        fence,
        writeScript(c, "schedule step", () => step.scheduleStep(kept, fence, incremental)),
      );
    },
    // Inside the group commit, like every leader write: the scripts look first and write only
    // when something is due, so a tick that finds nothing costs a savepoint in the batch. A read
    // of its own would commit the batch early (a read flushes the writes asked before it).
    reap: async (fence) => writeScript(c, "reap", () => reaper.reap(fence)),
    deriveRunOutcomes: async (fence) =>
      writeScript(c, "derive run outcomes", () => runOutcomes.deriveRunOutcomes(fence)),
    setRoomCap: async (roomId, cap, ctx) =>
      writeScript(c, "set room cap", () => caps.setRoomCap(roomId, cap, ctx)),
    getRoomCap: async (roomId) => readScript(c, "get room cap", () => caps.getRoomCap(roomId)),
    roomLoad: async (roomId) => readScript(c, "room load", () => caps.roomLoad(roomId)),
    initRoomCap: async (roomId, cap) => writeScript(c, "init room cap", () => caps.initRoomCap(roomId, cap)),
    initRoomPolicy: async (roomId, policy, setBy) =>
      writeScript(c, "init room policy", () => policies.initRoomPolicy(roomId, policy, setBy)),
    getRoomPolicy: async (roomId) => readScript(c, "get room policy", () => policies.getRoomPolicy(roomId)),
    setRoomPolicy: async (ctx, roomId, policy, by, options) =>
      writeScript(c, "set room policy", () => policies.setRoomPolicy(ctx, roomId, policy, by, options)),
    proposePolicyChange: async (ctx, roomId, proposal) =>
      writeScript(c, "propose a policy change", () => policies.proposePolicyChange(ctx, roomId, proposal)),
    getPolicyProposal: async (roomId, changeId) =>
      readScript(c, "get a policy proposal", () => policies.getPolicyProposal(roomId, changeId)),

    heartbeat: async (beat) => writeScript(c, "heartbeat", () => nodes.heartbeats([beat])),
    heartbeats: async (beats) => writeScript(c, "heartbeats", () => nodes.heartbeats(beats)),
    listNodes: async () => readScript(c, "list nodes", () => nodes.listNodes()),
    removeNode: async (session) => writeScript(c, "remove node", () => nodes.removeNode(session)),

    enqueueOutbox: async (fence, messages) =>
      writeScript(c, "enqueue outbox", () => outbox.enqueueOutbox(fence, messages)),
    pendingOutbox: async (fence, limit) =>
      readScript(c, "pending outbox", () => outbox.pendingOutbox(fence, limit)),
    markOutboxSent: async (fence, txnId, sentEventId) =>
      writeScript(c, "mark outbox sent", () => outbox.markOutboxSent(fence, txnId, sentEventId)),
    markOutboxFailed: async (fence, txnId, error) =>
      writeScript(c, "mark outbox failed", () => outbox.markOutboxFailed(fence, txnId, error)),
    getOutbox: async (txnId) => readScript(c, "get outbox", () => outbox.getOutbox(txnId)),

    rememberIdempotencyKey: async (scope, key, result) =>
      writeScript(c, "remember idempotency key", () => nodes.rememberIdempotencyKey(scope, key, result)),
    readIdempotencyKey: async (scope, key) =>
      readScript(c, "read idempotency key", () => nodes.readIdempotencyKey(scope, key)),
    readEvents: async (roomId, sinceSeq, limit) =>
      readScript(c, "read events", () => nodes.readEvents(roomId, sinceSeq, limit)),
    runEndedBy: async (roomId, runId) =>
      readScript(c, "read who ended a run", () => nodes.runEndedBy(roomId, runId)),

    pruneBatch: async (fence, limits) => {
      checkPruneLimits(limits);
      return writeScript(c, "prune", () => pruneBatch(fence, limits));
    },
  };
  return store;
}
