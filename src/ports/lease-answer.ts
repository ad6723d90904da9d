/**
 * acquireLease's answer, read from one room's syncLeases answer: the same rule for every store
 * and for the node's lease batcher, which answers acquires from a shared statement.
 */
import { ConflictError } from "./errors.js";
import type { LeaderFence, LeaseSync, Session } from "./store.js";

/** A session as holders are written in rows and errors: `nodeId/bootId`. */
export const sessionKey = (s: Session): string => `${s.nodeId}/${s.bootId}`;

/**
 * The fence when the room was acquired; otherwise a ConflictError whose `found` names the holder,
 * term, expiry and the store's clock, so a follower knows whom it waits for and until when.
 */
export function acquiredFence(
  roomId: string,
  session: Session,
  r: LeaseSync,
): LeaderFence & { expiresAt: number } {
  if (r.outcome !== "acquired")
    throw new ConflictError(
      "acquire lease",
      { roomId, freeOrExpired: true },
      {
        holder: r.holder === null ? null : sessionKey(r.holder),
        term: r.term,
        expiresAt: r.expiresAt,
        now: r.now,
      },
    );
  return { roomId, session, term: r.term, expiresAt: r.expiresAt };
}
