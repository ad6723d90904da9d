/**
 * Store contract: the fleet's skew rule (docs/architecture.md §11). A connection of a release before
 * 0.2.0 (fleet protocol 1) may still renew, write the output of and finish a task it runs, so what it
 * runs ends once; the store refuses its claims, leases, new runs, tasks and inbox rows with a message
 * naming the release it needs. A store of an older schema is opened only by a caller that may migrate.
 */
import { expect, it } from "vitest";
import { SchemaTooOldError } from "../../../src/ports/errors.js";
import { becomeLeader, dag, ok, offer, publishRunning, session, task } from "../../support/store-fixtures.js";
import type { ContractContext } from "../context.js";

const NEEDS = /needs dagbot 0\.5\.0 or later \(fleet protocol 3\)/;

export function fleetSection(ctx: ContractContext): void {
  const refused = async (sql: string): Promise<unknown> =>
    ctx.capabilities.asOlderRelease(sql).then(
      () => null,
      (e: unknown) => e,
    );
  const q = (s: string): string => `'${s.replaceAll("'", "''")}'`;

  it("an older release's connection may not claim, lead, start a run or queue a command", async () => {
    const store = await ctx.store();
    const room = ctx.uid("!fleet");
    const fence = await becomeLeader(store, room);
    const run = await publishRunning(store, fence, dag(ctx.uid("f"), [task("a")]));
    expect((await store.getTask(run.runId, "a"))?.status).toBe("queued");

    // Its claim (the statement every release before 0.2.0 claims with sets started_at).
    const claim = await refused(
      `UPDATE tasks SET status = 'running', version = version + 1, claim_version = version + 1,
              executor_node = 'old', executor_boot = 'b', lease_expires_at = 1, started_at = 1
        WHERE run_id = ${q(run.runId)} AND task_id = 'a'`,
    );
    expect(String(claim)).toMatch(NEEDS);
    expect(await store.getTask(run.runId, "a")).toMatchObject({ status: "queued", executor: null });

    // Its lease: neither a takeover nor a renewal nor a new room's lease.
    expect(
      String(await refused(`UPDATE room_leases SET expires_at = expires_at WHERE room_id = ${q(room)}`)),
    ).toMatch(NEEDS);
    expect(
      String(
        await refused(
          `INSERT INTO room_leases (room_id, holder_node, holder_boot, term, expires_at) VALUES (${q(ctx.uid("!new"))}, 'old', 'b', 1, 1)`,
        ),
      ),
    ).toMatch(NEEDS);
    // A new run and a command in the inbox (its CLI and its chat intake).
    expect(
      String(
        await refused(
          `INSERT INTO processed_events (event_id, room_id, sender, origin_server_ts, content, seen_by, status, received_at)
           VALUES (${q(ctx.uid("$e"))}, ${q(room)}, '@a:x', 1, '{}', 'old', 'new', 1)`,
        ),
      ),
    ).toMatch(NEEDS);
    const lease = await store.getLease(room);
    expect(lease?.holder?.nodeId).toBe("leader");
    expect(lease?.term).toBe(fence.term);
  });

  it("a connection of fleet protocol 2 (0.2.0 to 0.4.0) may not claim, lead or start a run either: it would not judge run conditions", async () => {
    const store = await ctx.store();
    const room = ctx.uid("!fleet");
    const fence = await becomeLeader(store, room);
    const run = await publishRunning(store, fence, dag(ctx.uid("f"), [task("a")]));
    const claim = await ctx.capabilities
      .asOlderRelease(
        `UPDATE tasks SET status = 'running', version = version + 1, started_at = 1
          WHERE run_id = ${q(run.runId)} AND task_id = 'a'`,
        2,
      )
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect(String(claim)).toMatch(NEEDS);
    const lease = await ctx.capabilities
      .asOlderRelease(`UPDATE room_leases SET expires_at = expires_at WHERE room_id = ${q(room)}`, 2)
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect(String(lease)).toMatch(NEEDS);
    expect((await store.getTask(run.runId, "a"))?.status).toBe("queued");
    // Its finish of a task it runs still passes: what it runs ends once.
    await ctx.capabilities.asOlderRelease(
      `UPDATE tasks SET output = 'half' WHERE run_id = ${q(run.runId)} AND task_id = 'a'`,
      2,
    );
    expect((await store.getTask(run.runId, "a"))?.output).toBe("half");
  });

  it("an older release's connection may still renew, write the output of and finish the task it runs", async () => {
    const store = await ctx.store();
    const room = ctx.uid("!fleet");
    const fence = await becomeLeader(store, room);
    const run = await publishRunning(store, fence, dag(ctx.uid("f"), [task("a"), task("b")]));
    // Claimed before the migration, by the older node: arranged here through this release.
    const w = session("old");
    const claimed = await store.claimTask(offer(w, [room]));
    expect(claimed).not.toBeNull();
    const where = `run_id = ${q(run.runId)} AND task_id = ${q(claimed!.task.taskId)}`;
    await ctx.capabilities.asOlderRelease(
      `UPDATE tasks SET lease_expires_at = lease_expires_at + 1000 WHERE ${where}`,
    );
    await ctx.capabilities.asOlderRelease(
      `UPDATE tasks SET output = 'half', output_bytes = 4 WHERE ${where}`,
    );
    await ctx.capabilities.asOlderRelease(
      `UPDATE tasks SET status = 'succeeded', version = version + 1, lease_expires_at = NULL, finished_at = 2,
              exit_code = 0, output = 'done', output_bytes = 4 WHERE ${where}`,
    );
    expect(await store.getTask(run.runId, claimed!.task.taskId)).toMatchObject({
      status: "succeeded",
      exitCode: 0,
    });
    // This release's nodes go on as before beside it.
    const next = await store.claimTask(offer(session("new"), [room]));
    expect(next).not.toBeNull();
    await store.finishTask(next!.token, ok);
  });

  it("refuses a store of an older schema unless the caller may migrate, and leaves it as it was", async () => {
    const { open } = await ctx.capabilities.legacyStore(4, []);
    const refusal = await open().catch((e: unknown) => e);
    expect(refusal).toBeInstanceOf(SchemaTooOldError);
    expect(refusal).toMatchObject({ found: 4 });
    expect(String(refusal)).toContain("dagbot migrate");
    // Refused again (nothing was migrated), then opened by a caller that may migrate.
    expect(await open().catch((e: unknown) => e)).toBeInstanceOf(SchemaTooOldError);
    const migrated = await open({ migrate: true });
    await migrated.close();
    const reopened = await open();
    await reopened.close();
  });
}
