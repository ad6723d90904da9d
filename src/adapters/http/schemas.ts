/**
 * The HTTP API's own request and response shapes (reads, events, health, problems) as zod schemas;
 * those of outcomes and commands are in src/app/commands/http-shapes.ts, beside the verbs.
 */
import { z } from "zod";
import { idParam, roomParam, runSummarySchema, taskLineSchema } from "../../app/commands/http-shapes.js";

// The shapes of outcomes and commands live with the verbs that declare the routes using them.
export {
  idParam,
  roomParam,
  runParams,
  taskParams,
  roomParams,
  runSummarySchema,
  taskSummarySchema,
  taskLineSchema,
  runStatusSchema,
  listQuery,
  runListSchema,
} from "../../app/commands/http-shapes.js";

export const roomQuery = z.strictObject({
  room: roomParam.optional().describe("the room; optional when the node serves one room"),
});

export const logsSchema = z.object({
  room: z.string(),
  run: runSummarySchema,
  task: taskLineSchema,
  output: z.string().nullable(),
  omittedChars: z.number(),
  /** Bytes the task wrote before the kept tail began (its action's output_limit): 0 when all was kept. */
  droppedBytes: z.number(),
  at: z.number(),
});

export const nodesSchema = z.object({
  room: z.string(),
  nodes: z.array(
    z.object({
      nodeId: z.string(),
      labels: z.array(z.string()),
      capacity: z.number(),
      runningTasks: z.number(),
      actions: z.array(z.string()),
      heartbeatAgeMs: z.number(),
      serves: z.boolean(),
      undecryptable: z.number().describe("encrypted events the node could not decrypt since it started"),
      undecryptableReason: z
        .string()
        .nullable()
        .describe("why the last of them was not decrypted, in words; null when none was"),
      deviceSigned: z
        .boolean()
        .nullable()
        .describe(
          "whether the node's Matrix device is cross-signed by its account; null while it has no encrypted room",
        ),
      release: z.string().nullable().describe("the node's dagbot release; null: a release before 0.2.0"),
      protocol: z.number().describe("the fleet protocol it speaks (1 before 0.2.0)"),
    }),
  ),
  leader: z.object({ nodeId: z.string(), term: z.number(), expiresInMs: z.number() }).nullable(),
  staleAfterMs: z.number(),
  at: z.number(),
});

/** Loose: problem details carry extension members (RFC 9457 §3.2), e.g. an invalid DAG's issues. */
export const problemSchema = z
  .looseObject({
    type: z.string(),
    title: z.string(),
    status: z.number(),
    detail: z.string().optional(),
    instance: z.string().optional(),
    code: z.string().describe("the stable error code; type is built from it"),
    errors: z.array(z.object({ path: z.string(), message: z.string() })).optional(),
  })
  .meta({ id: "Problem" });

export const eventsQuery = z.strictObject({
  room: roomParam.optional(),
  run: idParam.optional().describe("only the events of this run"),
  after: z.coerce
    .number()
    .int()
    .min(0)
    .optional()
    .describe("replay events after this sequence number (as Last-Event-ID does)"),
});

export const healthSchema = z.object({ ok: z.boolean(), checks: z.record(z.string(), z.string()) });
