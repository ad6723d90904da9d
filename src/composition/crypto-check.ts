/**
 * The `crypto` readiness check of a chat node (docs/architecture.md §12): whether people whose
 * clients exclude insecure devices can use it, and if not, why.
 */
import type { DeviceSigning } from "../adapters/matrix/crypto/cross-signing.js";

/** How long a message this node could not decrypt keeps its `crypto` readiness check failing. */
export const UNDECRYPTABLE_SHOWN_MS = 10 * 60_000;

/** What the check reads of the node's Matrix intake. */
export interface CryptoState {
  /** The device's crypto, once a room is encrypted (null before). */
  readonly crypto: { readonly signing: DeviceSigning | null } | null;
  readonly lastUndecryptable: { at: number; sender: string; reason: string } | null;
}

/**
 * "ok" while no room is encrypted, or while the device is cross-signed by its account and read
 * everything people sent in the last 10 minutes; otherwise why not, with the last decryption
 * failure's reason.
 */
export function cryptoCheck(intake: CryptoState, now: number): string {
  const problems: string[] = [];
  const signing = intake.crypto?.signing ?? null;
  if (signing !== null && !signing.signed) problems.push(signing.why);
  const last = intake.lastUndecryptable;
  if (last !== null && now - last.at < UNDECRYPTABLE_SHOWN_MS) {
    const ago = Math.round((now - last.at) / 1000);
    problems.push(`an event from ${last.sender} ${ago} s ago could not be decrypted: ${last.reason}`);
  }
  return problems.length === 0 ? "ok" : problems.join("; ");
}
