/**
 * The request bodies of the /v1/edge/ routes (edge-routes.ts): the worker's store port calls
 * (src/ports/store.ts, TaskClaimer, NodeStore.heartbeat) as JSON, checked before the store sees them.
 * A fencing token travels unchanged: the store, not this schema, decides whether it still holds.
 */
import { z } from "zod";

const ID = /^[A-Za-z0-9_.-]{1,64}$/;
const text = (max: number) => z.string().max(max);
const count = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);
const names = z.array(text(256)).max(1_000);

export const sessionSchema = z.strictObject({
  nodeId: z.string().regex(ID, { error: "must be a node id" }),
  bootId: text(200).min(1),
});

export const tokenSchema = z.strictObject({
  runId: text(200).min(1),
  taskId: text(200).min(1),
  version: count,
  session: sessionSchema,
  claim: z.strictObject({ attempt: count, retryBackoffMs: count }).optional(),
});

export const offerSchema = z.strictObject({
  session: sessionSchema,
  roomIds: names,
  labels: names,
  actions: names,
  leaseMs: z.number().int().min(1).max(2_147_483_647),
});

const max = z.number().int().min(1).max(1_000);

export const resultSchema = z.strictObject({
  outcome: z.enum(["succeeded", "failed", "timed_out", "canceled"]),
  exitCode: z.number().int().nullable(),
  output: z.string(),
  outputBytes: count.optional(),
  error: z.string().nullable(),
  outputs: z.record(z.string(), z.string()).optional(),
});

export const claimBody = z.strictObject({ offer: offerSchema, max });
export const finishBody = z.strictObject({ token: tokenSchema, result: resultSchema });
export const finishAndClaimBody = z.strictObject({
  token: tokenSchema,
  result: resultSchema,
  offer: offerSchema,
  max,
});
export const renewBody = z.strictObject({
  token: tokenSchema,
  leaseMs: z.number().int().min(1).max(2_147_483_647),
});
export const releaseBody = z.strictObject({ token: tokenSchema, why: text(2_000) });
export const outputBody = z.strictObject({ token: tokenSchema, output: z.string(), outputBytes: count });

const argSpec = z.strictObject({ pattern: text(4_096), allowLeadingDash: z.boolean().optional() });
export const heartbeatBody = z.strictObject({
  beat: z.strictObject({
    session: sessionSchema,
    labels: names,
    capacity: z.number().int().min(0).max(100_000),
    actions: names,
    roomIds: names,
    actionSpecs: z
      .record(
        z.string(),
        z.strictObject({
          name: text(256),
          argv: z.array(text(65_536)).max(1_000),
          args: z.record(z.string(), argSpec),
        }),
      )
      .optional(),
    release: text(100).nullable().optional(),
    protocol: z.number().int().nullable().optional(),
  }),
});

export const leaveBody = z.strictObject({ session: sessionSchema });
export const heldBody = z.strictObject({ session: sessionSchema, roomIds: names });

export const taskQuery = z.strictObject({ run: text(200).min(1), task: text(200).min(1) });
export const tasksQuery = z.strictObject({ run: text(200).min(1) });

export type ClaimBody = z.output<typeof claimBody>;
export type FinishBody = z.output<typeof finishBody>;
export type FinishAndClaimBody = z.output<typeof finishAndClaimBody>;
export type RenewBody = z.output<typeof renewBody>;
export type ReleaseBody = z.output<typeof releaseBody>;
export type OutputBody = z.output<typeof outputBody>;
export type HeartbeatBody = z.output<typeof heartbeatBody>;
export type LeaveBody = z.output<typeof leaveBody>;
export type HeldBody = z.output<typeof heldBody>;
export type TaskQuery = z.output<typeof taskQuery>;
export type TasksQuery = z.output<typeof tasksQuery>;
