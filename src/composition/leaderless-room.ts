/**
 * A room without a leader because its nodes' [permissions] disagree with its stored policy: how the
 * CLI and HTTP faces say so (with the commands that end it), and how a `policy` command is applied
 * there by the face itself, under the room's lease for the one command, since no node will lead
 * until the policy and the configs agree (docs/architecture.md §5).
 */
import { randomUUID } from "node:crypto";
import { handleInboxEvent, replyToInboxEvent } from "../app/commands/inbox-step.js";
import type { Idiom } from "../app/commands/outcome-table.js";
import { policyConflictAdvice } from "../app/commands/verbs/policy.js";
import type { PolicyConflict } from "../app/node.js";
import { policyDisagreements, policyFixes } from "../app/node.js";
import type { NodeConfig } from "../config/node-config.js";
import { isConflict } from "../ports/errors.js";
import type { Logger } from "../ports/logger.js";
import type { Store } from "../ports/store.js";
import { commandInboxDeps, localSender } from "./command-step.js";

/** The CLI's words for a command: the advice names the command an operator types. */
export const DAGBOT_WORDS: Idiom = { command: (verb, args) => ["dagbot", verb, ...args].join(" ") };

/** Whether no node holds the room's lease now (none, released, or expired on the store's clock). */
export async function roomLeaderless(store: Store, roomId: string): Promise<boolean> {
  const lease = await store.getLease(roomId);
  return lease === null || lease.holder === null || lease.expiresAt <= lease.now;
}

/** How this config's stated [permissions] disagree with the room's stored policy; null when they agree. */
export async function configPolicyConflict(
  store: Store,
  config: NodeConfig,
  roomId: string,
): Promise<PolicyConflict | null> {
  const stored = await store.getRoomPolicy(roomId);
  if (stored === null) return null;
  const p = config.permissions;
  const wanted = {
    powerLevel: p.powerLevel,
    allow: p.allow,
    twoPersonRule: p.twoPersonRule,
    autoConfirm: p.autoConfirm,
    hookAutoConfirm: p.hookAutoConfirm,
    logs: p.logs,
  };
  const disagreements = policyDisagreements(wanted, p.stated, stored.policy);
  if (disagreements.length === 0) return null;
  return { disagreements, fixes: policyFixes(wanted, p.stated, stored.policy) };
}

/**
 * Why a command would find no leader in the room, in `say`'s words, when it is that the nodes (whose
 * config this is) disagree with the room's policy; null when the room has a leader or the config
 * agrees (then nothing here explains a missing leader).
 */
export async function noLeaderAdvice(
  store: Store,
  config: NodeConfig,
  roomId: string,
  say: Idiom = DAGBOT_WORDS,
): Promise<string | null> {
  if (!(await roomLeaderless(store, roomId))) return null;
  const conflict = await configPolicyConflict(store, config, roomId);
  return conflict === null
    ? null
    : `no node leads room ${roomId}: ${policyConflictAdvice(roomId, conflict, say)}`;
}

/**
 * Handles one inbox row (a `policy` command) as the room's leader would, under a lease taken for it
 * and released at once, when no node holds the room's lease. False when a leader holds it (then the
 * leader handles the row as usual). The lease's term fences the write like any leader's, so a node
 * that starts leading meanwhile cannot race it.
 */
export async function handleWithoutLeader(
  store: Store,
  config: NodeConfig,
  logger: Logger,
  roomId: string,
  eventId: string,
  holder = localSender(),
): Promise<boolean> {
  if (!(await roomLeaderless(store, roomId))) return false;
  let fence;
  try {
    fence = await store.acquireLease(
      roomId,
      { nodeId: holder, bootId: randomUUID().slice(0, 8) },
      config.lease.ttlMs,
    );
  } catch (err) {
    if (isConflict(err)) return false;
    throw err;
  }
  try {
    const deps = commandInboxDeps(config, store, logger);
    const row = await store.getInboxEvent(eventId);
    if (row?.status === "new") await handleInboxEvent(deps, fence, row);
    await replyToInboxEvent(deps, fence, eventId);
    logger.info(
      { room: roomId, command: eventId, by: holder },
      "applied a command in a room without a leader",
    );
  } finally {
    await store.releaseLease(fence).catch(() => {});
  }
  return true;
}
