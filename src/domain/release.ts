/**
 * This release's identity and the fleet's skew rule (docs/architecture.md §11).
 *
 * - RELEASE: the semver of this build, the same as package.json's `version` (a unit test holds
 *   them equal); bumped per release, with a CHANGELOG.md entry.
 * - STORE_SCHEMA: the schema version both stores' migrations end at.
 * - FLEET_PROTOCOL: what a node must understand to lead, claim or change runs in a store. Releases
 *   of one protocol may run side by side in any order; a migration that changes what a stored run
 *   means raises it, and from then on the store refuses the writes of older protocols' nodes.
 */

export const RELEASE = "0.8.3";
export const STORE_SCHEMA = 21;
export const FLEET_PROTOCOL = 3;

/** `dagbot 0.8.3 (store schema 21, fleet protocol 3)`: what `--version` prints. */
export function releaseLine(): string {
  return `dagbot ${RELEASE} (store schema ${STORE_SCHEMA}, fleet protocol ${FLEET_PROTOCOL})`;
}

/**
 * How a node's heartbeat names its release: `dagbot 0.2.0, protocol 2`. A node of a release before
 * 0.2.0 recorded neither: it speaks protocol 1.
 */
export function describeRelease(release: string | null, protocol: number | null): string {
  return `dagbot ${release ?? "before 0.2.0"}, protocol ${protocol ?? 1}`;
}
