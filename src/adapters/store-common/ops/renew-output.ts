/**
 * A worker's writes to the task it holds that are not changes of state, written once for both
 * stores: a renewal of its lease and the output so far (docs/architecture.md §3, "Task lease").
 * Each is one guarded UPDATE fenced by the token (TOKEN_HOLDS), not logged, its version unchanged;
 * on PostgreSQL one round trip, as before (a second only to explain a refusal).
 */
import type { TaskStatus } from "../../../domain/model.js";
import type { TaskToken } from "../../../ports/store.js";
import { checkTaskLease, outputBytes, outputTail } from "../checks.js";
import type { Script } from "../script.js";
import { p, row, sql } from "../script.js";
import { TOKEN_HOLDS, tokenMiss, tokenValues } from "./task-token.js";

const RENEW = sql("a task's lease, renewed")`
  UPDATE tasks SET lease_expires_at = ${p.now} + ${p.int("leaseMs")}
   WHERE ${TOKEN_HOLDS}
  RETURNING lease_expires_at, status`;

const OUTPUT = sql("a task's output so far")`
  UPDATE tasks SET output = ${p.text("output")}, output_bytes = ${p.int("bytes")}
   WHERE ${TOKEN_HOLDS}
  RETURNING 1 AS held`;

export function* renewTaskLease(
  token: TaskToken,
  leaseMs: number,
): Script<{ leaseExpiresAt: number; status: TaskStatus }> {
  checkTaskLease("renew task lease", leaseMs);
  const r = yield* row<{ lease_expires_at: number; status: TaskStatus }>(RENEW, {
    ...tokenValues(token),
    leaseMs: Math.ceil(leaseMs),
  });
  if (r === undefined) throw yield* tokenMiss("renew task lease", token);
  return { leaseExpiresAt: Number(r.lease_expires_at), status: r.status };
}

export function* writeTaskOutput(token: TaskToken, output: string, written: number): Script<void> {
  const held = yield* row(OUTPUT, {
    ...tokenValues(token),
    output: outputTail(output),
    bytes: outputBytes(output, written),
  });
  if (held === undefined) throw yield* tokenMiss("write task output", token);
}
