/**
 * An operator's mark of a task (docs/architecture.md §3, "Mark"): one fenced transaction, written
 * once for both stores. The domain decides (decideMark in src/domain/task-mark.ts) on the run and
 * its tasks as read, locked, in the transaction; the statements carry the decided values: the
 * task's move (guarded by the status and version read) and the dependents it lets go on (guarded by
 * their status), the log lines, and the command's inbox row marked with the result.
 */
import type { MarkInput, MarkVerdict } from "../../../domain/task-mark.js";
import { decideMark, markWords } from "../../../domain/task-mark.js";
import { ConflictError, NotFoundError } from "../../../ports/errors.js";
import type { CommandContext, MarkTaskResult } from "../../../ports/store.js";
import { checkRoom } from "../checks.js";
import { RUN_COLUMNS, sessionKey, TASK_COLUMNS } from "../records.js";
import type { Script } from "../script.js";
import { log, mappers, p, row, rows, run, sql, touch } from "../script.js";
import { holdFence } from "./fence.js";
import { answerTaskDecision } from "./inbox-handled.js";

// Locked on PostgreSQL: a cancel or a derived end of the run either came first or waits for the mark.
// The clock comes with the row (no round trip of its own): the mark's words say when.
const RUN = sql("a run by its DAG, locked, and the clock")`
  SELECT ${RUN_COLUMNS}, ${p.now} AS now FROM runs
   WHERE room_id = ${p.text("roomId")} AND dag_id = ${p.text("dagId")}${p.only({ postgres: " FOR UPDATE" })}`;

// Every task of the run, locked: a claim, a finish or the scheduler either came first or waits.
const TASKS = sql("a run's tasks, locked")`
  SELECT ${TASK_COLUMNS} FROM tasks WHERE run_id = ${p.text("runId")} ORDER BY seq${p.only({ postgres: " FOR UPDATE" })}`;

// A queued task marked leaves the queue: nothing claims it (status), and it holds no slot.
const MARK = sql("a task's mark")`
  UPDATE tasks SET status = ${p.text("to")}, version = version + 1, error = ${p.text("words")},
         finished_at = ${p.now}, deadline = NULL, not_before = NULL
   WHERE run_id = ${p.text("runId")} AND task_id = ${p.text("taskId")}
     AND status = ${p.text("from")} AND version = ${p.int("version")}`;

const REVIVE = sql("the dependents a mark lets go on")`
  UPDATE tasks SET status = 'blocked', version = version + 1, finished_at = NULL
   WHERE run_id = ${p.text("runId")} AND task_id${p.inList("taskIds")} AND status = 'skipped'
     AND error IS NULL AND gate_state IS NULL`;

export function* markTask(
  ctx: CommandContext<MarkTaskResult>,
  roomId: string,
  dagId: string,
  taskId: string,
  input: MarkInput,
): Script<MarkTaskResult> {
  const operation = `mark task ${input.to}`;
  const m = yield* mappers();
  yield* holdFence(operation, ctx.fence);
  checkRoom(operation, ctx, roomId);
  const runRow = yield* row(RUN, { roomId, dagId });
  if (runRow === undefined) throw new NotFoundError(operation, { roomId, dagId });
  const theRun = m.toRun(runRow);
  const tasks = (yield* rows(TASKS, { runId: theRun.runId })).map((r) => m.toTask(r));
  const before = tasks.find((t) => t.taskId === taskId);
  const verdict: MarkVerdict | null = decideMark(
    theRun.status,
    tasks.map((t) => ({
      taskId: t.taskId,
      status: t.status,
      needs: t.needs,
      error: t.error,
      gateOpened: t.gateState !== null,
    })),
    taskId,
    input.to,
  );
  if (before === undefined || verdict === null) throw new NotFoundError(operation, { roomId, dagId, taskId });
  if (verdict.kind === "marked") {
    const at = Number(runRow["now"]);
    const moved = yield* run(MARK, {
      to: verdict.to,
      words: markWords(input, at),
      runId: theRun.runId,
      taskId,
      from: verdict.from,
      version: before.version,
    });
    // The rows are locked (PostgreSQL) or the database is (SQLite): a miss is a bug, never a race.
    if (moved !== 1)
      throw new ConflictError(operation, { status: verdict.from, version: before.version }, { taskId });
    const revived =
      verdict.revive.length === 0 ? 0 : yield* run(REVIVE, { runId: theRun.runId, taskIds: verdict.revive });
    if (revived !== verdict.revive.length)
      throw new ConflictError(operation, { revive: verdict.revive }, { revived });
    const actor = sessionKey(ctx.fence.session);
    const line = { runId: theRun.runId, term: ctx.fence.term, actor };
    const who = { by: input.by, face: input.face, reason: input.reason };
    yield* log(roomId, {
      ...line,
      kind: `task.${verdict.to}`,
      taskId,
      data: { mark: true, from: verdict.from, ...who },
    });
    for (const id of verdict.revive)
      yield* log(roomId, { ...line, kind: "task.blocked", taskId: id, data: { markOf: taskId, ...who } });
    yield* touch("tasks", roomId);
  }
  return yield* answerTaskDecision(ctx, verdict, theRun, before);
}
