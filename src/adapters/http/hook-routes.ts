/**
 * Signed webhooks on the HTTP API (docs/architecture.md §10): `POST /v1/hooks/{id}`, one route per
 * node for every `[[webhooks]]` entry of its config. No bearer token: a delivery proves itself by its
 * signature (or shared token) over the raw body, which is read as bytes under the hook's size cap
 * before anything parses it. Then:
 *
 * - refused before its payload is read: 413 (too large), 401 (no, or a wrong, signature; a hmac
 *   timestamp outside the replay window), 400 (no delivery id, not JSON) — counted in
 *   `dagbot_webhook_refused_total{hook,reason}`, nothing stored;
 * - mapped to nothing (an event the hook does not take, a filter that does not match): 202 with the
 *   reason, nothing stored;
 * - otherwise the delivery becomes a `run` command, as data, in the room's inbox under the event id
 *   `hook:<hook id>:<delivery id>` from sender `hook:<hook id>`: the room's leader handles it exactly
 *   once, whichever node got it and however often it is delivered, and every delivery of that id is
 *   answered from the same stored outcome (202 with the run's id; the run awaits confirmation unless
 *   the room's policy lists the hook under hook_auto_confirm).
 *
 * The secret is never logged nor answered; values from a payload are parameter values only, checked
 * by the leader against the DAG's patterns, and never reach a shell or an option parser.
 */
import type { FastifyError, FastifyReply, FastifyRequest } from "fastify";
import * as z from "zod";
import type { Outcome } from "../../app/commands/outcome.js";
import { httpAnswerOf, plainTextOf } from "../../app/commands/outcome-table.js";
import { structuredCommandContent } from "../../app/commands/inbox-intent.js";
import type { VerbRegistry } from "../../app/commands/verbs/index.js";
import { VERB_REGISTRY } from "../../app/commands/verbs/index.js";
import type { WebhookConfig } from "../../config/node-config.js";
import type { RefusalReason } from "../../domain/webhook.js";
import {
  contentDeliveryId,
  deliveryEventId,
  hookSender,
  mapDelivery,
  verifyDelivery,
} from "../../domain/webhook.js";
import type { RouteContext, ZodApp } from "./context.js";
import { httpIdiom } from "./http-idiom.js";
import { jsonDepthExceeds } from "./json-depth.js";
import type { NodeMetrics } from "./metrics.js";
import type { Problem, ProblemCode } from "./problem.js";
import { PROBLEM_CONTENT_TYPE, problem } from "./problem.js";

/** As deep as the API's JSON bodies may nest (server.ts). */
const MAX_DEPTH = 64;

const hookParams = z.object({ id: z.string().min(1).max(64) });

export async function registerHookRoutes(
  app: ZodApp,
  ctx: RouteContext,
  hooks: readonly WebhookConfig[],
  metrics: NodeMetrics,
  registry: VerbRegistry = VERB_REGISTRY,
): Promise<void> {
  if (hooks.length === 0) return;
  const { deps, log } = ctx;
  const byId = new Map(hooks.map((h) => [h.id, h]));
  const largest = Math.max(...hooks.map((h) => h.bodyLimitBytes));
  const idiom = httpIdiom(registry.verbs);

  const refuse = (
    reply: FastifyReply,
    hook: WebhookConfig,
    status: number,
    reason: RefusalReason,
    code: ProblemCode,
    detail: string,
  ): FastifyReply => {
    metrics.webhookRefusals.inc({ hook: hook.id, reason });
    log.warn({ hook: hook.id, reason }, "webhook delivery refused");
    return sendProblem(reply, problem(status, code, detail, { hook: hook.id, reason }));
  };
  /** A body past the hook's own limit, whether the parser or the handler found it. */
  const refuseTooLarge = (reply: FastifyReply, hook: WebhookConfig): FastifyReply =>
    refuse(reply, hook, 413, "too-large", "body-too-large", `at most ${hook.bodyLimitBytes} bytes`);

  await app.register(async (scope) => {
    // The raw bytes, whatever the content type: a signature is over the body exactly as sent.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser("*", { parseAs: "buffer", bodyLimit: largest }, (_req, body, done) =>
      done(null, body),
    );
    scope.setErrorHandler((err: FastifyError, req, reply) => {
      const hook = byId.get((req.params as { id?: string } | undefined)?.id ?? "");
      if (err.code === "FST_ERR_CTP_BODY_TOO_LARGE" && hook !== undefined) return refuseTooLarge(reply, hook);
      if (err.code === "FST_ERR_CTP_BODY_TOO_LARGE")
        return sendProblem(reply, problem(413, "body-too-large", `at most ${largest} bytes`));
      if (typeof err.statusCode === "number" && err.statusCode >= 400 && err.statusCode < 500)
        return sendProblem(reply, problem(err.statusCode, "bad-request", err.message.slice(0, 300)));
      ctx.storeError();
      log.error({ route: "/v1/hooks/:id", err: String(err).slice(0, 500) }, "webhook request failed");
      return sendProblem(reply, problem(500, "internal", "see the node's log"));
    });

    scope.post(
      "/v1/hooks/:id",
      {
        bodyLimit: largest,
        schema: {
          summary:
            "A webhook delivery (GitHub, GitLab or generic HMAC signed): starts a run of the hook's DAG, once per delivery id",
          params: hookParams,
          security: [],
        },
      },
      async (req: FastifyRequest, reply: FastifyReply) => {
        const { id } = req.params as { id: string };
        const hook = byId.get(id);
        if (hook === undefined)
          return sendProblem(reply, problem(404, "not-found", `no webhook "${id}" on this node`));
        const raw = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
        if (raw.length > hook.bodyLimitBytes) return refuseTooLarge(reply, hook);
        const verified = verifyDelivery(hook, hook.secret, req.headers, raw, Date.now());
        if (!verified.ok)
          return refuse(
            reply,
            hook,
            verified.status,
            verified.reason,
            verified.status === 401 ? "webhook-refused" : "bad-request",
            verified.detail,
          );
        const { event } = verified;
        const text = raw.toString("utf8");
        let payload: unknown;
        try {
          if (jsonDepthExceeds(text, MAX_DEPTH)) throw new Error("too deep");
          payload = JSON.parse(text);
        } catch {
          return refuse(
            reply,
            hook,
            400,
            "bad-payload",
            "bad-request",
            `the body is not JSON (or nests deeper than ${MAX_DEPTH} levels); send Content-Type: application/json`,
          );
        }
        const deliveryId = verified.deliveryId ?? contentDeliveryId(hook.deliveryFrom ?? [], payload);
        if (deliveryId === null)
          return refuse(
            reply,
            hook,
            400,
            "missing-delivery-id",
            "bad-request",
            `the delivery has no id: no ${hook.deliveryHeader} header, and no value at ${(hook.deliveryFrom ?? []).join(", ")}`,
          );
        const base = { hook: hook.id, delivery: deliveryId };
        const mapped = mapDelivery(hook, payload, event);
        if (mapped.kind === "ignored") {
          metrics.webhookDeliveries.inc({ hook: hook.id, result: "ignored" });
          log.info({ ...base, event, reason: mapped.reason }, "webhook delivery maps to nothing");
          return reply.code(202).send({ ...base, result: "ignored", reason: mapped.reason });
        }
        if (mapped.kind === "refused") {
          metrics.webhookDeliveries.inc({ hook: hook.id, result: "refused" });
          return sendProblem(reply, problem(422, "webhook-mapping", mapped.reason, base));
        }
        const data = {
          verb: "run",
          id: hook.dag,
          params: mapped.params,
          hook: { id: hook.id, delivery: deliveryId, ...(mapped.link === null ? {} : { link: mapped.link }) },
        };
        // The same rules as every command given as data, checked before anything is stored.
        const parsed = registry.parseData(data);
        if (parsed.kind === "error") {
          metrics.webhookDeliveries.inc({ hook: hook.id, result: "refused" });
          return sendProblem(reply, problem(422, "webhook-mapping", parsed.error.message, base));
        }
        const eventId = deliveryEventId(hook.id, deliveryId);
        let inserted: "inserted" | "duplicate";
        try {
          inserted = await deps.store.insertInboxEvent({
            eventId,
            roomId: hook.room,
            sender: hookSender(hook.id),
            originServerTs: await deps.store.now(),
            content: structuredCommandContent(data),
            seenBy: `http:${deps.session}`,
          });
        } catch (err) {
          ctx.storeError();
          log.warn({ ...base, err: String(err).slice(0, 300) }, "webhook: could not queue the delivery");
          return sendProblem(
            reply,
            problem(503, "store-unavailable", "the store could not be written; deliver again"),
          );
        }
        log.info(
          { ...base, event, room: hook.room, duplicate: inserted === "duplicate" },
          "webhook delivery queued",
        );
        const answer = await deps.awaitCommand(eventId, deps.config.commandTimeoutMs);
        if (answer === null || answer.outcome === null) {
          // Stored in the inbox: the room's leader will handle it once; a later delivery of the same
          // id is answered from its outcome.
          metrics.webhookDeliveries.inc({ hook: hook.id, result: "timeout" });
          return reply.code(202).send({ ...base, result: "accepted", commandId: eventId, run: null });
        }
        return answerFrom(reply, hook, base, eventId, answer.outcome);
      },
    );
  });

  const answerFrom = (
    reply: FastifyReply,
    hook: WebhookConfig,
    base: { hook: string; delivery: string },
    commandId: string,
    outcome: Outcome,
  ): FastifyReply => {
    const text = plainTextOf(outcome, idiom);
    if (outcome.kind === "published") {
      metrics.webhookDeliveries.inc({ hook: hook.id, result: "accepted" });
      return reply.code(202).send({
        ...base,
        result: outcome.needsConfirmation ? "awaiting-confirmation" : "started",
        commandId,
        run: outcome.run.dagId,
        runId: outcome.run.runId,
        needsConfirmation: outcome.needsConfirmation,
        text,
      });
    }
    metrics.webhookDeliveries.inc({ hook: hook.id, result: "refused" });
    const mapped = httpAnswerOf(outcome);
    const status = mapped.ok ? 500 : mapped.status;
    const code = mapped.ok ? "internal" : (mapped.problem as ProblemCode);
    return sendProblem(
      reply,
      problem(status, code, text, { ...base, commandId, ...(mapped.ok ? {} : (mapped.extra ?? {})) }),
    );
  };
}

function sendProblem(reply: FastifyReply, p: Problem): FastifyReply {
  return reply.code(p.status).type(PROBLEM_CONTENT_TYPE).send(p);
}
