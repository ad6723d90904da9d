/**
 * The HTTP API's writes (issue 14): each becomes an inbox row exactly like a chat command, under an
 * event id the Idempotency-Key fixes, so the room's leader handles it once and every caller gets the
 * same stored outcome. Commands are built from schema-checked fields; a DAG document travels as data.
 */
import { randomUUID } from "node:crypto";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { z } from "zod";
import type { Outcome } from "../../app/commands/outcome.js";
import { canonicalJson } from "../../domain/canonical-hash.js";
import { parseCommand } from "../../app/commands/verbs/index.js";
import { sha256Hex } from "./auth.js";
import type { CommandAnswer, RouteContext, ZodApp } from "./context.js";
import { outcomeProblem } from "./context.js";
import { PROBLEM_CONTENT_TYPE, ProblemError, fail } from "./problem.js";
import * as s from "./schemas.js";

/** Printable ASCII, as an HTTP header value safely is; long enough for a UUID or a hash. */
const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;

/** The HTTP answer kept for an Idempotency-Key: the first one given is every repeat's. */
type StoredAnswer = { status: number; body: Record<string, unknown> };
const PENDING_ANSWER = { pending: true };

const problems = { "4xx": s.problemSchema, "5xx": s.problemSchema };

export function registerWriteRoutes(app: ZodApp, ctx: RouteContext): void {
  const { deps, log, pickRoom, callerOf } = ctx;
  const { config, store } = deps;
  /**
   * A write: the command text goes into the room's inbox under an event id that the Idempotency-Key
   * fixes, so concurrent retries make one row (insert-or-ignore), which the leader handles once; every
   * caller waits for the same stored outcome.
   */
  const submit = async (
    req: FastifyRequest,
    roomId: string,
    text: string,
  ): Promise<
    | { commandId: string; answer: CommandAnswer; key: string | null; stored?: undefined }
    | { commandId: string; stored: StoredAnswer; key: string }
  > => {
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
      if (remembered.kind === "existing") {
        const row = await storeCall("read the inbox", () => store.getInboxEvent(eventId));
        if (row === null) {
          // The key was used but its inbox row is gone: pruned by retention after it was answered (or
          // never written, a crash between the two writes). Writing it again would run the command a
          // second time; the kept answer is the answer. (The probe leaves a placeholder when there is
          // none, which a later answer never takes for a real one.)
          const kept = await storeCall("read an answer", () =>
            store.rememberIdempotencyKey(`http-answer:${caller.name}`, key!, PENDING_ANSWER),
          );
          if (kept.kind === "existing" && kept.result["pending"] !== true)
            return { commandId: eventId, stored: kept.result as StoredAnswer, key };
        }
      }
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
      ctx.storeError();
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
        const submitted = await submit(req, roomId, text);
        if (submitted.stored !== undefined) {
          const kept = submitted.stored;
          if (kept.status >= 400) reply.type(PROBLEM_CONTENT_TYPE);
          return reply.code(kept.status).send(kept.body as never);
        }
        const { commandId, answer: a, key } = submitted;
        let result: StoredAnswer;
        try {
          if (a.outcome === null) fail(500, "internal", "the command has no stored outcome");
          const ok = answer(a.outcome!, { commandId, text: a.text });
          result = ok ?? outcomeProblem(log, a.outcome!, a.text);
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
          if (kept.kind === "existing" && kept.result["pending"] !== true)
            result = kept.result as StoredAnswer;
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
  writeRoute(
    "POST",
    "/v1/runs",
    "Start a new run of a published DAG with values for its parameters (as !dag run)",
    undefined,
    s.triggerBody,
    s.triggeredSchema,
    ({ body }) => ({ room: undefined, text: runText(body) }),
    (o, base) =>
      o.kind === "published" && o.run.definition !== undefined
        ? {
            status: 201,
            body: { ...base, result: "created" as const, run: o.run, needsConfirmation: o.needsConfirmation },
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
}

/** The `!dag run` text of a trigger body; each value wrapped in backticks, so it arrives as sent. */
function runText(body: z.output<typeof s.triggerBody>): string {
  const pairs = Object.entries(body.params ?? {}).map(([name, value]) => ` ${name}=\`${value}\``);
  return `!dag run ${body.dagId}${pairs.join("")}`;
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
