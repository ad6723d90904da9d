/**
 * Wires the HTTP API adapter into a node (`dagbot node` and `dagbot start`) when the config has an
 * [http] section: reads through the command table as the caller's token allows, writes through the
 * inbox as the CLI does, readiness from the node's heartbeat.
 */
import type { HandlerContext } from "../app/commands/context.js";
import { withRoomPolicy } from "../app/commands/context.js";
import { readOutcome } from "../app/commands/inbox-step.js";
import { executeCommand } from "../app/commands/table.js";
import type { EngineObserver } from "../app/engine-observer.js";
import type { EngineNode } from "../app/node.js";
import type { Caller } from "../adapters/http/auth.js";
import type { HttpApi } from "../adapters/http/server.js";
import type { NodeConfig } from "../config/node-config.js";
import type { Logger } from "../ports/logger.js";
import type { SenderStanding } from "../ports/permissions.js";
import type { Store } from "../ports/store.js";
import { awaitLocalCommand, commandPolicy, libraryLoader } from "./command-step.js";
import { STRUCTURED_COMMAND_KEY } from "../app/commands/inbox-intent.js";
import { policyConflictAdvice } from "../app/commands/verbs/policy.js";
import { DAGBOT_WORDS, handleWithoutLeader, noLeaderAdvice } from "./leaderless-room.js";

/** An operate token acts as the local operator (like the CLI); a read token as a room member without power. */
function standingOf(caller: Caller): SenderStanding {
  return caller.level === "operate"
    ? { kind: "local-operator" }
    : { kind: "room-member", powerLevel: 0, allowlisted: false, adminLevel: 100 };
}

/**
 * The engine starts before the HTTP API that counts what it observes: this observer goes to the
 * engine (and the chat loops) at once and forwards to the API's metrics once `attach` is called;
 * observations before that are kept (up to 1,000) and replayed then.
 */
export function engineMetricsRelay(): { observer: EngineObserver; attach(api: HttpApi | null): void } {
  let target: EngineObserver | null = null;
  const early: Array<(t: EngineObserver) => void> = [];
  const call = (f: (t: EngineObserver) => void): void => {
    if (target !== null) f(target);
    else if (early.length < 1_000) early.push(f);
  };
  return {
    observer: {
      leaseRenewFailed: (roomId, why) => call((t) => t.leaseRenewFailed?.(roomId, why)),
      storeError: (loop) => call((t) => t.storeError?.(loop)),
    },
    attach(api) {
      if (api === null) {
        early.length = 0;
        return;
      }
      const t = api.metrics.observer();
      target = t;
      for (const f of early.splice(0)) f(t);
    },
  };
}

export async function startNodeHttpApi(
  config: NodeConfig,
  store: Store,
  node: EngineNode,
  logger: Logger,
  /**
   * A chat node's own checks, each "ok" or what is wrong: its homeserver answers; its device is
   * cross-signed and reads what people send (docs/architecture.md §12).
   */
  chatChecks?: () => Promise<Record<string, string>>,
): Promise<HttpApi | null> {
  const http = config.http;
  if (http === null) return null;
  const policy = commandPolicy(config);
  const loadDag = libraryLoader(config.dagLibrary);
  const contextFor = async (roomId: string, caller: Caller): Promise<HandlerContext> => {
    const stored = await store.getRoomPolicy(roomId);
    return {
      store,
      fence: null,
      roomId,
      sender: `http:${caller.name}`,
      eventId: null,
      standing: standingOf(caller),
      policy: stored === null ? policy : withRoomPolicy(policy, stored.policy),
      loadDag,
    };
  };
  // Fastify, its OpenAPI plugin and prom-client (about 10 MB) load only for a node that listens.
  const { startHttpApi } = await import("../adapters/http/server.js");
  return startHttpApi({
    config: http,
    session: `${node.session.nodeId}/${node.session.bootId}`,
    rooms: config.rooms,
    webhooks: config.webhooks,
    store,
    storePoolSize: config.storePoolSize,
    logger,
    read: async (roomId, command, caller) => executeCommand(await contextFor(roomId, caller), command),
    // A policy command in a room no node leads is applied here, under the room's lease for it: the
    // way out of a room whose nodes' [permissions] disagree with its policy (leaderless-room.ts).
    noLeader: async (roomId, command) =>
      command.verb === "policy" ? null : noLeaderAdvice(store, config, roomId),
    awaitCommand: async (eventId, timeoutMs) => {
      const row = await store.getInboxEvent(eventId);
      const data = row?.content[STRUCTURED_COMMAND_KEY] as { verb?: unknown } | undefined;
      if (row !== null && row.status === "new" && data?.verb === "policy")
        await handleWithoutLeader(store, config, logger, row.roomId, eventId, row.sender);
      const answer = await awaitLocalCommand(store, eventId, timeoutMs, policy);
      if (answer === null) return null;
      // The row's outcome as the reply was rendered from it (publish and decisions store only ids).
      return { outcome: await readOutcome({ store, policy }, answer.row) };
    },
    leaderTerm: (roomId) => node.leading(roomId)?.term ?? null,
    outboxPending: async (roomId) => {
      const fence = node.leading(roomId);
      return fence === null ? null : (await store.pendingOutbox(fence, 10_000)).length;
    },
    readiness: async () => {
      const mine = (await store.listNodes()).find(
        (n) => n.session.nodeId === node.session.nodeId && n.session.bootId === node.session.bootId,
      );
      const checks: Record<string, string> = {
        heartbeat:
          mine === undefined
            ? "no heartbeat of this node in the store yet"
            : mine.heartbeatAgeMs <= config.lease.ttlMs
              ? "ok"
              : `the last heartbeat is ${mine.heartbeatAgeMs} ms old`,
      };
      // A node held back from leading by its [permissions] is not ready: the room may have no leader.
      const conflicts = [...node.policyConflicts()];
      checks["policy"] =
        conflicts.length === 0
          ? "ok"
          : conflicts.map(([roomId, c]) => policyConflictAdvice(roomId, c, DAGBOT_WORDS)).join(" | ");
      if (chatChecks !== undefined) Object.assign(checks, await chatChecks());
      return checks;
    },
    snapshot: async (roomId, runId, caller) => {
      const ctx = await contextFor(roomId, caller);
      if (runId !== null) {
        const o = await executeCommand(ctx, { verb: "status", id: runId });
        return o.kind === "status"
          ? { room: roomId, run: o.run, summary: o.summary, tasks: o.tasks, at: o.at }
          : { room: roomId, run: null, at: await store.now() };
      }
      const list = await executeCommand(ctx, { verb: "list" });
      const cap = await store.getRoomCap(roomId);
      const lease = await store.getLease(roomId);
      return {
        room: roomId,
        runs: list.kind === "list" ? list.runs : [],
        roomCap: cap,
        leader: lease === null ? null : { nodeId: lease.holder?.nodeId ?? null, term: lease.term },
        at: list.kind === "list" ? list.at : await store.now(),
      };
    },
  });
}
