/**
 * A gate's message written late says the time left then (docs/dag-format.md, "Approval gates"): the leader's card
 * keeper (src/app/status-cards.ts) over a real SQLite store whose clock the test sets. The gate opens
 * at 07:21 with a 4-hour deadline; its leader is gone before it posts the message, and the next
 * leader, 3h10m later, writes "in 50m", not the "in 4h" counted from the opening. An approval's edit
 * 20 minutes after that says "in 30m".
 */
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { silentLogger } from "../../src/adapters/log/pino-logger.js";
import { CardKeeper } from "../../src/app/status-cards.js";
import { gateTxnId } from "../../src/app/render/gate-messages.js";
import type { GateSpec } from "../../src/domain/gates.js";
import type { OutboxMessage } from "../../src/ports/store.js";
import { FakeClock } from "../support/fake-clock.js";
import { sqliteTestDb } from "../support/sqlite-harness.js";
import {
  becomeLeader,
  cmd,
  dag,
  offer,
  ok,
  publishRunning,
  session,
  task,
} from "../support/store-fixtures.js";

const MINUTE = 60_000;
const OPENED = Date.UTC(2030, 0, 1, 7, 21);
const GATE: GateSpec = {
  who: "operators",
  approvers: 2,
  publisherMayApprove: false,
  timeoutMs: 240 * MINUTE,
  onTimeout: "fail",
  description: "roll out",
  form: {},
};

const db = sqliteTestDb("gate-time-left");
let failed = false;
afterEach((t) => {
  if (t.task.result?.state === "fail") failed = true;
});
afterAll(() => db.cleanup(failed));

/** The third line of a gate message, or of the new content of its edit. */
function untilLine(row: OutboxMessage | null): string | undefined {
  const content = row?.content ?? {};
  const shown = (content["m.new_content"] as Record<string, unknown> | undefined) ?? content;
  return String(shown["body"]).split("\n")[2];
}

describe("a gate's message written after the gate opened", () => {
  it("counts its time left from when it is written, by the next leader and after an approval", async () => {
    let now = OPENED;
    const store = await db.open({ clock: () => now });
    try {
      const room = "!late-gate";
      const first = await becomeLeader(store, room, "first");
      const run = await publishRunning(
        store,
        first,
        dag("rel", [
          task("build"),
          task("ok", { action: "approve", needs: ["build"], gate: GATE }),
          task("deploy", { needs: ["ok"] }),
        ]),
      );
      const claimed = await store.claimTask(offer(session("worker"), [room]));
      expect(claimed?.task.taskId).toBe("build");
      await store.finishTask(claimed!.token, ok);
      expect((await store.scheduleStep(first)).opened).toBe(1);
      expect((await store.getTask(run.runId, "ok"))!.deadline).toBe(OPENED + 240 * MINUTE);

      // The first leader is gone before its card keeper ran; the next one takes the room 3h10m on.
      now = OPENED + 190 * MINUTE;
      // A lease longer than the clock moves in this test: it stays leader through it.
      const { expiresAt: _expiresAt, ...next } = await store.acquireLease(
        room,
        session("next"),
        24 * 60 * MINUTE,
      );
      const keeper = new CardKeeper(
        { store, clock: new FakeClock(), logger: silentLogger() },
        next,
        silentLogger(),
      );
      await keeper.pass(50);
      const txn = gateTxnId(run.runId, "ok");
      expect(untilLine(await store.getOutbox(txn))).toBe(
        "Expires at 11:21 UTC (in 50m): then it fails; once approved, `deploy` runs",
      );

      // 20 minutes later, the first of two approvals: its edit says the time left then.
      now += 20 * MINUTE;
      const decided = await store.decideGate(cmd(next), room, "rel", "ok", {
        decision: "approve",
        by: "@carol:x",
        face: "chat",
        values: {},
        reason: null,
      });
      expect(decided.verdict.kind).toBe("recorded");
      await keeper.pass(0);
      expect(untilLine(await store.getOutbox(`${txn}.a1`))).toBe(
        "Expires at 11:21 UTC (in 30m): then it fails; once approved, `deploy` runs",
      );
    } finally {
      await store.close();
    }
  });
});
