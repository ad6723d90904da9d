/**
 * How the subcommands that hand a command to a room's leader reach it: the --wait option, the room
 * of the config, its store, and one command sent through the inbox with the leader's answer awaited.
 */
import type { CommandPolicy } from "../app/commands/context.js";
import type { Store } from "../ports/store.js";
import { SetupError } from "./setup-error.js";
import type { CommandAnswer, CommandData } from "./command-step.js";
import { awaitLocalCommand, commandPolicy, queueLocalCommand, roomHasLiveNode } from "./command-step.js";
import type { CommonOptions } from "./config-resolve.js";
import { pickRoom, resolveConfig } from "./config-resolve.js";
import { openConfiguredStore } from "./store-open.js";
import { makeLogger } from "./engine-settings.js";
import { handleWithoutLeader, noLeaderAdvice } from "./leaderless-room.js";

export function waitSeconds(text: string): number {
  const seconds = Number(text);
  if (!Number.isFinite(seconds) || seconds <= 0 || seconds > 3600) {
    throw new SetupError(`--wait must be a number of seconds from 1 to 3600, got "${text.slice(0, 20)}"`);
  }
  return seconds * 1000;
}

/**
 * Exit status of `submit` and `cancel` when no node of the room is alive: the command is queued in
 * the inbox and takes effect when a node starts, but nothing answers now.
 */
export const EXIT_NO_LIVE_NODE = 3;

/**
 * Sends a command and fails with a clear message when no leader answers. With `requireLiveNode`,
 * a room whose nodes all lack a fresh heartbeat is said at once (the command stays queued) instead
 * of after waiting `waitMs` for an answer that cannot come.
 */
export async function command(
  store: Store,
  roomId: string,
  body: string | CommandData,
  waitMs: number,
  policy: CommandPolicy,
  {
    requireLiveNode = false,
    leaderless,
  }: {
    requireLiveNode?: boolean;
    /**
     * When no node leads the room: `advice` says why (nodes held back by their [permissions]), and
     * the command is refused with it, not queued; `handle` applies the command itself (policy).
     */
    leaderless?: { advice(): Promise<string | null>; handle?(eventId: string): Promise<boolean> };
  } = {},
): Promise<CommandAnswer> {
  if (leaderless?.handle !== undefined) {
    const eventId = await queueLocalCommand(store, roomId, body);
    await leaderless.handle(eventId);
    const answer = await awaitLocalCommand(store, eventId, waitMs, policy);
    if (answer !== null) return answer;
    throw new SetupError(
      `no leader of room ${roomId} answered within ${waitMs / 1000}s; the command stays in the inbox and ` +
        "is handled when a node of the room leads it",
      1,
    );
  }
  const live = !requireLiveNode || (await roomHasLiveNode(store, roomId, policy.nodeStaleAfterMs));
  // Nodes that run but will not lead: say why and what ends it, rather than queue and wait in vain.
  const held = live ? await leaderless?.advice() : null;
  if (held !== null && held !== undefined) throw new SetupError(`${held}. Nothing was queued.`, 1);
  const eventId = await queueLocalCommand(store, roomId, body);
  if (!live) {
    throw new SetupError(
      `no node of room ${roomId} has a heartbeat; the command is queued and will run when one starts ` +
        "(`dagbot node` or `dagbot start`)",
      EXIT_NO_LIVE_NODE,
    );
  }
  return answerOf(store, roomId, eventId, waitMs, policy, leaderless?.advice);
}

/**
 * The leader's answer to a command already in the inbox (queueLocalCommand), or the error that says
 * none came within `waitMs` and why (`advice`: what keeps the room's nodes from leading it).
 */
export async function answerOf(
  store: Store,
  roomId: string,
  eventId: string,
  waitMs: number,
  policy: CommandPolicy,
  advice?: () => Promise<string | null>,
): Promise<CommandAnswer> {
  const answer = await awaitLocalCommand(store, eventId, waitMs, policy);
  if (answer !== null) return answer;
  const why = await advice?.();
  throw new SetupError(
    `no leader of room ${roomId} answered within ${waitMs / 1000}s; the command stays in the inbox and ` +
      (why === null || why === undefined
        ? "is handled when a node of the room runs (start one with `dagbot node`)"
        : `is handled when a node leads the room: ${why}`),
    1,
  );
}

export interface RoomOptions extends CommonOptions {
  room?: string;
  wait: string;
}

/** The room a subcommand talks to, through its leader. */
export interface LeaderRoom {
  readonly store: Store;
  readonly roomId: string;
  readonly policy: CommandPolicy;
  /** `command()` in this room, with the subcommand's --wait. */
  /** `selfLead`: in a room no node leads, this command applies the command itself (policy). */
  send(
    body: CommandData,
    options?: { requireLiveNode?: boolean; selfLead?: boolean },
  ): Promise<CommandAnswer>;
}

/** Reads --wait, the config and the room, opens the store for `use`, and closes it after. */
export async function withLeaderRoom<T>(
  options: RoomOptions,
  use: (room: LeaderRoom) => Promise<T>,
): Promise<T> {
  const waitMs = waitSeconds(options.wait);
  const config = resolveConfig(options, {}, { storeOnly: true });
  const roomId = pickRoom(config, options.room);
  const policy = commandPolicy(config);
  const store = await openConfiguredStore(config);
  try {
    return await use({
      store,
      roomId,
      policy,
      send: (body, sendOptions) =>
        command(store, roomId, body, waitMs, policy, {
          ...(sendOptions?.requireLiveNode === undefined
            ? {}
            : { requireLiveNode: sendOptions.requireLiveNode }),
          leaderless: {
            advice: () => noLeaderAdvice(store, config, roomId),
            ...(sendOptions?.selfLead === true
              ? {
                  handle: (eventId: string) =>
                    handleWithoutLeader(store, config, makeLogger(config, "error"), roomId, eventId),
                }
              : {}),
          },
        }),
    });
  } finally {
    await store.close();
  }
}
