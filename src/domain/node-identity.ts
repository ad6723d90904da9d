/**
 * One node id, one process: a node's boot id says which process on which host it is
 * (`<random>.<pid>@<host>`), so a second process started with the same node id can tell a live
 * holder (refused, naming its host and pid) from a previous life of its own (a crash, then a
 * restart on the same host). The nodes table has no column for host and pid; the boot id is what
 * every row of a life already carries (docs/operations.md, "Running many nodes").
 */

export interface ProcessIdentity {
  host: string;
  pid: number;
}

/** A boot id for this life: random, then where it runs. */
export function bootIdOf(random: string, self: ProcessIdentity): string {
  const host = self.host.replace(/[^A-Za-z0-9.-]/g, "_").slice(0, 64) || "unknown";
  return `${random}.${self.pid}@${host}`;
}

/** The host and pid a boot id names; null for one of a release before they were written there. */
export function processOfBootId(bootId: string): ProcessIdentity | null {
  const m = /^[^.@]+\.(\d{1,10})@(.+)$/.exec(bootId);
  if (m === null) return null;
  return { pid: Number(m[1]), host: m[2] ?? "" };
}

/** The row of this node id the store holds at start, as the check reads it. */
export interface HeldBy {
  bootId: string;
  heartbeatAgeMs: number;
}

export type IdentityVerdict =
  | { kind: "free" }
  /** The heartbeat is of this host's earlier process of this node, which is gone. */
  | { kind: "previous-life"; holder: ProcessIdentity }
  | { kind: "held"; holder: ProcessIdentity | null; heartbeatAgeMs: number; retryAfterMs: number };

/**
 * Whether this process may start as the node: yes when no row holds the id, or its heartbeat is
 * older than `liveMs` (the fleet calls such a node gone), or it names this host and a pid that is not
 * alive here (or is this process's own: a container restarted gives its node the same pid).
 */
export function identityVerdict(
  held: HeldBy | null,
  self: ProcessIdentity,
  liveMs: number,
  pidAlive: (pid: number) => boolean,
): IdentityVerdict {
  if (held === null || held.heartbeatAgeMs > liveMs) return { kind: "free" };
  const holder = processOfBootId(held.bootId);
  if (holder !== null && holder.host === bootHost(self) && (holder.pid === self.pid || !pidAlive(holder.pid)))
    return { kind: "previous-life", holder };
  return {
    kind: "held",
    holder,
    heartbeatAgeMs: held.heartbeatAgeMs,
    retryAfterMs: Math.max(0, liveMs - held.heartbeatAgeMs),
  };
}

/** The host as a boot id writes it. */
function bootHost(self: ProcessIdentity): string {
  return processOfBootId(bootIdOf("x", self))?.host ?? self.host;
}
