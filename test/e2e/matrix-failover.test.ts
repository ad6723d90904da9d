/**
 * The Matrix bot when things break, with three real `dagbot start` processes and a real Synapse:
 * kill -9 of the leader during a run, every node stopped while commands (and more chatter than one
 * sync's timeline holds) are sent and then restarted from their stored sync tokens, and Synapse
 * restarted mid-run. Throughout, every command gets exactly one reply and every run one final message.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { DEFAULT_TIMELINE_LIMIT } from "../../src/adapters/matrix/intake.js";
import type { Store } from "../../src/ports/store.js";
import type { BotFleet } from "../support/bot-fleet.js";
import {
  bodyOf,
  cardEditSaying,
  cardOf,
  countByTxn,
  publishJson,
  replyTo,
  roomHistory,
  txnOf,
} from "../support/bot-chat.js";
import type { MatrixUser } from "../support/matrix-user.js";
import { useRoomWithPeople } from "../support/room-with-people.js";
import { waitFor } from "../support/store-wait.js";

// A failed test keeps Synapse's data dir too (the fixture's useSynapse does).
const room = useRoomWithPeople({
  // No power levels set: alice creates the room, so she is at 100 by Synapse's default.
  people: { alice: { localpart: "fo-alice" } },
  bots: { prefix: "fobot", count: 3 },
  roomName: "failover",
  fleet: (ids) => ({ config: { permissions: { power_level: 50, auto_confirm: [ids.alice] } } }),
  tailLines: 25,
});
let fleet: BotFleet;
let store: Store;
let roomId: string;
let alice: MatrixUser;
const commands: string[] = [];
const runIds: string[] = [];

/** bot-sdk backs off 5–15 s after a failed sync; a reconnect can take that long on top of the work. */
const T = 60_000;

async function send(body: string): Promise<string> {
  const id = await alice.sendText(roomId, body);
  commands.push(id);
  return id;
}

const slowDag = (id: string, seconds: number) => ({
  id,
  tasks: [
    // A task that was running on a killed node is retried elsewhere once its lease expires.
    { id: "one", action: "sleep", args: { seconds }, retries: 2, retry_backoff: "100ms" },
    { id: "two", action: "sleep", args: { seconds }, needs: ["one"], retries: 2, retry_backoff: "100ms" },
    { id: "three", action: "echo", args: { message: "done" }, needs: ["two"], retries: 2 },
  ],
});

async function leaderIndex(): Promise<number> {
  const lease = await waitFor(
    "a leader",
    () => store.getLease(roomId),
    (l) => l !== null && l.holder !== null && l.expiresAt > l.now,
    { timeoutMs: T, intervalMs: 50 },
  );
  return fleet.nodes.findIndex((n) => n.nodeId === lease!.holder!.nodeId);
}

async function runOf(dagId: string) {
  const run = await waitFor(
    "the run",
    () => store.getRun(roomId, dagId),
    (r) => r !== null,
    { timeoutMs: T },
  );
  return run!;
}

async function someTaskRunning(runId: string): Promise<void> {
  await waitFor(
    "a running task",
    () => store.listTasks(runId),
    (ts) => ts.some((t) => t.status === "running"),
    { timeoutMs: T },
  );
}

beforeAll(() => {
  ({
    roomId,
    store,
    fleet,
    people: { alice },
  } = room);
});

describe("the Matrix bot through failures", () => {
  it("kill -9 of the leader during a run: the run finishes; commands before, during and after get one reply each", async () => {
    const publish = await send(publishJson(slowDag("fo_kill", 1.5)));
    await alice.waitFor(replyTo(publish), T, "the publish reply");
    const before = await send("!dag status fo_kill");
    await alice.waitFor(replyTo(before), T, "the reply sent before the kill");
    const run = await runOf("fo_kill");
    runIds.push(run.runId);
    await someTaskRunning(run.runId);

    const victim = await leaderIndex();
    await fleet.kill(victim);
    const during = [await send("!dag status fo_kill"), await send("!dag list"), await send("!dag nodes")];
    const successor = await waitFor(
      "a new leader",
      () => leaderIndex(),
      (i) => i !== victim,
      { timeoutMs: T },
    );
    expect(fleet.running(successor)).toBe(true);
    const after = [await send("!dag status fo_kill"), await send("!dag help")];

    const card = await alice.waitFor(cardOf("fo_kill"), T, "the card");
    await alice.waitFor(cardEditSaying(card.event_id, /succeeded/), T, "the card edited to succeeded");
    await alice.waitFor((e) => txnOf(e) === `final.${run.runId}`, T, "the final message");
    for (const id of [...during, ...after]) await alice.waitFor(replyTo(id), T, `the reply to ${id}`);
    expect((await store.getRun(roomId, "fo_kill"))?.status).toBe("succeeded");

    const counts = countByTxn(await roomHistory(alice, roomId));
    for (const id of [publish, before, ...during, ...after]) expect(counts.get(`reply.${id}`)).toBe(1);
    expect(counts.get(`final.${run.runId}`)).toBe(1);
    expect(counts.get(`card.${run.runId}`)).toBe(1);

    await fleet.start(victim);
  }, 120_000);

  it("all nodes stopped while commands and a long gap are sent: restarted from their tokens, each command is handled once", async () => {
    for (const n of fleet.nodes) await fleet.stop(n.index);
    const early = [await send("!dag status fo_kill"), await send(publishJson(slowDag("fo_gap", 0.2)))];
    // More events than one sync's timeline holds, so the restarted nodes see a `limited` timeline.
    for (let i = 0; i < DEFAULT_TIMELINE_LIMIT + 10; i++) await alice.sendText(roomId, `chatter ${i}`);
    const late = [await send("!dag list"), await send("!dag status fo_gap")];

    // One node first: it alone must find every command, including those before the gap.
    await fleet.start(1);
    for (const id of [...early, ...late]) await alice.waitFor(replyTo(id), T, `the reply to ${id}`);
    expect(fleet.logLines(1, "matrix sync started").at(-1)).toMatchObject({ resumed: true });
    expect(fleet.logLines(1, "backfilled a sync gap").length).toBeGreaterThan(0);
    await fleet.start(0);
    await fleet.start(2);

    const run = await runOf("fo_gap");
    runIds.push(run.runId);
    await alice.waitFor((e) => txnOf(e) === `final.${run.runId}`, T, "the final message of fo_gap");
    // A later command is answered after anything the restarted nodes might still have replayed.
    const marker = await send("!dag status fo_gap");
    await alice.waitFor(replyTo(marker), T, "the marker's reply");
    const counts = countByTxn(await roomHistory(alice, roomId));
    const wrong = commands.filter((id) => counts.get(`reply.${id}`) !== 1);
    expect(wrong).toEqual([]);
    expect(await store.listRuns(roomId)).toHaveLength(2);
  }, 120_000);

  it("Synapse restarted mid-run: the bots reconnect, the run finishes, and new commands are answered", async () => {
    const publish = await send(publishJson(slowDag("fo_synapse", 2)));
    await alice.waitFor(replyTo(publish), T, "the publish reply");
    const run = await runOf("fo_synapse");
    runIds.push(run.runId);
    await someTaskRunning(run.runId);
    await room.hs.restart();
    const after = await send("!dag status fo_synapse");
    const reply = await alice.waitFor(replyTo(after), T, "the reply after the restart");
    expect(bodyOf(reply)).toMatch(/fo_synapse/);
    await waitFor(
      "the run to end",
      () => store.getRun(roomId, "fo_synapse"),
      (r) => r?.status === "succeeded",
      {
        timeoutMs: T,
      },
    );
    await alice.waitFor((e) => txnOf(e) === `final.${run.runId}`, T, "the final message");

    const counts = countByTxn(await roomHistory(alice, roomId));
    for (const id of commands) expect(counts.get(`reply.${id}`), id).toBe(1);
    for (const runId of runIds) expect(counts.get(`final.${runId}`), runId).toBe(1);
  }, 120_000);
});
