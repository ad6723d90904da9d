/**
 * The HTTP routes of the verbs: every verb whose file declares `http` gets its route
 * here, with its method, path, schemas (so its entry in /openapi.json) and answers. A verb that
 * writes becomes an inbox row holding the command AS DATA, from sender `http:<token>`, under an event
 * id the Idempotency-Key fixes, so the room's leader handles it once and every caller gets the same
 * stored outcome; a read runs the command table for the caller. Statuses and problems come from the
 * outcome table (src/app/commands/outcome-table.ts); no chat text is built or parsed here.
 */
import { randomUUID } from "node:crypto";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { Outcome } from "../../app/commands/outcome.js";
import { createdRunOf, httpAnswerOf, plainTextOf } from "../../app/commands/outcome-table.js";
import { structuredCommandContent } from "../../app/commands/inbox-intent.js";
import type { AnyVerb, HttpInput, VerbHttp } from "../../app/commands/verb.js";
import { httpRoutesOf } from "../../app/commands/verb.js";
import * as shapes from "../../app/commands/http-shapes.js";
import type { Command, VerbRegistry } from "../../app/commands/verbs/index.js";
import { VERB_REGISTRY } from "../../app/commands/verbs/index.js";
import { canonicalJson } from "../../domain/canonical-hash.js";
import { sha256Hex } from "./auth.js";
import { httpIdiom } from "./http-idiom.js";
import type { CommandAnswer, RouteContext, ZodApp } from "./context.js";
import type { ProblemCode } from "./problem.js";
import { PROBLEM_CONTENT_TYPE, ProblemError, fail, problem } from "./problem.js";
import * as s from "./schemas.js";

/** Printable ASCII, as an HTTP header value safely is; long enough for a UUID or a hash. */
const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;

/**
 * A `{ pending: true }` row that an earlier dagbot stored in place of an answer (kept until
 * retention forgets the key): never an answer.
 */
const isPlaceholder = (kept: Record<string, unknown>): boolean => kept["pending"] === true;

/** The HTTP answer kept for an Idempotency-Key: the first one given is every repeat's. */
type StoredAnswer = { status: number; body: Record<string, unknown>; location?: string };

const problems = { "4xx": s.problemSchema, "5xx": s.problemSchema };

export function registerVerbRoutes(
  app: ZodApp,
  ctx: RouteContext,
  registry: VerbRegistry = VERB_REGISTRY,
): void {
  const { deps, log, pickRoom, callerOf } = ctx;
  const { config, store } = deps;
  const idiom = httpIdiom(registry.verbs);
  /**
   * A write: the command, as data, goes into the room's inbox under an event id that the
   * Idempotency-Key fixes, so concurrent retries make one row (insert-or-ignore), which the leader
   * handles once; every caller waits for the same stored outcome.
   */
  const submit = async (
    req: FastifyRequest,
    roomId: string,
    command: Command,
  ): Promise<
    | { commandId: string; answer: CommandAnswer; key: string | null; stored?: undefined }
    | { commandId: string; stored: StoredAnswer; key: string }
  > => {
    const caller = callerOf(req);
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
      if (remembered.kind === "existing") {
        const row = await storeCall("read the inbox", () => store.getInboxEvent(eventId));
        if (row === null) {
          // The key was used but its inbox row is gone: pruned by retention after it was answered
          // (then the kept answer is the answer: writing the row again would run the command a
          // second time), or not written yet by a request with the same key still in flight, or
          // never (a crash between the two writes): then the row is written below, once, and this
          // request waits for its answer like the first. A read only: a placeholder stored here
          // kept the first request's real answer from ever being stored.
          const kept = await storeCall("read an answer", () =>
            store.readIdempotencyKey(`http-answer:${caller.name}`, key!),
          );
          if (kept !== null && !isPlaceholder(kept))
            return { commandId: eventId, stored: kept as StoredAnswer, key };
        }
      }
    }
    const held = await storeCall(
      "read the room's leader",
      async () => (await deps.noLeader?.(roomId, command)) ?? null,
    );
    // Nodes that run but will not lead: refused at once with what ends it, and nothing queued.
    if (held !== null) return fail(503, "not-leader", held);
    await storeCall("queue a command", async () =>
      store.insertInboxEvent({
        eventId,
        roomId,
        sender: `http:${caller.name}`,
        originServerTs: await store.now(),
        content: structuredCommandContent(command),
        seenBy: `http:${deps.session}`,
      }),
    );
    log.info(
      {
        room: roomId,
        command: eventId,
        by: caller.name,
        verb: command.verb,
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
      ctx.storeError();
      log.warn({ err: String(err).slice(0, 300) }, `http: could not ${what}`);
      return fail(
        503,
        "store-unavailable",
        "the store could not be written; retry with the same Idempotency-Key",
      );
    }
  };

  /** The command a request makes, checked by the grammar's rules for data before anything is stored. */
  const commandOf = (route: VerbHttp<{ verb: string }>, req: FastifyRequest): Command => {
    const made = route.command(inputOf(req));
    const parsed = registry.parseData(made);
    if (parsed.kind === "error") fail(400, `command-error.${parsed.error.code}`, parsed.error.message);
    // The registry's grammar made it: a command of one of its verbs.
    return (parsed as { command: Command }).command;
  };

  /** A success's answer, or the outcome's problem; a 201 names where the new run can be read. */
  const answerOf = (
    route: VerbHttp<{ verb: string }>,
    outcome: Outcome,
    base: Record<string, unknown>,
  ): StoredAnswer => {
    const mapped = httpAnswerOf(outcome, registry.verbs);
    const data = mapped.ok ? route.answer(outcome) : null;
    const text = plainTextOf(outcome, idiom, registry.verbs);
    if (mapped.ok && data !== null) {
      const created = mapped.status === 201 ? createdRunOf(outcome) : null;
      return {
        status: mapped.status,
        body: { ...base, text, ...data },
        ...(created === null ? {} : { location: `/v1/runs/${encodeURIComponent(created.dagId)}` }),
      };
    }
    if (mapped.ok) {
      log.error({ kind: outcome.kind }, "http: unexpected command outcome");
      const p = problem(500, "internal", "unexpected outcome");
      return { status: 500, body: { ...p, ...base } };
    }
    const p = problem(mapped.status, mapped.problem as ProblemCode, text, { ...(mapped.extra ?? {}) });
    return { status: p.status, body: { ...p, ...base } };
  };

  const routeOf = (verb: AnyVerb, route: VerbHttp<{ verb: string }>): void => {
    // A GET of a verb that writes serves its commands that only read (`policy` shown: readOnly).
    const writes = verb.writes === true && route.method !== "GET";
    app.route({
      method: route.method,
      url: route.path,
      config: { access: writes ? "operate" : "read" },
      schema: {
        summary: route.summary,
        ...(route.params === undefined ? {} : { params: route.params }),
        querystring: route.query ?? s.roomQuery,
        ...(route.body === undefined ? {} : { body: route.body }),
        // A write may create (201); a read answers 200.
        response: writes
          ? { 200: route.response, 201: route.response, ...problems }
          : { 200: route.response, ...problems },
      },
      // The route's types come from its schemas at run time; the reply's schema checks the answer.
      handler: (async (req: FastifyRequest, reply: FastifyReply) => {
        const command = commandOf(route, req);
        const named = (req.params as { room?: string } | undefined)?.room;
        const roomId = pickRoom(named ?? (req.query as { room?: string }).room);
        const instance = req.url.split("?")[0];
        if (!writes) {
          const outcome = await readFor(roomId, command, req);
          const result = answerOf(route, outcome, { room: roomId });
          if (result.status < 400 && route.headers !== undefined)
            for (const [name, value] of Object.entries(route.headers(outcome, inputOf(req))))
              reply.header(name, value);
          return send(
            reply,
            result.status >= 400 ? { ...result, body: { ...result.body, instance } } : result,
          );
        }
        const submitted = await submit(req, roomId, command);
        if (submitted.stored !== undefined) return send(reply, submitted.stored);
        const { commandId, answer: a, key } = submitted;
        let result: StoredAnswer;
        try {
          if (a.outcome === null) fail(500, "internal", "the command has no stored outcome");
          result = answerOf(route, a.outcome!, { commandId });
          if (result.status >= 400) result = { ...result, body: { ...result.body, instance } };
        } catch (err) {
          if (!(err instanceof ProblemError)) throw err;
          result = { status: err.problem.status, body: { ...err.problem, commandId, instance } };
        }
        if (key !== null) {
          // The first answer is kept: a repeat gets it byte for byte, even after the run moved on.
          const kept = await storeCall("store an answer", () =>
            store.rememberIdempotencyKey(`http-answer:${callerOf(req).name}`, key, result),
          );
          if (kept.kind === "existing" && !isPlaceholder(kept.result)) result = kept.result as StoredAnswer;
        }
        return send(reply, result);
      }) as never,
    });
  };

  const readFor = async (roomId: string, command: Command, req: FastifyRequest): Promise<Outcome> => {
    try {
      return await deps.read(roomId, command, callerOf(req));
    } catch (err) {
      if (err instanceof ProblemError) throw err;
      ctx.storeError();
      log.warn({ room: roomId, err: String(err).slice(0, 300) }, "http read failed");
      return fail(503, "store-unavailable", "the store could not be read; try again");
    }
  };

  for (const verb of registry.verbs) for (const route of httpRoutesOf(verb, shapes)) routeOf(verb, route);
}

/** A request's parts once its schemas have checked them. */
function inputOf(req: FastifyRequest): HttpInput {
  return {
    params: (req.params ?? {}) as Record<string, string>,
    body: req.body,
    query: (req.query ?? {}) as Record<string, unknown>,
  };
}

function send(reply: FastifyReply, answer: StoredAnswer): FastifyReply {
  if (answer.status >= 400) reply.type(PROBLEM_CONTENT_TYPE);
  if (answer.status === 201 && typeof answer.location === "string") reply.header("location", answer.location);
  return reply.code(answer.status).send(answer.body as never);
}
