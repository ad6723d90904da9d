/**
 * The PostgreSQL Store (node-postgres): a pool for statements and short transactions, one
 * connection for the node's lease statements and its own heartbeat (the lease lane: db.ts, Lane),
 * one more for LISTEN while someone subscribes, migrations at open. For nodes on several hosts;
 * the server's now() is the one clock they all agree on.
 */
import type pg from "pg";
import { StoreMissingError } from "../../ports/errors.js";
import type { Store, StoreOptions } from "../../ports/store.js";
import { ChangeFeed } from "./change-feed.js";
import type { PoolerMode } from "./db.js";
import { Db, POOLER_MODES } from "./db.js";
import { Finishes } from "./finishes.js";
import { mapError, NOW, quoteIdent } from "./sql.js";
import { claimDemand, queuedShapes } from "../store-common/ops/claim-demand.js";
import { wakePayloads } from "./change-feed.js";
import * as leases from "../store-common/ops/leases.js";
import { migrate } from "./migrations.js";
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
import { checkClaim } from "../store-common/checks.js";
import { checkPruneLimits } from "../store-common/retention.js";
import { autocommitScript, readScript, writeScript } from "./script-driver.js";
export { LATEST_SCHEMA_VERSION } from "./migrations.js";
export { DEFAULT_ROOM_CAP } from "../store-common/checks.js";

export interface PostgresStoreOptions extends StoreOptions {
  /**
   * Connections in the pool (default 10): the most statements this Store runs at once, besides the
   * lease lane's one (db.ts, Lane).
   */
  poolSize?: number;
  /** The schema holding the tables (default "public"), created if missing. */
  schema?: string;
  /** Where errors thrown by onChange listeners, and lost LISTEN connections, go (default: process.emitWarning). */
  onListenerError?: (error: unknown) => void;
  /**
   * "transaction": the URL names a transaction-mode pooler (PgBouncer): no LISTEN (listeners are
   * woken every POOLER_POLL_MS and by this Store's own commits), no named prepared statements, no
   * startup options. Default "none".
   */
  pooler?: PoolerMode;
  /** How long a batch of NOTIFYs waits for more commits before it goes (Db; default 0). */
  notifyWindowMs?: number;
}

/** What a PostgreSQL Store counts about itself (tests and benchmarks read it). */
export interface PostgresStoreStats {
  /** The NOTIFY transactions it has sent (no write transaction notifies: docs/architecture.md §8, "Wake-ups"). */
  notifyTransactions: number;
}

const dbs = new WeakMap<Store, Db>();

/** The counts of a Store openPostgresStore opened; undefined for any other Store. */
export function postgresStoreStats(store: Store): PostgresStoreStats | undefined {
  const db = dbs.get(store);
  return db === undefined ? undefined : { notifyTransactions: db.notifyTransactions };
}

export const DEFAULT_POOL_SIZE = 10;

/** Connect, bring the schema up to date (refusing a newer one) and return the Store. */
export async function openPostgresStore(url: string, options: PostgresStoreOptions = {}): Promise<Store> {
  const poolSize = options.poolSize ?? DEFAULT_POOL_SIZE;
  if (!Number.isInteger(poolSize) || poolSize < 1)
    throw new RangeError(`postgres store: poolSize must be a whole number ≥ 1, got ${poolSize}`);
  const schema = options.schema ?? "public";
  if (schema === "") throw new RangeError("postgres store: schema must not be empty");
  const pooler = options.pooler ?? "none";
  if (!(POOLER_MODES as readonly string[]).includes(pooler))
    throw new RangeError(
      `postgres store: pooler must be one of ${POOLER_MODES.join(", ")}, got ${String(pooler)}`,
    );
  const notifyWindowMs = options.notifyWindowMs ?? 0;
  if (!Number.isFinite(notifyWindowMs) || notifyWindowMs < 0)
    throw new RangeError(`postgres store: notifyWindowMs must be a number ≥ 0, got ${notifyWindowMs}`);
  const db = new Db({ url, poolSize, schema, clock: options.clock, pooler, notifyWindowMs });
  const finishes = new Finishes(db);
  try {
    const client = await db.pool.connect();
    // The server may end this connection mid-migration (a restart, an administrator): the query
    // reports it, but the client's own "error" event would crash the process without a listener.
    let lost: Error | undefined;
    const onLost = (e: Error): void => {
      lost = e;
    };
    client.on("error", onLost);
    try {
      if (options.existing === true && !(await hasSchema(client, schema)))
        throw new StoreMissingError(`the database holds no dagbot tables in schema "${schema}"`);
      await migrate(client, schema, options.migrate === true, db.begin);
    } finally {
      client.off("error", onLost);
      client.release(lost);
    }
  } catch (e) {
    await db.close().catch(() => {});
    if (e instanceof StoreMissingError) throw e;
    throw mapError("open postgres store", e);
  }
  const onError =
    options.onListenerError ??
    ((e: unknown) => process.emitWarning(`dagbot postgres store: change feed: ${String(e)}`));
  const feed = new ChangeFeed(db.options, onError);
  db.onCommit = (topic, roomId, nodes) => feed.emit(topic, roomId, nodes);
  db.onNotifyError = onError;
  let closed = false;

  // Every method is async so that a bad argument rejects rather than throws synchronously.
  const store: Store = {
    kind: "postgres",
    now: async () => {
      const rows = await db.one<{ now: number }>("now", `SELECT ${NOW} AS now`, [db.clockParam()]);
      return rows[0]?.now ?? 0;
    },
    close: async () => {
      if (closed) return;
      closed = true;
      await feed.close();
      await db.close();
    },
    onChange: (listener, topics) => feed.subscribe(listener, topics),

    // Every room lease statement goes by the lease lane, so a renewal never queues behind the pool.
    acquireLease: async (roomId, session, ttlMs) =>
      autocommitScript(db, "acquire lease", () => leases.acquireLease(roomId, session, ttlMs), "lease"),
    syncLeases: async (session, ttlMs, wishes) =>
      autocommitScript(db, "sync leases", () => leases.syncLeases(session, ttlMs, wishes), "lease"),
    renewLease: async (fence, ttlMs) =>
      autocommitScript(db, "renew lease", () => leases.renewLease(fence, ttlMs), "lease"),
    releaseLease: async (fence) =>
      autocommitScript(db, "release lease", () => leases.releaseLease(fence), "lease"),
    getLease: async (roomId) => readScript(db, "get lease", () => leases.getLease(roomId), "lease"),

    insertInboxEvent: async (event) =>
      writeScript(db, "insert inbox event", () => inbox.insertInboxEvent(event)),
    nextInboxEvent: async (fence) => readScript(db, "next inbox event", () => inbox.nextInboxEvent(fence)),
    markInboxHandled: async (fence, eventId, result, options) =>
      writeScript(db, "mark inbox handled", () => inbox.markInboxHandled(fence, eventId, result, options)),
    startInboxHandling: async (fence, eventId) =>
      writeScript(db, "start inbox handling", () => inbox.startInboxHandling(fence, eventId)),
    markInboxReplied: async (fence, eventId, replies) =>
      writeScript(db, "mark inbox replied", () => inbox.markInboxReplied(fence, eventId, replies)),
    getInboxEvent: async (eventId) => readScript(db, "get inbox event", () => inbox.getInboxEvent(eventId)),
    latestInboxEvent: async (roomId) =>
      readScript(db, "latest inbox event", () => inbox.latestInboxEvent(roomId)),

    createRun: async (ctx, input) => writeScript(db, "create run", () => runs.createRun(ctx, input)),
    confirmRun: async (ctx, roomId, dagId, by) =>
      writeScript(db, "confirm run", () => runs.confirmRun(ctx, roomId, dagId, by)),
    rejectRun: async (ctx, roomId, dagId, by) =>
      writeScript(db, "reject run", () => runs.rejectRun(ctx, roomId, dagId, by)),
    cancelRun: async (ctx, roomId, dagId, by) =>
      writeScript(db, "cancel run", () => runs.cancelRun(ctx, roomId, dagId, by)),
    decideGate: async (ctx, roomId, dagId, taskId, input) =>
      writeScript(db, `${input.decision} gate`, () => decideGate(ctx, roomId, dagId, taskId, input)),
    markTask: async (ctx, roomId, dagId, taskId, input) =>
      writeScript(db, `mark task ${input.to}`, () => markTask(ctx, roomId, dagId, taskId, input)),
    getRun: async (roomId, dagId) => readScript(db, "get run", () => reads.getRun(roomId, dagId)),
    getRunById: async (runId) => readScript(db, "get run by id", () => reads.getRunById(runId)),
    listRuns: async (roomId, opts) => readScript(db, "list runs", () => reads.listRuns(roomId, opts)),
    pageRuns: async (roomId, query) => readScript(db, "page runs", () => reads.pageRuns(roomId, query)),
    listTasks: async (runId) => readScript(db, "list tasks", () => reads.listTasks(runId)),
    countTaskStatuses: async (runIds) =>
      readScript(db, "count task statuses", () => reads.countTaskStatuses(runIds)),
    getTask: async (runId, taskId) => readScript(db, "get task", () => reads.getTask(runId, taskId)),
    getDefinition: async (roomId, dagId) =>
      readScript(db, "get definition", () => definitions.getDefinition(roomId, dagId)),
    listScheduledDefinitions: async (roomId, opts) =>
      readScript(db, "list scheduled definitions", () => definitions.listScheduledDefinitions(roomId, opts)),
    changeSchedule: async (ctx, roomId, dagId, change, notices) =>
      writeScript(db, `${change.action} schedule`, () =>
        definitions.changeSchedule(ctx, roomId, dagId, change, notices),
      ),
    skipScheduleSlots: async (fence, roomId, dagId, skipped) =>
      writeScript(db, "skip schedule slots", () =>
        definitions.skipScheduleSlots(fence, roomId, dagId, skipped),
      ),
    listDefinitionRuns: async (roomId, dagId, opts) =>
      readScript(db, "list definition runs", () => definitions.listDefinitionRuns(roomId, dagId, opts)),
    listAfterDefinitions: async (roomId, opts) =>
      readScript(db, "list after definitions", () => after.listAfterDefinitions(roomId, opts)),
    unfiredUpstreamRuns: async (roomId, dagId, upstream, since, opts) =>
      readScript(db, "unfired upstream runs", () =>
        after.unfiredUpstreamRuns(roomId, dagId, upstream, since, opts),
      ),
    recordAfterFiring: async (fence, input) =>
      writeScript(db, "record after firing", () => after.recordAfterFiring(fence, input)),
    listAfterFirings: async (roomId, opts) =>
      readScript(db, "list after firings", () => after.listAfterFirings(roomId, opts)),

    claimTask: async (offer) => {
      checkClaim(offer, 1);
      return autocommitScript(db, "claim task", () => claims.claimTask(offer));
    },
    claimTasks: async (offer, max) => {
      checkClaim(offer, max);
      return autocommitScript(db, "claim task", () => claims.claimTasks(offer, max));
    },
    claimDemand: async (roomId, liveWithinMs) =>
      readScript(db, "claim demand", () => claimDemand(roomId, liveWithinMs)),
    queuedShapes: async (roomIds) => readScript(db, "queued shapes", () => queuedShapes(roomIds)),
    // A NOTIFY naming the nodes, so only they claim (sent with the batch: Db.committed).
    wakeNodes: async (roomId, nodeIds) => {
      for (const payload of wakePayloads(roomId, nodeIds)) db.notifySoon(payload);
    },
    renewTaskLease: async (token, leaseMs) =>
      autocommitScript(db, "renew task lease", () => renewOutput.renewTaskLease(token, leaseMs)),
    releaseTask: async (token, why) => writeScript(db, "release task", () => release.releaseTask(token, why)),
    writeTaskOutput: async (token, output, bytes) =>
      autocommitScript(db, "write task output", () => renewOutput.writeTaskOutput(token, output, bytes)),
    finishTask: async (token, result) => finishes.finish(token, result),
    finishAndClaim: async (token, result, offer, max) => finishes.finishAndClaim(token, result, offer, max),

    scheduleStep: async (fence, incremental) => {
      const kept = ScheduleViews.of(db);
      return kept.guard(
        fence,
        writeScript(db, "schedule step", () => step.scheduleStep(kept, fence, incremental)),
      );
    },
    // A look on the pool first (one round trip): a leader reaps on every tick and almost always finds nothing due.
    reap: async (fence) => {
      const look = await readScript(db, "reap", () => reaper.reapLook(fence));
      return look.due ? writeScript(db, "reap", () => reaper.reap(fence)) : look.result;
    },
    // A look on the pool first (one round trip): a leader derives on every tick and almost always finds nothing.
    deriveRunOutcomes: async (fence) =>
      (await readScript(db, "derive run outcomes", () => runOutcomes.runOutcomesDue(fence)))
        ? writeScript(db, "derive run outcomes", () => runOutcomes.deriveRunOutcomes(fence))
        : [],
    setRoomCap: async (roomId, cap, ctx) =>
      writeScript(db, "set room cap", () => caps.setRoomCap(roomId, cap, ctx)),
    getRoomCap: async (roomId) => readScript(db, "get room cap", () => caps.getRoomCap(roomId)),
    roomLoad: async (roomId) => readScript(db, "room load", () => caps.roomLoad(roomId)),
    initRoomCap: async (roomId, cap) => writeScript(db, "init room cap", () => caps.initRoomCap(roomId, cap)),
    initRoomPolicy: async (roomId, policy, setBy) =>
      writeScript(db, "init room policy", () => policies.initRoomPolicy(roomId, policy, setBy)),
    getRoomPolicy: async (roomId) => readScript(db, "get room policy", () => policies.getRoomPolicy(roomId)),
    setRoomPolicy: async (ctx, roomId, policy, by, options) =>
      writeScript(db, "set room policy", () => policies.setRoomPolicy(ctx, roomId, policy, by, options)),
    proposePolicyChange: async (ctx, roomId, proposal) =>
      writeScript(db, "propose a policy change", () => policies.proposePolicyChange(ctx, roomId, proposal)),
    getPolicyProposal: async (roomId, changeId) =>
      readScript(db, "get a policy proposal", () => policies.getPolicyProposal(roomId, changeId)),

    // The node's own beat goes by the lease lane: a node whose beats stop reaching the store is
    // taken for gone (no longer woken for its rooms' tasks, its id free to take). Its edges' beats (heartbeats, a core's batches of up to 200) take
    // the pool: on the lane they would make the node's lease renewals wait behind them.
    heartbeat: async (beat) => autocommitScript(db, "heartbeat", () => nodes.heartbeats([beat]), "lease"),
    heartbeats: async (beats) => autocommitScript(db, "heartbeats", () => nodes.heartbeats(beats)),
    listNodes: async () => readScript(db, "list nodes", () => nodes.listNodes()),
    removeNode: async (session) => autocommitScript(db, "remove node", () => nodes.removeNode(session)),

    enqueueOutbox: async (fence, messages) =>
      writeScript(db, "enqueue outbox", () => outbox.enqueueOutbox(fence, messages)),
    pendingOutbox: async (fence, limit) =>
      readScript(db, "pending outbox", () => outbox.pendingOutbox(fence, limit)),
    markOutboxSent: async (fence, txnId, sentEventId) =>
      writeScript(db, "mark outbox sent", () => outbox.markOutboxSent(fence, txnId, sentEventId)),
    markOutboxFailed: async (fence, txnId, error) =>
      writeScript(db, "mark outbox failed", () => outbox.markOutboxFailed(fence, txnId, error)),
    getOutbox: async (txnId) => readScript(db, "get outbox", () => outbox.getOutbox(txnId)),

    rememberIdempotencyKey: async (scope, key, result) =>
      autocommitScript(db, "remember idempotency key", () =>
        nodes.rememberIdempotencyKey(scope, key, result),
      ),
    readIdempotencyKey: async (scope, key) =>
      readScript(db, "read idempotency key", () => nodes.readIdempotencyKey(scope, key)),
    readEvents: async (roomId, sinceSeq, limit) =>
      writeScript(db, "read events", () => nodes.readEvents(roomId, sinceSeq, limit)),
    runEndedBy: async (roomId, runId) =>
      readScript(db, "read who ended a run", () => nodes.runEndedBy(roomId, runId)),

    pruneBatch: async (fence, limits) => {
      checkPruneLimits(limits);
      return writeScript(db, "prune", () => pruneBatch(fence, limits));
    },
  };
  dbs.set(store, db);
  return store;
}

/** Whether the schema holds dagbot's tables (its schema_version table), without creating anything. */
async function hasSchema(client: pg.PoolClient, schema: string): Promise<boolean> {
  const { rows } = await client.query<{ t: string | null }>("SELECT to_regclass($1) AS t", [
    `${quoteIdent(schema)}.schema_version`,
  ]);
  return rows[0]?.t !== null && rows[0]?.t !== undefined;
}
