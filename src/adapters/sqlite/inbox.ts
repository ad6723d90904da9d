/**
 * The inbox on SQLite: the operations are written once in store-common/ops/inbox.ts; this names the
 * leader's take as SQLite runs it, for the plan test.
 */
import { NEXT } from "../store-common/ops/inbox.js";
import { compile } from "../store-common/script.js";

/** The leader's take as SQLite runs it (its plan is checked by test/adapters/sqlite-query-plan.test.ts). */
export const NEXT_INBOX_SQL = compile(NEXT, "sqlite").text;
