/**
 * Fan-out writes of the leader's scheduling step, written once for both stores (docs/dag-format.md
 * "Fan-out"; the decisions are the domain's: scheduling.ts decides when, fan-out.ts what). Each runs
 * inside the step's fenced transaction (holdFence), so a leader that lost its term writes nothing and
 * a new leader finds an expansion done or not done, never half.
 *
 * - expandFanOut: a template whose needs succeeded is replaced by one instance per item of its
 *   producer's list: the instances are inserted from the template's row (action, placement, retries,
 *   timeouts, priority, key, outputs) with their own arguments and item, the template's row is
 *   deleted, and every task of the run that needed the template needs the instances instead. The
 *   template is deleted rather than kept: no worker can claim it, no face has a row to explain, and
 *   its id stays the instances' group (`deploy[item=3]`). The guard is the template's row itself:
 *   only a blocked row with its for_each is expanded, and it is gone once expanded, so a second
 *   expansion, by this leader or the next, finds nothing (and an instance id taken twice would
 *   break the primary key).
 * - stopFanOut: fail_fast's queued instances, skipped while still unclaimed.
 */
import type { ForEachSpec } from "../../../domain/model.js";
import { needsAfterExpansion, planExpansion } from "../../../domain/fan-out.js";
import type { OutputValue } from "../../../domain/outputs.js";
import type { TaskRef } from "../../../domain/scheduling.js";
import type { LeaderFence } from "../../../ports/store.js";
import { sessionKey } from "../records.js";
import type { Script } from "../script.js";
import { log, mappers, p, row, rows, run, sql } from "../script.js";

const TEMPLATE = sql("a fan-out's template, not expanded")`
  SELECT args, for_each FROM tasks
   WHERE run_id = ${p.text("runId")} AND task_id = ${p.text("taskId")}
     AND status = 'blocked' AND for_each IS NOT NULL`;

const PRODUCER = sql("a fan-out's producer's outputs")`
  SELECT output_values FROM tasks
   WHERE run_id = ${p.text("runId")} AND task_id = ${p.text("taskId")} AND status = 'succeeded'`;

const INSERT_INSTANCES = sql("a fan-out's instances")`
  INSERT INTO tasks (run_id, task_id, room_id, status, version, attempt, max_attempts, action, args, needs, labels,
                     node_pin, priority, concurrency_key, timeout_ms, queue_timeout_ms, retry_backoff_ms,
                     output_patterns, rerun_if_lost, fan_out, fan_out_limit, fan_out_fail_fast, item)
  SELECT t.run_id, x.id, t.room_id, 'blocked', 1, 1, t.max_attempts, t.action, x.args, t.needs, t.labels,
         t.node_pin, t.priority, t.concurrency_key, t.timeout_ms, t.queue_timeout_ms, t.retry_backoff_ms,
         t.output_patterns, t.rerun_if_lost, t.task_id, ${p.int("limit")}, ${p.bool("failFast")}, x.item
    FROM tasks t, ${p.table("instances", "x", { n: "int", id: "text", args: "json", item: "text" })}
   WHERE t.run_id = ${p.text("runId")} AND t.task_id = ${p.text("taskId")}
     AND t.status = 'blocked' AND t.for_each IS NOT NULL
   ORDER BY x.n`;

const DELETE_TEMPLATE = sql("a fan-out's template, expanded")`
  DELETE FROM tasks
   WHERE run_id = ${p.text("runId")} AND task_id = ${p.text("taskId")}
     AND status = 'blocked' AND for_each IS NOT NULL
  RETURNING task_id`;

const SKIP_TEMPLATE = sql("a fan-out's template, skipped")`
  UPDATE tasks SET status = 'skipped', version = version + 1, finished_at = ${p.now}, error = ${p.text("why")}
   WHERE run_id = ${p.text("runId")} AND task_id = ${p.text("taskId")}
     AND status = 'blocked' AND for_each IS NOT NULL
  RETURNING task_id`;

const RUN_NEEDS = sql("the needs of a run's tasks")`
  SELECT task_id, needs FROM tasks WHERE run_id = ${p.text("runId")}`;

const SET_NEEDS = sql("needs, the template replaced by its instances")`
  UPDATE tasks SET needs = x.needs, version = version + 1
    FROM ${p.table("rows", "x", { task_id: "text", needs: "textList" })}
   WHERE tasks.run_id = ${p.text("runId")} AND tasks.task_id = x.task_id`;

const STOP = sql("a fail_fast fan-out's queued instances, skipped")`
  UPDATE tasks SET status = 'skipped', version = version + 1, finished_at = ${p.now},
         error = coalesce(error, ${p.text("why")})
    FROM ${p.table("refs", "m", { run_id: "text", task_id: "text" })}
   WHERE tasks.run_id = m.run_id AND tasks.task_id = m.task_id AND tasks.status = 'queued'
  RETURNING tasks.run_id, tasks.task_id`;

/** Replaces one template by its instances; the number of instances, or null when it was not there to expand. */
export function* expandFanOut(fence: LeaderFence, t: TaskRef): Script<number | null> {
  const m = yield* mappers();
  const template = yield* row<{ args: unknown; for_each: unknown }>(TEMPLATE, { ...t });
  if (template === undefined) return null;
  const spec = m.json<ForEachSpec>(template.for_each);
  const producer = yield* row<{ output_values: unknown }>(PRODUCER, {
    runId: t.runId,
    taskId: spec.producer,
  });
  const published =
    producer?.output_values === null || producer?.output_values === undefined
      ? null
      : m.json<Record<string, OutputValue>>(producer.output_values);
  const instances = planExpansion(t.taskId, spec, m.json(template.args), published);
  if (typeof instances === "string") {
    // Past the bound: skipped with the reason (what needs it follows), never half expanded.
    const skipped = yield* rows(SKIP_TEMPLATE, { ...t, why: `not fanned out: ${instances}` });
    if (skipped.length === 1)
      yield* log(fence.roomId, {
        kind: "task.skipped",
        runId: t.runId,
        taskId: t.taskId,
        term: fence.term,
        actor: sessionKey(fence.session),
      });
    return null;
  }
  if (instances.length > 0)
    yield* run(INSERT_INSTANCES, {
      ...t,
      limit: spec.maxParallel,
      failFast: spec.failFast,
      instances: instances.map((x, n) => ({ n, id: x.id, args: x.args, item: x.item })),
    });
  const deleted = yield* rows(DELETE_TEMPLATE, { ...t });
  if (deleted.length !== 1)
    throw new Error(`expand fan-out ${t.taskId}: its template was not there to replace`);
  const ids = instances.map((x) => x.id);
  const changed: Array<{ task_id: string; needs: string[] }> = [];
  for (const r of yield* rows<{ task_id: string; needs: unknown }>(RUN_NEEDS, { runId: t.runId })) {
    const needs = needsAfterExpansion(m.json<string[]>(r.needs), t.taskId, ids);
    if (needs !== null) changed.push({ task_id: r.task_id, needs });
  }
  if (changed.length > 0) yield* run(SET_NEEDS, { runId: t.runId, rows: changed });
  yield* log(fence.roomId, {
    kind: "fan_out.expanded",
    runId: t.runId,
    taskId: t.taskId,
    term: fence.term,
    actor: sessionKey(fence.session),
    data: { producer: spec.producer, output: spec.output, items: instances.length },
  });
  return instances.length;
}

/** Skips fail_fast's queued instances still unclaimed; the number skipped. */
export function* stopFanOut(fence: LeaderFence, refs: readonly TaskRef[]): Script<number> {
  if (refs.length === 0) return 0;
  const stopped = yield* rows<{ run_id: string; task_id: string }>(STOP, {
    why: "skipped: another instance of its fan-out failed (fail_fast)",
    refs: refs.map((r) => ({ run_id: r.runId, task_id: r.taskId })),
  });
  for (const s of stopped)
    yield* log(fence.roomId, {
      kind: "task.skipped",
      runId: s.run_id,
      taskId: s.task_id,
      term: fence.term,
      actor: sessionKey(fence.session),
    });
  return stopped.length;
}
