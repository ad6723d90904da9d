/**
 * The task fence, written once for both stores (docs/architecture.md §3, "Task"): a worker's write
 * changes its task only while its token — (task, claim version) and the session that claimed it —
 * still holds the task, running or canceling. A write that changed nothing is explained by
 * `tokenMiss`: the task gone, or found in another state or claim.
 */
import { ConflictError, NotFoundError } from "../../../ports/errors.js";
import type { TaskToken } from "../../../ports/store.js";
import { holderKey, sessionKey } from "../records.js";
import type { Param, Script, Statement } from "../script.js";
import { p, row, sql } from "../script.js";

/** A value of the token's condition: a named value, or SQL text (a column of a batch's rows). */
type Slot = Param | string;

/**
 * The token's condition on a `tasks` row, the one place it is written: the task is running or
 * canceling under this claim version and session. A batch of finishes gives each row's token as
 * columns (PostgreSQL's finish batching).
 */
export function tokenHeldBy(by: {
  runId: Slot;
  taskId: Slot;
  version: Slot;
  node: Slot;
  boot: Slot;
}): Statement {
  return sql("the task token's condition")`run_id = ${by.runId} AND task_id = ${by.taskId}
     AND claim_version = ${by.version} AND executor_node = ${by.node}
     AND executor_boot = ${by.boot} AND status IN ('running','canceling')`;
}

/**
 * The token's condition with its values `tokenValues(token)`. Statements embed it
 * (`sql(…)\`… WHERE ${TOKEN_HOLDS}\``).
 */
export const TOKEN_HOLDS = tokenHeldBy({
  runId: p.text("runId"),
  taskId: p.text("taskId"),
  version: p.int("version"),
  node: p.text("node"),
  boot: p.text("boot"),
});

/** The named values of TOKEN_HOLDS. */
export const tokenValues = (token: TaskToken): Record<string, unknown> => ({
  runId: token.runId,
  taskId: token.taskId,
  version: token.version,
  node: token.session.nodeId,
  boot: token.session.bootId,
});

const AS_FOUND = sql("a task's claim, as found")`
  SELECT status, claim_version, executor_node, executor_boot FROM tasks
   WHERE run_id = ${p.text("runId")} AND task_id = ${p.text("taskId")}`;

/** The typed error for a token that no longer holds its task, with the task's claim as found now. */
export function* tokenMiss(operation: string, token: TaskToken): Script<Error> {
  const r = yield* row<{
    status: string;
    claim_version: number | null;
    executor_node: string | null;
    executor_boot: string | null;
  }>(AS_FOUND, { runId: token.runId, taskId: token.taskId });
  if (r === undefined) return new NotFoundError(operation, { runId: token.runId, taskId: token.taskId });
  return new ConflictError(
    operation,
    { status: ["running", "canceling"], version: token.version, executor: sessionKey(token.session) },
    {
      status: r.status,
      version: r.claim_version,
      executor: holderKey(r.executor_node, r.executor_boot),
    },
  );
}
