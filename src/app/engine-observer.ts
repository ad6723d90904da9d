/**
 * What the engine's loops report to whoever counts (the HTTP API's metrics, tests), without the
 * loops knowing about metrics: each loop takes an optional callback, and the engine node maps this
 * observer onto them. Labels come from fixed sets (the loops below, the renewal failure reasons).
 */

/** The loops whose store calls fail and are retried (each counts its own failures). */
export type EngineLoop = "lease" | "leader" | "worker" | "heartbeat" | "outbox";

/** Why a lease renewal failed: another holder (or an expired lease) rejected it, or the store did. */
export type RenewFailure = "conflict" | "error";

export interface EngineObserver {
  /** A renewal of this node's lease of `roomId` failed. */
  leaseRenewFailed?(roomId: string, why: RenewFailure): void;
  /** A store call of `loop` failed with something other than a conflict (it backs off and retries). */
  storeError?(loop: EngineLoop): void;
}
