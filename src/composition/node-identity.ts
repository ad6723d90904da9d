/**
 * At a node's start: whether another live process already runs this node id (domain/node-identity.ts
 * decides); the message that refuses it names that process's host and pid.
 */
import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import type { IdentityVerdict, ProcessIdentity } from "../domain/node-identity.js";
import { bootIdOf, identityVerdict } from "../domain/node-identity.js";
import { formatDuration } from "../domain/duration.js";
import type { NodeConfig } from "../config/node-config.js";
import type { Logger } from "../ports/logger.js";
import type { Store } from "../ports/store.js";

/** This process, as its boot id says it. */
export function thisProcess(): ProcessIdentity {
  return { host: hostname(), pid: process.pid };
}

/** A fresh boot id for this life of the node. */
export function newBootId(): string {
  return bootIdOf(randomUUID().slice(0, 8), thisProcess());
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists, owned by another user.
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Reads this node id's row and decides; `liveMs` is how long a silent node still counts as alive. */
export async function checkNodeIdentity(
  store: Store,
  nodeId: string,
  liveMs: number,
): Promise<IdentityVerdict> {
  const row = (await store.listNodes()).find((n) => n.session.nodeId === nodeId);
  return identityVerdict(
    row === undefined ? null : { bootId: row.session.bootId, heartbeatAgeMs: row.heartbeatAgeMs },
    thisProcess(),
    liveMs,
    pidAlive,
  );
}

/** Why this process may not start as `nodeId`. */
export function heldMessage(nodeId: string, v: Extract<IdentityVerdict, { kind: "held" }>): string {
  const who =
    v.holder === null
      ? "another process (of a release that does not record its host and pid)"
      : `process ${v.holder.pid} on host ${v.holder.host}`;
  return (
    `node id ${nodeId} is already in use by ${who}, whose heartbeat is ${formatDuration(v.heartbeatAgeMs)} old; ` +
    `each process needs its own node_id. If that process is gone, start again after ${formatDuration(v.retryAfterMs)} ` +
    "(retention.node_gone_after after its last heartbeat)"
  );
}

/**
 * The boot id this process starts the config's node with, or null when another live process holds
 * the node id (said at error level; the caller exits 2). Alive is what `dagbot nodes` calls alive: a
 * heartbeat younger than retention.node_gone_after.
 */
export async function ownNodeId(config: NodeConfig, store: Store, logger: Logger): Promise<string | null> {
  const verdict = await checkNodeIdentity(store, config.nodeId, config.retention.nodeGoneAfterMs);
  if (verdict.kind === "held") {
    logger.error(
      { node: config.nodeId, holder: verdict.holder, heartbeatAgeMs: verdict.heartbeatAgeMs },
      heldMessage(config.nodeId, verdict),
    );
    return null;
  }
  if (verdict.kind === "previous-life")
    logger.info(
      { node: config.nodeId, previous: verdict.holder },
      "the node's last heartbeat is of an earlier process on this host, which is gone: starting",
    );
  return newBootId();
}
