/**
 * The node's HTTP API (issue 14) on Fastify 5: every route's input and output is a zod schema (the
 * same schemas validate requests, serialise responses and make /openapi.json). Writes become inbox
 * rows exactly like chat commands, so the room's leader handles each once and the answer is its
 * stored outcome; reads run the same command table directly. Errors are RFC 9457 problem details.
 *
 * Everything a caller sends is untrusted: bodies are size-limited and schema-checked, ids match the
 * DAG id pattern, commands are built from validated fields (never from raw text the caller wrote,
 * except a DAG document, which the leader parses as data), and nothing reaches a shell.
 */
import { randomUUID } from "node:crypto";
import fastifySwagger from "@fastify/swagger";
import Fastify from "fastify";
import type { FastifyError, FastifyReply, FastifyRequest } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import {
  hasZodFastifySchemaValidationErrors,
  jsonSchemaTransform,
  jsonSchemaTransformObject,
  serializerCompiler,
  validatorCompiler,
} from "fastify-type-provider-zod";
import type { z } from "zod";
import type { Outcome } from "../../app/commands/outcome.js";
import type { HttpConfig, HttpTokenLevel } from "../../config/node-config.js";
import { canonicalJson } from "../../domain/canonical-hash.js";
import type { Command } from "../../domain/commands.js";
import { parseCommand } from "../../domain/commands.js";
import type { Logger } from "../../ports/logger.js";
import type { Store } from "../../ports/store.js";
import type { Caller } from "./auth.js";
import { allows, sha256Hex, tokenVerifier } from "./auth.js";
import { EventHub } from "./event-hub.js";
import type { StreamStats } from "./event-stream.js";
import { streamEvents } from "./event-stream.js";
import { NodeMetrics } from "./metrics.js";
import type { Problem, ProblemCode } from "./problem.js";
import { PROBLEM_CONTENT_TYPE, problem } from "./problem.js";
import * as s from "./schemas.js";

export interface CommandAnswer {
  outcome: Outcome | null;
  /** The reply as chat shows it, plain text. */
  text: string | null;
}

export interface HttpApiDeps {
  config: HttpConfig;
  /** This node's session as the event log writes it ("nodeId/bootId"). */
  session: string;
  rooms: readonly string[];
  store: Store;
  logger: Logger;
  /** Runs a read command of the command table for the caller (no write, no inbox row). */
  read(roomId: string, command: Command, caller: Caller): Promise<Outcome>;
  /** Waits until the room's leader handled and answered the inbox row; null after `timeoutMs`. */
  awaitCommand(eventId: string, timeoutMs: number): Promise<CommandAnswer | null>;
  /** The term while this node leads the room, else null. */
  leaderTerm(roomId: string): number | null;
  /** Unsent outbox messages of a room this node leads; null when it does not. */
  outboxPending(roomId: string): Promise<number | null>;
  /** Readiness checks beyond the store: name → "ok" or what is wrong. */
  readiness(): Promise<Record<string, string>>;
  /** The room's state for an event stream's snapshot. */
  snapshot(roomId: string, runId: string | null, caller: Caller): Promise<unknown>;
}

export interface HttpApi {
  /** The bound port (useful with port 0). */
  readonly port: number;
  readonly metrics: NodeMetrics;
  close(): Promise<void>;
}

declare module "fastify" {
  interface FastifyContextConfig {
    /** Who may call the route: a token level, or "health"/"metrics" (open or not by config). */
    access?: HttpTokenLevel | "health" | "metrics";
  }
  interface FastifyRequest {
    caller: Caller | null;
  }
}

class ProblemError extends Error {
  constructor(readonly problem: Problem) {
    super(problem.detail ?? problem.title);
  }
}

const fail = (status: number, code: ProblemCode, detail?: string, extra?: Record<string, unknown>): never => {
  throw new ProblemError(problem(status, code, detail, extra));
};

/** Printable ASCII, as an HTTP header value safely is; long enough for a UUID or a hash. */
const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;

const problems = { "4xx": s.problemSchema, "5xx": s.problemSchema };

export async function startHttpApi(deps: HttpApiDeps): Promise<HttpApi> {
  const { config, store, logger } = deps;
  const log = logger.child({ component: "http" });
  const verify = tokenVerifier(config.tokens);
  const hub = new EventHub(store, log);
  const streams: StreamStats = { open: 0, dropped: 0, snapshots: 0 };
  let storeErrors = 0;
  const metrics = new NodeMetrics(deps.session, {
    rooms: deps.rooms,
    queueDepth: async (roomId) => {
      try {
        const runs = await store.listRuns(roomId, { statuses: ["running", "canceling"], limit: 1000 });
        let n = 0;
        for (const run of runs)
          n += (await store.listTasks(run.runId)).filter((t) => t.status === "queued").length;
        return n;
      } catch {
        storeErrors += 1;
        return 0;
      }
    },
    leaderTerm: deps.leaderTerm,
    outboxPending: async (roomId) => {
      try {
        return await deps.outboxPending(roomId);
      } catch {
        storeErrors += 1;
        return null;
      }
    },
    storeErrors: () => storeErrors + hub.readErrors,
    streamClients: () => streams.open,
    streamDrops: () => streams.dropped,
  });
  const metricsListener = metrics.listener();
  for (const room of deps.rooms) void hub.subscribe(room, metricsListener);

  // No Fastify logger: it would log request headers (bearer tokens) on errors. We log our own lines.
  const app = Fastify({
    logger: false,
    bodyLimit: config.bodyLimitBytes,
    routerOptions: { maxParamLength: 300 },
    requestTimeout: 30_000,
    onProtoPoisoning: "error",
    onConstructorPoisoning: "error",
    return503OnClosing: true,
    forceCloseConnections: true,
  }).withTypeProvider<ZodTypeProvider>();
  // JSON only: Fastify's built-in text/plain parser would hand a string to the routes' schemas.
  app.removeContentTypeParser("text/plain");
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  app.decorateRequest("caller", null);

  await app.register(fastifySwagger, {
    openapi: {
      openapi: "3.1.0",
      info: {
        title: "dagbot HTTP API",
        version: "1",
        description:
          "Publish, confirm, cancel and read DAG runs of a dagbot room, follow its event log. " +
          "Errors are application/problem+json (RFC 9457) with a stable type urn:dagbot:problem:<code>.",
      },
      components: { securitySchemes: { bearer: { type: "http", scheme: "bearer" } } },
      security: [{ bearer: [] }],
    },
    transform: jsonSchemaTransform,
    // The schemas with a meta id (RunSummary, TaskLine, ...) become components the paths refer to.
    transformObject: jsonSchemaTransformObject,
  });

  const sendProblem = (reply: FastifyReply, p: Problem): FastifyReply => {
    if (p.status === 401) reply.header("www-authenticate", 'Bearer realm="dagbot"');
    return reply.code(p.status).type(PROBLEM_CONTENT_TYPE).send(p);
  };

  app.setErrorHandler((err: FastifyError, req, reply) => {
    if (err instanceof ProblemError)
      return sendProblem(reply, { ...err.problem, instance: req.url.split("?")[0] });
    if (hasZodFastifySchemaValidationErrors(err)) {
      const errors = err.validation.map((v) => ({
        path: `${err.validationContext ?? "request"}${v.instancePath.replaceAll("/", ".")}`,
        message: v.message ?? "invalid",
      }));
      return sendProblem(
        reply,
        problem(400, "bad-request", errors.map((e) => `${e.path}: ${e.message}`).join("; "), { errors }),
      );
    }
    if (err.code === "FST_ERR_CTP_BODY_TOO_LARGE")
      return sendProblem(reply, problem(413, "body-too-large", `at most ${config.bodyLimitBytes} bytes`));
    if (err.code === "FST_ERR_CTP_INVALID_MEDIA_TYPE")
      return sendProblem(
        reply,
        problem(415, "unsupported-media-type", "send Content-Type: application/json"),
      );
    if (typeof err.statusCode === "number" && err.statusCode >= 400 && err.statusCode < 500)
      return sendProblem(reply, problem(err.statusCode, "bad-request", err.message.slice(0, 300)));
    // Unexpected: log what and where (no headers, no body), answer without details.
    storeErrors += 1;
    log.error(
      { route: req.routeOptions.url, method: req.method, err: String(err).slice(0, 500) },
      "http request failed",
    );
    return sendProblem(reply, problem(500, "internal", "see the node's log"));
  });
  app.setNotFoundHandler((req, reply) =>
    sendProblem(reply, problem(404, "not-found", `${req.method} ${req.url.split("?")[0]}`)),
  );

  app.addHook("onRequest", async (req) => {
    const access = req.routeOptions.config.access;
    if (access === undefined) return;
    if (access === "health" && config.openHealth) return;
    if (access === "metrics" && config.openMetrics) return;
    const caller = verify(req.headers.authorization);
    if (caller === null) fail(401, "unauthorized", "send Authorization: Bearer <token>");
    req.caller = caller;
    const needed: HttpTokenLevel = access === "operate" ? "operate" : "read";
    if (!allows(caller!.level, needed)) fail(403, "forbidden", `this route needs a token of level ${needed}`);
  });
  app.addHook("onResponse", async (req, reply) => {
    const route = req.routeOptions.url ?? "unmatched";
    metrics.httpRequests.inc({ route, method: req.method, status: String(reply.statusCode) });
    if (route !== "/v1/events")
      metrics.httpDuration.observe({ route, method: req.method }, reply.elapsedTime / 1000);
  });

  const pickRoom = (room: string | undefined): string => {
    if (room === undefined) {
      if (deps.rooms.length === 1) return deps.rooms[0]!;
      return fail(400, "bad-request", `this node serves ${deps.rooms.length} rooms: name one with ?room=`);
    }
    if (!deps.rooms.includes(room)) fail(404, "unknown-room", `this node does not serve room "${room}"`);
    return room;
  };
  const callerOf = (req: FastifyRequest): Caller => req.caller ?? fail(401, "unauthorized");

  /** The problem a read or write outcome that is not a success maps to. */
  const outcomeProblem = (o: Outcome, text: string | null): never => {
    const detail = text ?? undefined;
    switch (o.kind) {
      case "not-found":
        return fail(404, o.taskId === null ? "run-not-found" : "task-not-found", detail, {
          didYouMean: o.didYouMean,
          ...(o.taskId === null ? {} : { knownTasks: o.known }),
        });
      case "refused":
        return fail(403, "refused", o.reason);
      case "conflict":
        return fail(409, "conflict", detail, {
          dagId: o.dagId,
          existing: o.existing,
          suggestion: o.suggestion,
        });
      case "invalid-dag":
        return fail(422, "invalid-dag", detail, { issues: o.issues, moreIssues: o.moreIssues });
      case "library-error":
        return fail(422, "library-error", o.message);
      case "decision":
        return fail(409, "wrong-status", detail, { run: o.run });
      case "nothing-to-retry":
        return fail(409, "nothing-to-retry", detail, { why: o.why, run: o.run });
      case "command-error":
        return fail(400, "command-error", o.message);
      case "not-leader":
        return fail(503, "not-leader", detail);
      default:
        log.error({ kind: o.kind }, "http: unexpected command outcome");
        return fail(500, "internal", "unexpected outcome");
    }
  };

  const read = async (roomId: string, command: Command, caller: Caller): Promise<Outcome> => {
    try {
      return await deps.read(roomId, command, caller);
    } catch (err) {
      storeErrors += 1;
      log.warn({ room: roomId, err: String(err).slice(0, 300) }, "http read failed");
      return fail(503, "store-unavailable", "the store could not be read; try again");
    }
  };

  /**
   * A write: the command text goes into the room's inbox under an event id that the Idempotency-Key
   * fixes, so concurrent retries make one row (insert-or-ignore), which the leader handles once; every
   * caller waits for the same stored outcome.
   */
  const submit = async (
    req: FastifyRequest,
    roomId: string,
    text: string,
  ): Promise<{ commandId: string; answer: CommandAnswer; key: string | null }> => {
    const caller = callerOf(req);
    // Built from validated fields, so a grammar error here is ours; checked before anything is stored.
    const parsed = parseCommand({ body: text });
    if (parsed.kind !== "command") {
      const code = parsed.kind === "error" ? parsed.error.code : "unknown-command";
      fail(400, `command-error.${code}`, parsed.kind === "error" ? parsed.error.message : "not a command");
    }
    const keyHeader = req.headers["idempotency-key"];
    let eventId = `http.${randomUUID()}`;
    let key: string | null = null;
    if (keyHeader !== undefined) {
      if (typeof keyHeader !== "string" || !IDEMPOTENCY_KEY.test(keyHeader))
        fail(400, "bad-idempotency-key", "1-255 printable ASCII characters");
      key = keyHeader as string;
      const request = sha256Hex(
        `${req.method} ${req.routeOptions.url}\n${roomId}\n${canonicalJson(req.params ?? {})}\n${canonicalJson(req.body ?? null)}`,
      );
      eventId = `http.${sha256Hex(`${caller.name}\n${key}`).slice(0, 40)}`;
      const remembered = await storeCall("store an idempotency key", () =>
        store.rememberIdempotencyKey(`http:${caller.name}`, key!, { request, eventId }),
      );
      if (remembered.kind === "existing" && remembered.result["request"] !== request)
        fail(422, "idempotency-key-reused", "this key was first used with another method, path or body");
    }
    await storeCall("queue a command", async () =>
      store.insertInboxEvent({
        eventId,
        roomId,
        sender: `http:${caller.name}`,
        originServerTs: await store.now(),
        content: { msgtype: "m.text", body: text },
        seenBy: `http:${deps.session}`,
      }),
    );
    log.info(
      {
        room: roomId,
        command: eventId,
        by: caller.name,
        verb: parsed.kind === "command" ? parsed.command.verb : null,
      },
      "http command queued",
    );
    const answer = await deps.awaitCommand(eventId, config.commandTimeoutMs);
    if (answer === null)
      return fail(
        504,
        "leader-timeout",
        `no leader of the room answered within ${config.commandTimeoutMs} ms`,
        {
          commandId: eventId,
        },
      );
    return { commandId: eventId, answer, key };
  };

  /** A store call of a write; a failure is a 503 the caller may retry with the same Idempotency-Key. */
  const storeCall = async <R>(what: string, call: () => Promise<R>): Promise<R> => {
    try {
      return await call();
    } catch (err) {
      storeErrors += 1;
      log.warn({ err: String(err).slice(0, 300) }, `http: could not ${what}`);
      return fail(
        503,
        "store-unavailable",
        "the store could not be written; retry with the same Idempotency-Key",
      );
    }
  };

  type Answer<T extends z.ZodType> = { status: number; body: z.output<T> & Record<string, unknown> };

  const writeRoute = <B extends z.ZodType, P extends z.ZodType, T extends z.ZodType>(
    method: "POST" | "PUT",
    url: string,
    summary: string,
    params: P | undefined,
    body: B,
    out: T,
    command: (args: { params: z.output<P>; body: z.output<B> }) => { room: string | undefined; text: string },
    answer: (o: Outcome, base: { commandId: string; text: string | null }) => Answer<T> | null,
  ): void => {
    app.route({
      method,
      url,
      config: { access: "operate" },
      schema: {
        summary,
        ...(params === undefined ? {} : { params }),
        querystring: s.roomQuery,
        body,
        response: { 200: out, 201: out, ...problems },
      },
      // The generic route's reply type cannot be inferred through P, B and T; the schema checks it.
      handler: (async (req: FastifyRequest, reply: FastifyReply) => {
        const { text, room } = command({ params: req.params as z.output<P>, body: req.body as z.output<B> });
        const roomId = pickRoom(room ?? (req.query as { room?: string }).room);
        const { commandId, answer: a, key } = await submit(req, roomId, text);
        let result: { status: number; body: Record<string, unknown> };
        try {
          if (a.outcome === null) fail(500, "internal", "the command has no stored outcome");
          const ok = answer(a.outcome!, { commandId, text: a.text });
          result = ok ?? outcomeProblem(a.outcome!, a.text);
        } catch (err) {
          if (!(err instanceof ProblemError)) throw err;
          result = {
            status: err.problem.status,
            body: { ...err.problem, commandId, instance: req.url.split("?")[0] },
          };
        }
        if (key !== null) {
          // The first answer is kept: a repeat gets it byte for byte, even after the run moved on.
          const kept = await storeCall("store an answer", () =>
            store.rememberIdempotencyKey(`http-answer:${callerOf(req).name}`, key, result),
          );
          if (kept.kind === "existing") result = kept.result as typeof result;
        }
        if (result.status >= 400) reply.type(PROBLEM_CONTENT_TYPE);
        return reply.code(result.status).send(result.body as never);
      }) as never,
    });
  };

  // --- Writes ---------------------------------------------------------------------------------

  writeRoute(
    "POST",
    "/v1/dags",
    "Publish a DAG (a run that waits for confirmation unless the publisher is on auto_confirm)",
    undefined,
    s.publishBody,
    s.publishedSchema,
    ({ body }) => ({ room: undefined, text: publishText(body) }),
    (o, base) =>
      o.kind === "published"
        ? {
            status: 201,
            body: {
              ...base,
              result: "published" as const,
              run: o.run,
              needsConfirmation: o.needsConfirmation,
            },
          }
        : o.kind === "exists"
          ? {
              status: 200,
              body: {
                ...base,
                result: "exists" as const,
                run: o.run,
                needsConfirmation: o.run.status === "pending",
              },
            }
          : null,
  );
  for (const verb of ["confirm", "reject", "cancel"] as const) {
    writeRoute(
      "POST",
      `/v1/runs/:id/${verb}`,
      `${verb[0]!.toUpperCase()}${verb.slice(1)} a run`,
      s.runParams,
      verb === "confirm" ? s.confirmBody : s.emptyBody,
      s.decisionSchema,
      ({ params, body }) => ({
        room: undefined,
        text: `!dag ${verb} ${params.id}${hashOf(body)}`,
      }),
      (o, base) =>
        o.kind === "decision" && o.result !== "wrong-status"
          ? { status: 200, body: { ...base, result: o.result, run: o.run } }
          : null,
    );
  }
  writeRoute(
    "POST",
    "/v1/runs/:id/retry",
    "Start a new run of the part of a run that did not succeed",
    s.runParams,
    s.emptyBody,
    s.retriedSchema,
    ({ params }) => ({ room: undefined, text: `!dag retry ${params.id}` }),
    (o, base) =>
      o.kind === "retried"
        ? {
            status: 201,
            body: {
              ...base,
              from: o.from,
              run: o.run,
              taskIds: o.taskIds,
              needsConfirmation: o.needsConfirmation,
            },
          }
        : null,
  );
  writeRoute(
    "PUT",
    "/v1/rooms/:room/cap",
    "Set the room's cap on active tasks (0 pauses the room)",
    s.roomParams,
    s.capBody,
    s.capSchema,
    ({ params, body }) => ({ room: params.room, text: `!dag cap ${body.cap}` }),
    (o, base) =>
      o.kind === "cap" ? { status: 200, body: { ...base, cap: o.cap, previous: o.previous } } : null,
  );

  // --- Reads ----------------------------------------------------------------------------------

  app.get(
    "/v1/runs",
    {
      config: { access: "read" },
      schema: {
        summary: "The room's recent runs",
        querystring: s.listQuery,
        response: { 200: s.runListSchema, ...problems },
      },
    },
    async (req) => {
      const roomId = pickRoom(req.query.room);
      const o = await read(roomId, { verb: "list" }, callerOf(req));
      if (o.kind !== "list") return outcomeProblem(o, null);
      return { room: roomId, runs: o.runs, at: o.at };
    },
  );
  app.get(
    "/v1/runs/:id",
    {
      config: { access: "read" },
      schema: {
        summary: "One run with its tasks",
        params: s.runParams,
        querystring: s.roomQuery,
        response: { 200: s.runStatusSchema, ...problems },
      },
    },
    async (req) => {
      const roomId = pickRoom(req.query.room);
      const o = await read(roomId, { verb: "status", id: req.params.id }, callerOf(req));
      if (o.kind !== "status") return outcomeProblem(o, null);
      return {
        room: roomId,
        run: o.run,
        summary: o.summary,
        tasks: o.tasks,
        ...(o.roomCap === undefined ? {} : { roomCap: o.roomCap }),
        at: o.at,
      };
    },
  );
  app.get(
    "/v1/runs/:id/tasks/:task/logs",
    {
      config: { access: "read" },
      schema: {
        summary: "A task's captured output (operators only unless the room's policy says logs anyone)",
        params: s.taskParams,
        querystring: s.roomQuery,
        response: { 200: s.logsSchema, ...problems },
      },
    },
    async (req) => {
      const roomId = pickRoom(req.query.room);
      const o = await read(roomId, { verb: "logs", id: req.params.id, task: req.params.task }, callerOf(req));
      if (o.kind !== "logs") return outcomeProblem(o, null);
      return {
        room: roomId,
        run: o.run,
        task: o.task,
        output: o.output,
        omittedChars: o.omittedChars,
        at: o.at,
      };
    },
  );
  app.get(
    "/v1/nodes",
    {
      config: { access: "read" },
      schema: {
        summary: "Nodes, their heartbeats and the room's leader",
        querystring: s.roomQuery,
        response: { 200: s.nodesSchema, ...problems },
      },
    },
    async (req) => {
      const roomId = pickRoom(req.query.room);
      const o = await read(roomId, { verb: "nodes" }, callerOf(req));
      if (o.kind !== "nodes") return outcomeProblem(o, null);
      return { room: roomId, nodes: o.nodes, leader: o.leader, staleAfterMs: o.staleAfterMs, at: o.at };
    },
  );

  app.get(
    "/v1/events",
    {
      config: { access: "read" },
      schema: {
        summary:
          "The room's event log as Server-Sent Events (text/event-stream): id = sequence number; resume with Last-Event-ID or ?after=",
        querystring: s.eventsQuery,
      },
    },
    async (req, reply) => {
      const caller = callerOf(req);
      const roomId = pickRoom(req.query.room);
      const header = req.headers["last-event-id"];
      let after: number | null = req.query.after ?? null;
      if (typeof header === "string" && header !== "") {
        if (!/^\d{1,15}$/.test(header)) fail(400, "bad-request", "Last-Event-ID must be a sequence number");
        after = Number(header);
      }
      const runId = req.query.run ?? null;
      reply.hijack();
      try {
        await streamEvents(
          reply.raw,
          hub,
          store,
          {
            roomId,
            runId,
            after,
            heartbeatMs: config.heartbeatMs,
            bufferBytes: config.sseBufferBytes,
            snapshot: () => deps.snapshot(roomId, runId, caller),
          },
          streams,
        );
      } catch (err) {
        storeErrors += 1;
        log.warn({ room: roomId, err: String(err).slice(0, 300) }, "event stream failed");
        reply.raw.destroy();
      }
    },
  );

  // --- Operations -----------------------------------------------------------------------------

  app.get(
    "/healthz",
    {
      config: { access: "health" },
      schema: { summary: "The process is alive", response: { 200: s.healthSchema } },
    },
    async () => ({ ok: true, checks: {} }),
  );
  app.get(
    "/readyz",
    {
      config: { access: "health" },
      schema: {
        summary:
          "The store is reachable and the node's heartbeat fresh (and, for a chat node, the homeserver reachable)",
        response: { 200: s.healthSchema, 503: s.healthSchema },
      },
    },
    async (_req, reply) => {
      const checks: Record<string, string> = {};
      try {
        await store.now();
        checks["store"] = "ok";
      } catch (err) {
        storeErrors += 1;
        checks["store"] = `unreachable: ${String(err).slice(0, 200)}`;
      }
      if (checks["store"] === "ok") {
        try {
          Object.assign(checks, await deps.readiness());
        } catch (err) {
          checks["node"] = String(err).slice(0, 200);
        }
      }
      const ok = Object.values(checks).every((v) => v === "ok");
      return reply.code(ok ? 200 : 503).send({ ok, checks });
    },
  );
  app.get(
    "/metrics",
    { config: { access: "metrics" }, schema: { summary: "Prometheus metrics", hide: true } },
    async (_req, reply) => {
      const text = await metrics.registry.metrics();
      return reply.type(metrics.registry.contentType).send(text);
    },
  );
  app.get("/openapi.json", { schema: { hide: true } }, async () => app.swagger());

  try {
    await app.listen({ host: config.host, port: config.port });
  } catch (err) {
    // Nothing may keep the process alive once the caller gives up (the log readers above).
    await hub.close();
    await app.close().catch(() => {});
    throw err;
  }
  const address = app.server.address();
  const port = typeof address === "object" && address !== null ? address.port : config.port;
  log.info({ listen: `${config.host}:${port}`, callers: config.tokens.length }, "http api listening");
  return {
    port,
    metrics,
    async close() {
      await hub.close();
      await app.close();
    },
  };
}

/** The hash a confirm body names, as the command's second argument. */
function hashOf(body: unknown): string {
  const hash = (body as { hash?: unknown } | null | undefined)?.hash;
  return typeof hash === "string" ? ` ${hash}` : "";
}

/** The `!dag publish` text of a publish body: a fenced block of the document, or the library name. */
function publishText(body: z.output<typeof s.publishBody>): string {
  if ("library" in body) return `!dag publish ${body.library}`;
  if ("document" in body) {
    // Backticks only occur inside JSON strings, where \u0060 means the same: the fence cannot be closed early.
    return `!dag publish\n\`\`\`json\n${JSON.stringify(body.document).replaceAll("`", "\\u0060")}\n\`\`\``;
  }
  if (body.text.includes("```"))
    fail(400, "bad-request", "text must not contain ``` (send a JSON document instead)");
  return `!dag publish\n\`\`\`${body.format}\n${body.text}\n\`\`\``;
}
