/**
 * Poison commands: a command whose handling takes the room's leader down (its lease runs
 * out while the command runs, or its process dies) would be taken up by every next leader, for
 * ever. Before handling a row the leader records "started at term T" on it, durably; a new leader
 * that finds a row started under another term and still not handled counts one loss. At
 * QUARANTINE_AFTER_LOSSES the row is answered with one error and never handled again
 * (docs/architecture.md, "Guarantees").
 */

/** Two leaders lost while handling it: a crash or a stall may happen once by chance, not twice. */
export const QUARANTINE_AFTER_LOSSES = 2;

/**
 * A row's handling record after the leader of `term` starts it: a row started under another term
 * and still new was left by a leader that lost its lease, which counts; the same term starting it
 * again (a retry after a store error) does not.
 */
export function handlingAfter(
  startedTerm: number | null,
  losses: number,
  term: number,
): { term: number; losses: number } {
  return { term, losses: startedTerm !== null && startedTerm !== term ? losses + 1 : losses };
}

/** Whether a row with this many losses is quarantined rather than handled. */
export function isQuarantined(losses: number): boolean {
  return losses >= QUARANTINE_AFTER_LOSSES;
}
