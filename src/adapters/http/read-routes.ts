/**
 * The HTTP API's reads not yet made from their verb files (task logs, nodes), through the command
 * table, and the event stream. The run list and one run (GET /v1/runs, /v1/runs/{id}) are the list
 * and status verbs' routes (verb-routes.ts).
 */
import type { Outcome } from "../../app/commands/outcome.js";
import type { Command } from "../../app/commands/verbs/index.js";
import { findRun } from "../../app/run-ref.js";
import type { RunRecord } from "../../ports/store.js";
import type { Caller } from "./auth.js";
import type { RouteContext, ZodApp } from "./context.js";
import { outcomeProblem } from "./context.js";
import { refuseStreamPastCap, streamEvents } from "./event-stream.js";
import { fail } from "./problem.js";
import * as s from "./schemas.js";

const problems = { "4xx": s.problemSchema, "5xx": s.problemSchema };

export function registerReadRoutes(app: ZodApp, ctx: RouteContext): void {
  const { deps, log, pickRoom, callerOf, hub, streams } = ctx;
  const { config, store } = deps;
  const read = async (roomId: string, command: Command, caller: Caller): Promise<Outcome> => {
    try {
      return await deps.read(roomId, command, caller);
    } catch (err) {
      ctx.storeError();
      log.warn({ room: roomId, err: String(err).slice(0, 300) }, "http read failed");
      return fail(503, "store-unavailable", "the store could not be read; try again");
    }
  };

  // --- Reads ----------------------------------------------------------------------------------

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
      if (o.kind !== "logs") return outcomeProblem(log, o, null);
      return {
        room: roomId,
        run: o.run,
        task: o.task,
        output: o.output,
        omittedChars: o.omittedChars,
        droppedBytes: o.droppedBytes ?? 0,
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
      if (o.kind !== "nodes") return outcomeProblem(log, o, null);
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
      // The run by either of its ids; an unknown one is a 404 here, not an empty stream for ever.
      let run: RunRecord | null = null;
      if (req.query.run !== undefined) {
        try {
          run = await findRun(store, roomId, req.query.run);
        } catch (err) {
          ctx.storeError();
          log.warn({ room: roomId, err: String(err).slice(0, 300) }, "http read failed");
          fail(503, "store-unavailable", "the store could not be read; try again");
        }
        if (run === null) fail(404, "run-not-found", `no run "${req.query.run}" in this room`);
      }
      refuseStreamPastCap(streams, config.maxStreams, reply);
      reply.hijack();
      try {
        await streamEvents(
          reply.raw,
          hub,
          store,
          {
            roomId,
            runId: run?.runId ?? null,
            after,
            heartbeatMs: config.heartbeatMs,
            bufferBytes: config.sseBufferBytes,
            snapshot: () => deps.snapshot(roomId, run?.dagId ?? null, caller),
          },
          streams,
        );
      } catch (err) {
        ctx.storeError();
        log.warn({ room: roomId, err: String(err).slice(0, 300) }, "event stream failed");
        reply.raw.destroy();
      }
    },
  );
}
