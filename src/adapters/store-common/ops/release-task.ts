/**
 * A worker gives back the task it holds, written once for both stores (docs/architecture.md §3,
 * "Task lease"): the node is stopping and will not finish it. The domain decides what a lost attempt
 * becomes (decideLost: back to the queue without spending a retry, or to its end), and the task
 * moves exactly as the reaper moves an overdue one (moveOverdue), guarded by the version read.
 */
import type { TaskStatus } from "../../../domain/model.js";
import { decideLost } from "../../../domain/task-states.js";
import { ConflictError } from "../../../ports/errors.js";
import type { TaskToken } from "../../../ports/store.js";
import { sessionKey } from "../records.js";
import type { ReapRow } from "../reap.js";
import { lostStateOf, REAP_COLUMNS } from "../reap.js";
import type { Script } from "../script.js";
import { log, now, p, row, sql, touch } from "../script.js";
import { moveOverdue } from "./reap.js";
import { TOKEN_HOLDS, tokenMiss, tokenValues } from "./task-token.js";

const HELD = sql("the released task, held and locked")`
  SELECT room_id, ${REAP_COLUMNS} FROM tasks WHERE ${TOKEN_HOLDS}${p.only({ postgres: " FOR UPDATE" })}`;

export function* releaseTask(token: TaskToken, why: string): Script<{ status: TaskStatus }> {
  const operation = "release task";
  const r = yield* row<ReapRow & { room_id: string }>(HELD, tokenValues(token));
  if (r === undefined) throw yield* tokenMiss(operation, token);
  if (r.status !== "running") throw new ConflictError(operation, { status: "running" }, { status: r.status });
  const decision = decideLost(lostStateOf(r), why);
  const { moved, data } = yield* moveOverdue(r, decision, yield* now());
  if (moved !== 1) throw yield* tokenMiss(operation, token);
  yield* log(r.room_id, {
    kind: `task.${decision.to}`,
    runId: token.runId,
    taskId: token.taskId,
    actor: sessionKey(token.session),
    data,
  });
  yield* touch("tasks", r.room_id);
  yield* touch(decision.to === "queued" ? "ready" : "done", r.room_id);
  return { status: decision.to };
}
