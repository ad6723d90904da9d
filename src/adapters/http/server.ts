/**
 * The node's HTTP API on Fastify 5: every route's input and output is a zod schema (the
 * same schemas validate requests, serialise responses and make /openapi.json). Writes become inbox
 * rows exactly like chat commands, so the room's leader handles each once and the answer is its
 * stored outcome; reads run the same command table directly. Errors are RFC 9457 problem details.
 *
 * Everything a caller sends is untrusted: bodies are size-limited and schema-checked, ids match the
 * DAG id pattern, commands are built from validated fields (never from raw text the caller wrote,
 * except a DAG document, which the leader parses as data), and nothing reaches a shell.
 */
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
import type { HttpTokenLevel } from "../../config/node-config.js";
import type { Caller } from "./auth.js";
import { allows, mayUseRoom, tokenVerifier } from "./auth.js";
import { jsonDepthExceeds } from "./json-depth.js";
import { allowedMethods } from "./allowed-methods.js";
import { EventHub } from "./event-hub.js";
import type { StreamStats } from "./event-stream.js";
import { NodeMetrics } from "./metrics.js";
import type { HttpApiDeps, RouteContext } from "./context.js";
import type { Problem } from "./problem.js";
import { PROBLEM_CONTENT_TYPE, ProblemError, fail, problem } from "./problem.js";
import { registerReadRoutes } from "./read-routes.js";
import { registerVerbRoutes } from "./verb-routes.js";
import { registerHookRoutes } from "./hook-routes.js";
import { registerEdgeRoutes } from "./edge-routes.js";
import * as s from "./schemas.js";

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

export type { CommandAnswer, HttpApiDeps } from "./context.js";

/** Deeper than any DAG document or command body needs (a DAG nests about 6 levels). */
export const MAX_JSON_DEPTH = 64;

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
    requestTimeout: config.requestTimeoutMs,
    keepAliveTimeout: config.keepAliveTimeoutMs,
    http: {
      headersTimeout: config.headerTimeoutMs,
      // Node checks the header and request timeouts on this period (30 s by default, which would
      // let a slow-headers client hold its connection that much longer than header_timeout).
      connectionsCheckingInterval: Math.min(1_000, Math.max(100, Math.floor(config.headerTimeoutMs / 4))),
    },
    onProtoPoisoning: "error",
    onConstructorPoisoning: "error",
    return503OnClosing: true,
    forceCloseConnections: true,
  }).withTypeProvider<ZodTypeProvider>();
  // A connection past the cap is closed as soon as it is accepted (event streams count too).
  app.server.maxConnections = config.maxConnections;
  // JSON only: Fastify's built-in text/plain parser would hand a string to the routes' schemas.
  app.removeContentTypeParser("text/plain");
  // The nesting depth is checked before parsing (one pass over the text, no recursion): a deeply
  // nested body would otherwise overflow the stack of whatever walks the parsed value later.
  const parseJson = app.getDefaultJsonParser("error", "error");
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser("application/json", { parseAs: "string" }, (req, body, done) => {
    const text = typeof body === "string" ? body : body.toString("utf8");
    if (jsonDepthExceeds(text, MAX_JSON_DEPTH)) {
      done(new ProblemError(problem(400, "bad-request", `JSON nested deeper than ${MAX_JSON_DEPTH} levels`)));
      return;
    }
    parseJson(req, text, done);
  });
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

  app.setErrorHandler((err: FastifyError | ProblemError, req, reply) => {
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
    if (err.code === "FST_ERR_CTP_BODY_TOO_LARGE") {
      // A route's own limit (the edge routes') is the one it was over.
      const limitBytes = req.routeOptions.bodyLimit ?? config.bodyLimitBytes;
      return sendProblem(
        reply,
        problem(413, "body-too-large", `the body may be at most ${limitBytes} bytes`, { limitBytes }),
      );
    }
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
  app.setNotFoundHandler((req, reply) => {
    const path = req.url.split("?")[0];
    const allow = allowedMethods(app, req.url);
    if (allow.length === 0) return sendProblem(reply, problem(404, "not-found", `${req.method} ${path}`));
    reply.header("allow", allow.join(", "));
    return sendProblem(
      reply,
      problem(405, "method-not-allowed", `${path} takes ${allow.join(", ")}, not ${req.method}`),
    );
  });

  app.addHook("onRequest", async (req) => {
    const access = req.routeOptions.config.access;
    if (access === undefined) return;
    if (access === "health" && config.openHealth) return;
    if (access === "metrics" && config.openMetrics) return;
    const caller = verify(req.headers.authorization);
    if (caller === null) fail(401, "unauthorized", "send Authorization: Bearer <token>");
    req.caller = caller;
    const needed: HttpTokenLevel = access === "operate" || access === "edge" ? access : "read";
    if (!allows(caller!.level, needed)) fail(403, "forbidden", `this route needs a token of level ${needed}`);
    // Metrics cover every room of the node (their labels name them): not for a token limited to some.
    if (access === "metrics" && caller!.rooms !== undefined)
      fail(403, "forbidden", "this token is limited to rooms; metrics cover every room of the node");
  });
  // A token limited to rooms: every route names its room in `:room` or `?room=` (or the node serves
  // one room), so this one check, after validation, covers reads, writes and event streams. Another
  // room is answered exactly like a room the node does not serve.
  app.addHook("preHandler", async (req) => {
    const caller = req.caller;
    if (caller === null || caller.rooms === undefined) return;
    const named =
      (req.params as { room?: unknown } | undefined)?.room ??
      (req.query as { room?: unknown } | undefined)?.room;
    const room = typeof named === "string" ? named : deps.rooms.length === 1 ? deps.rooms[0] : undefined;
    if (room !== undefined && !mayUseRoom(caller, room))
      fail(404, "unknown-room", `this node does not serve room "${room}"`);
  });
  app.addHook("onResponse", async (req, reply) => {
    const route = req.routeOptions.url ?? "unmatched";
    metrics.httpRequests.inc({ route, method: req.method, status: String(reply.statusCode) });
    if (route !== "/v1/events" && route !== "/v1/edge/wakes")
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

  const ctx: RouteContext = {
    deps,
    log,
    hub,
    streams,
    pickRoom,
    callerOf,
    storeError: () => {
      storeErrors += 1;
    },
  };
  registerVerbRoutes(app, ctx, deps.registry);
  registerReadRoutes(app, ctx);
  await registerHookRoutes(app, ctx, deps.webhooks ?? [], metrics, deps.registry);
  registerEdgeRoutes(app, ctx, metrics);

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
    async (req, reply) => {
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
      // What is wrong (an error's text names the store's address, the homeserver's) only for a
      // caller with a token; a probe without one learns which checks fail, not why.
      const detailed = req.caller !== null || verify(req.headers.authorization) !== null;
      if (!detailed)
        for (const name of Object.keys(checks)) if (checks[name] !== "ok") checks[name] = "failing";
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
