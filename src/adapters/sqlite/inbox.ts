/**
 * The inbox on SQLite: the operations are written once in store-common/ops/inbox.ts; this keeps the
 * mark that other SQLite writes still make inside their own transaction.
 */
import type { LeaderFence } from "../../ports/store.js";
import { markHandled } from "../store-common/ops/inbox-handled.js";
import { NEXT } from "../store-common/ops/inbox.js";
import { compile } from "../store-common/script.js";
import type { SqliteConnection, Tx } from "./connection.js";
import { runScript } from "./script-driver.js";

/** The leader's take as SQLite runs it (its plan is checked by test/adapters/sqlite-query-plan.test.ts). */
export const NEXT_INBOX_SQL = compile(NEXT, "sqlite").text;

/**
 * new → handled inside the caller's transaction (a command's effect and its mark commit together).
 * ConflictError when the row is already handled: the command must not take effect twice.
 */
export function markHandledInTx(
  c: SqliteConnection,
  tx: Tx,
  fence: LeaderFence,
  eventId: string,
  result: Record<string, unknown>,
): void {
  runScript(c, tx, markHandled(fence, eventId, result));
}
