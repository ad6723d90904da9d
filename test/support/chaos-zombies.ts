/**
 * Zombie writes: what a killed or paused node would still send if it came back believing nothing
 * happened. Before a node is killed the scenario notes its credentials (its leader fence, the task
 * tokens it was executing); afterwards it replays a write with each, and the store must refuse every
 * one with a ConflictError. The count of refusals is the "stale writes rejected" figure.
 */
import { ConflictError } from "../../src/ports/errors.js";
import type { LeaderFence, Store, TaskToken } from "../../src/ports/store.js";
import { ROOM } from "./engine-cluster.js";

export interface ZombieReplay {
  rejected: number;
  /** Writes the store accepted although their credentials were stale: each one breaks a guarantee. */
  accepted: string[];
  /** Writes that failed for another reason than a conflict (printed; they prove nothing either way). */
  otherErrors: string[];
}

export class ZombieLedger {
  readonly fences: LeaderFence[] = [];
  readonly tokens: TaskToken[] = [];

  /** Notes what `nodeId` holds right now: the room's lease, and the tasks it executes in `runId`. */
  async note(store: Store, nodeId: string, runId: string): Promise<void> {
    try {
      const lease = await store.getLease(ROOM);
      if (lease?.holder?.nodeId === nodeId)
        this.fences.push({ roomId: ROOM, session: lease.holder, term: lease.term });
      for (const t of await store.listTasks(runId)) {
        if (t.status === "running" && t.executor?.nodeId === nodeId)
          this.tokens.push({ runId, taskId: t.taskId, version: t.version, session: t.executor });
      }
    } catch {
      // The store is down (the server restarting): nothing to note this time.
    }
  }

  /** Replays one leader write and one lease renewal per fence, and a completion per task token. */
  async replay(store: Store): Promise<ZombieReplay> {
    const out: ZombieReplay = { rejected: 0, accepted: [], otherErrors: [] };
    const attempt = async (what: string, write: () => Promise<unknown>): Promise<void> => {
      try {
        await write();
        out.accepted.push(what);
      } catch (err) {
        if (err instanceof ConflictError) out.rejected += 1;
        else out.otherErrors.push(`${what}: ${String(err)}`);
      }
    };
    for (const fence of this.fences) {
      const who = `${fence.session.nodeId}/${fence.session.bootId} term ${fence.term}`;
      await attempt(`schedule step by ${who}`, () => store.scheduleStep(fence));
      await attempt(`outbox message by ${who}`, () =>
        store.enqueueOutbox(fence, [
          {
            txnId: `zombie.${fence.term}.${fence.session.bootId}`,
            roomId: ROOM,
            eventType: "m.room.message",
            content: { msgtype: "m.notice", body: "a deposed leader speaking" },
          },
        ]),
      );
      await attempt(`lease renewal by ${who}`, () => store.renewLease(fence, 60_000));
    }
    for (const token of this.tokens) {
      await attempt(
        `completion of ${token.taskId} v${token.version} by ${token.session.nodeId}/${token.session.bootId}`,
        () => store.finishTask(token, { outcome: "succeeded", exitCode: 0, output: "zombie", error: null }),
      );
    }
    return out;
  }
}
