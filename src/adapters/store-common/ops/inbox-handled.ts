/**
 * An inbox row goes new → handled inside the fenced transaction of the command it carried, so the
 * command's effect and its mark commit together (docs/architecture.md §4). Written once for both stores.
 */
import { ConflictError, NotFoundError } from "../../../ports/errors.js";
import type { CommandContext, LeaderFence, RunRecord, TaskRecord } from "../../../ports/store.js";
import { sessionKey, TASK_COLUMNS } from "../records.js";
import type { Script } from "../script.js";
import { log, mappers, p, row, run, sql, touch } from "../script.js";

const MARK = sql("an inbox row, new → handled")`
  UPDATE processed_events SET status = 'handled', result = ${p.json("result")}, handled_term = ${p.int("term")},
         handled_at = ${p.now}
   WHERE event_id = ${p.text("eventId")} AND room_id = ${p.text("roomId")} AND status = 'new'`;

const FOUND = sql("an inbox row's status")`
  SELECT status, room_id FROM processed_events WHERE event_id = ${p.text("eventId")}`;

/**
 * The command's row, handled with the caller's answer to `result` (its outcome), when the operation
 * answers a row; a null answer leaves the row new for the caller (ports/store.ts CommandContext).
 */
export function* markAnswered<R>(ctx: CommandContext<R>, result: R): Script<void> {
  if (ctx.inboxEventId === undefined) return;
  const answer = ctx.answer(result);
  if (answer !== null) yield* markHandled(ctx.fence, ctx.inboxEventId, answer);
}

const TASK_NOW = sql("a task, as the command left it")`
  SELECT ${TASK_COLUMNS} FROM tasks WHERE run_id = ${p.text("runId")} AND task_id = ${p.text("taskId")}`;

/**
 * A decision on one task of a run (a gate's, an operator's mark), answered: its result holds the
 * domain's verdict, the run and the task as the write left it, and the command's row keeps the
 * caller's answer to it.
 */
export function* answerTaskDecision<V>(
  ctx: CommandContext<{ verdict: V; run: RunRecord; task: TaskRecord }>,
  verdict: V,
  theRun: RunRecord,
  before: TaskRecord,
): Script<{ verdict: V; run: RunRecord; task: TaskRecord }> {
  const m = yield* mappers();
  const after = yield* row(TASK_NOW, { runId: theRun.runId, taskId: before.taskId });
  const result = { verdict, run: theRun, task: after === undefined ? before : m.toTask(after) };
  yield* markAnswered(ctx, result);
  return result;
}

/** ConflictError when the row is no longer new: the command must not take effect twice. */
export function* markHandled(
  fence: LeaderFence,
  eventId: string,
  result: Record<string, unknown>,
): Script<void> {
  const changed = yield* run(MARK, { result, term: fence.term, eventId, roomId: fence.roomId });
  if (changed === 0) throw yield* explainMiss("mark inbox handled", fence, eventId, "new");
  yield* log(fence.roomId, {
    kind: "inbox.handled",
    term: fence.term,
    actor: sessionKey(fence.session),
    data: { eventId, result },
  });
  yield* touch("inbox", fence.roomId);
}

/** After a mark changed nothing: the row is missing (NotFoundError) or not in the expected status. */
export function* explainMiss(
  operation: string,
  fence: LeaderFence,
  eventId: string,
  expected: "new" | "handled",
): Script<Error> {
  const found = yield* row<{ status: string; room_id: string }>(FOUND, { eventId });
  if (found === undefined) return new NotFoundError(operation, { eventId });
  return new ConflictError(
    operation,
    { eventId, roomId: fence.roomId, status: expected },
    { roomId: found.room_id, status: found.status },
  );
}
