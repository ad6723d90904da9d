/**
 * What both store adapters check and bound the same way: argument validation (a RangeError before
 * any transaction starts, so bad input changes nothing), the fence's room, the limits on stored
 * output, the default room cap, and the mapping of driver errors to the port's.
 */
import {
  ConflictError,
  NotFoundError,
  SchemaTooNewError,
  SchemaTooOldError,
  StoreError,
} from "../../ports/errors.js";
import type { LeaderFence, OutboxMessageInput } from "../../ports/store.js";
import { FAN_OUT_LIMITS, type OutputValue } from "../../domain/outputs.js";

/** The room's cap on active tasks until `!dag cap` sets one. */
export const DEFAULT_ROOM_CAP = 16;
/** Defence in depth: the executor bounds output, the store never keeps more than this tail. */
export const OUTPUT_LIMIT_CHARS = 64 * 1024;

export const outputTail = (output: string): string =>
  output.length > OUTPUT_LIMIT_CHARS ? output.slice(-OUTPUT_LIMIT_CHARS) : output;

/** Bytes written in all for a kept output: the given count, never less than the output itself. */
export function outputBytes(output: string, written: number | undefined): number {
  const own = Buffer.byteLength(output);
  if (written === undefined) return own;
  if (!Number.isSafeInteger(written) || written < 0)
    throw new RangeError(`output bytes must be a whole number ≥ 0, got ${written}`);
  return Math.max(own, written);
}

/** Defence in depth behind the worker's checks (src/domain/outputs.ts): what a finish may keep as outputs. */
const MAX_OUTPUTS = 32;
const MAX_OUTPUT_NAME = 64;
const MAX_OUTPUT_VALUE_BYTES = 4 * 1024;

/**
 * A finish's outputs as the JSON the store keeps, or null when it keeps none: only a success keeps
 * them. A RangeError (before any transaction) for anything the worker could not have accepted.
 */
export function outputValuesJson(result: {
  outcome: string;
  outputs?: Record<string, OutputValue>;
}): string | null {
  const outputs = result.outputs;
  if (outputs === undefined || result.outcome !== "succeeded") return null;
  if (typeof outputs !== "object" || outputs === null || Array.isArray(outputs))
    throw new RangeError("finish task: outputs must be a table of names to strings");
  const names = Object.keys(outputs);
  if (names.length > MAX_OUTPUTS)
    throw new RangeError(`finish task: ${names.length} outputs; at most ${MAX_OUTPUTS}`);
  for (const name of names) {
    const value: unknown = outputs[name];
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name) || name.length > MAX_OUTPUT_NAME)
      throw new RangeError(`finish task: ${JSON.stringify(name.slice(0, 80))} is not an output name`);
    // A list output's items are each a value (src/domain/outputs.ts FAN_OUT_LIMITS).
    const items: unknown[] = Array.isArray(value) ? value : [value];
    if (Array.isArray(value) && value.length > FAN_OUT_LIMITS.maxItems)
      throw new RangeError(
        `finish task: list output "${name}" has ${value.length} items; at most ${FAN_OUT_LIMITS.maxItems}`,
      );
    for (const item of items)
      if (typeof item !== "string" || Buffer.byteLength(item) > MAX_OUTPUT_VALUE_BYTES || item.includes("\0"))
        throw new RangeError(
          `finish task: output "${name}" must be text of at most ${MAX_OUTPUT_VALUE_BYTES} bytes without NUL (or a list of such)`,
        );
  }
  return JSON.stringify(outputs);
}

export function checkLeaseTtl(ttlMs: number): void {
  if (!Number.isFinite(ttlMs) || ttlMs <= 0)
    throw new RangeError(`lease ttl must be a positive number of ms, got ${ttlMs}`);
}

/** A task lease: `operation` names the caller in the message (claim, renew task lease). */
export function checkTaskLease(operation: string, leaseMs: number): void {
  if (!Number.isFinite(leaseMs) || leaseMs <= 0)
    throw new RangeError(`${operation}: leaseMs must be a positive number of ms, got ${leaseMs}`);
}

/** A claim's input, checked before its transaction on both stores: the lease and how many to take. */
export function checkClaim(offer: { leaseMs: number }, max: number): void {
  checkTaskLease("claim task", offer.leaseMs);
  if (!Number.isInteger(max) || max < 1)
    throw new RangeError(`claim tasks: max must be a whole number ≥ 1, got ${max}`);
}

export function checkRoomCap(cap: number): void {
  if (!Number.isInteger(cap) || cap < 0)
    throw new RangeError(`room cap must be a whole number ≥ 0, got ${cap}`);
}

export function checkCapacity(capacity: number): void {
  if (!Number.isInteger(capacity) || capacity < 0)
    throw new RangeError(`heartbeat: capacity must be a whole number ≥ 0, got ${capacity}`);
}

/** The fence must cover the room the command acts on. */
export function checkRoom(operation: string, ctx: { fence: LeaderFence }, roomId: string): void {
  if (ctx.fence.roomId !== roomId)
    throw new ConflictError(operation, { roomId: ctx.fence.roomId }, { roomId });
}

/** The fence covers one room; a message for another room would be sent by a leader nobody fenced. */
export function checkMessageRooms(fence: LeaderFence, messages: readonly OutboxMessageInput[]): void {
  for (const m of messages)
    if (m.roomId !== fence.roomId)
      throw new ConflictError(
        "enqueue outbox",
        { roomId: fence.roomId },
        { roomId: m.roomId, txnId: m.txnId },
      );
}

/** Our own typed errors (and argument RangeErrors) pass through; anything the driver threw becomes a StoreError. */
export function mapError(operation: string, e: unknown): Error {
  if (
    e instanceof ConflictError ||
    e instanceof NotFoundError ||
    e instanceof StoreError ||
    e instanceof SchemaTooNewError ||
    e instanceof SchemaTooOldError ||
    e instanceof RangeError
  )
    return e;
  return new StoreError(operation, { cause: e });
}
