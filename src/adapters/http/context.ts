/**
 * What the HTTP API's route modules share: the node's capabilities (HttpApiDeps), and per server the
 * helpers every route uses (the room a request names, its caller, store-error counting).
 */
import type { FastifyBaseLogger, FastifyInstance, FastifyRequest, RawServerDefault } from "fastify";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import type { Outcome } from "../../app/commands/outcome.js";
import type { HttpConfig, WebhookConfig } from "../../config/node-config.js";
import type { Command, VerbRegistry } from "../../app/commands/verbs/index.js";
import type { Clock } from "../../ports/clock.js";
import type { Logger } from "../../ports/logger.js";
import type { Store } from "../../ports/store.js";
import type { Caller } from "./auth.js";
import type { EventHub } from "./event-hub.js";
import type { StreamStats } from "./event-stream.js";
import { fail } from "./problem.js";
import { httpAnswerOf, plainTextOf } from "../../app/commands/outcome-table.js";
import { COMMANDS } from "../../app/commands/verbs/index.js";
import { httpIdiom } from "./http-idiom.js";

export interface CommandAnswer {
  outcome: Outcome | null;
}

export interface HttpApiDeps {
  config: HttpConfig;
  /** This node's session as the event log writes it ("nodeId/bootId"). */
  session: string;
  rooms: readonly string[];
  store: Store;
  logger: Logger;
  /**
   * The store pool's size (store_pool_size): how many of the edges' claims go to the store at once
   * (src/app/claim-gate.ts). Default 2, the config's default.
   */
  storePoolSize?: number;
  /** Time for the window that gathers edges' heartbeats into one commit (default: the system clock). */
  clock?: Clock;
  /** Runs a read command of the command table for the caller (no write, no inbox row). */
  read(roomId: string, command: Command, caller: Caller): Promise<Outcome>;
  /** Waits until the room's leader handled and answered the inbox row; null after `timeoutMs`. */
  awaitCommand(eventId: string, timeoutMs: number): Promise<CommandAnswer | null>;
  /**
   * Why a command sent to this room now would find no leader, when that is known (its nodes'
   * [permissions] disagree with its policy), with what ends it; null when it may be queued.
   */
  noLeader?(roomId: string, command: Command): Promise<string | null>;
  /** The term while this node leads the room, else null. */
  leaderTerm(roomId: string): number | null;
  /** Unsent outbox messages of a room this node leads; null when it does not. */
  outboxPending(roomId: string): Promise<number | null>;
  /** Readiness checks beyond the store: name → "ok" or what is wrong. */
  readiness(): Promise<Record<string, string>>;
  /** The verbs whose routes to serve (default: every verb of verbs/index.ts). */
  registry?: VerbRegistry;
  /** The webhook endpoints to serve at POST /v1/hooks/{id} (none by default). */
  webhooks?: readonly WebhookConfig[];
  /** The room's state for an event stream's snapshot. */
  snapshot(roomId: string, runId: string | null, caller: Caller): Promise<unknown>;
}

export type ZodApp = FastifyInstance<
  RawServerDefault,
  IncomingMessage,
  ServerResponse,
  FastifyBaseLogger,
  ZodTypeProvider
>;

export interface RouteContext {
  deps: HttpApiDeps;
  log: Logger;
  hub: EventHub;
  streams: StreamStats;
  /** The room a request names (or the node's only room); a problem when the node does not serve it. */
  pickRoom(room: string | undefined): string;
  callerOf(req: FastifyRequest): Caller;
  /** Counts a failed store call for the store-errors metric. */
  storeError(): void;
}

/** The problem an outcome that is not a success maps to (the outcome table says which). */
export function outcomeProblem(log: Logger, o: Outcome, _text: string | null): never {
  const mapped = httpAnswerOf(o);
  const detail = plainTextOf(o, httpIdiom(COMMANDS));
  if (mapped.ok) {
    log.error({ kind: o.kind }, "http: unexpected command outcome");
    return fail(500, "internal", "unexpected outcome");
  }
  return fail(mapped.status, mapped.problem, detail, { ...(mapped.extra ?? {}) });
}
