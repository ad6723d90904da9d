/**
 * The inbox on PostgreSQL: the operations are written once in store-common/ops/inbox.ts; this keeps
 * the mark that other PostgreSQL writes still make inside their own transaction.
 */
import type { LeaderFence } from "../../ports/store.js";
import { markHandled } from "../store-common/ops/inbox-handled.js";
import type { Tx } from "./db.js";
import { runScript } from "./script-driver.js";

/**
 * new → handled inside the caller's fenced transaction, so a command's effect and its mark commit
 * together. ConflictError when the row is no longer new: the command must not take effect twice.
 */
export async function markHandledInTx(
  tx: Tx,
  fence: LeaderFence,
  eventId: string,
  result: Record<string, unknown>,
): Promise<void> {
  await runScript(tx, markHandled(fence, eventId, result));
}
