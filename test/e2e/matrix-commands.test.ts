/**
 * The Matrix bot end to end: three `dagbot start` processes and scripted people in one room of a
 * real Synapse. Commands, replies, status cards, permissions, the two-person rule, reactions,
 * errors, an encrypted room and an invite to a room not in the config. One homeserver and one
 * fleet serve every test of the file; each test uses its own DAG ids.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openSqliteStore } from "../../src/adapters/sqlite/index.js";
import type { Store } from "../../src/ports/store.js";
import { BotFleet } from "../support/bot-fleet.js";
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
import type { MatrixUser, MatrixEvent } from "../support/matrix-user.js";
import { useRoomWithPeople } from "../support/room-with-people.js";
import { waitFor } from "../support/store-wait.js";
import type { RegisteredUser } from "../support/synapse.js";

const room = useRoomWithPeople({
  people: {
    alice: { localpart: "alice", power: 100 }, // publisher
    bob: { localpart: "bob", power: 50 }, // confirmer
    carol: { localpart: "carol" }, // member, power 0
  },
  bots: { prefix: "cmdbot", count: 3 },
  roomName: "dagbot e2e",
  async beforeFleet({ bots, people: { alice } }) {
    const encrypted = await alice.request("POST", "/_matrix/client/v3/createRoom", {
      preset: "private_chat",
      name: "encrypted",
      invite: bots.map((x) => x.userId),
      initial_state: [
        { type: "m.room.encryption", state_key: "", content: { algorithm: "m.megolm.v1.aes-sha2" } },
      ],
    });
    encryptedRoomId = encrypted.room_id;
    return [encryptedRoomId];
  },
  fleet: {
    config: { permissions: { power_level: 50, two_person_rule: true } },
    // This file checks the switch off: an encrypted room then gets one notice (matrix-encrypted.test.ts
    // covers encryption on).
    matrix: { encryption: false },
    library: { "nightly.toml": 'id = "nightly"\n[[tasks]]\nid = "only"\naction = "true"\n' },
  },
});
let store: Store;
let roomId: string;
let encryptedRoomId: string;
let alice: MatrixUser;
let bob: MatrixUser;
let carol: MatrixUser;
let bots: RegisteredUser[];
/** Every command the tests sent, to check at the end that each got exactly one reply. */
const commands: string[] = [];
/** Reply latency per command (reply's origin_server_ts minus the command's), for the report. */
const latencies: number[] = [];

const T = 30_000;

async function command(user: MatrixUser, body: string): Promise<{ id: string; reply: MatrixEvent }> {
  const id = await user.sendText(roomId, body);
  commands.push(id);
  const reply = await alice.waitFor(replyTo(id), T, `the reply to ${JSON.stringify(body.slice(0, 40))}`);
  const sent = await alice.waitFor((e) => e.event_id === id, T, "the command itself");
  latencies.push(reply.origin_server_ts - sent.origin_server_ts);
  return { id, reply };
}

const twoTasks = (id: string, message = "hi") => ({
  id,
  tasks: [
    { id: "first", action: "echo", args: { message } },
    { id: "second", action: "true", needs: ["first"] },
  ],
});

beforeAll(() => {
  ({
    roomId,
    store,
    bots,
    people: { alice, bob, carol },
  } = room);
});

afterAll(() => {
  if (latencies.length > 0) {
    const sorted = [...latencies].sort((x, y) => x - y);
    const pct = (p: number) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
    console.info(
      `[matrix-commands] reply latency over ${sorted.length} commands: median ${pct(0.5)} ms, p90 ${pct(0.9)} ms, max ${sorted.at(-1)} ms`,
    );
  }
});

describe("the Matrix bot in a room of three nodes", () => {
  it("publish → (own confirm refused) → confirm → the run succeeds; the card shows it; one final message", async () => {
    const published = await command(alice, publishJson(twoTasks("e2e_first")));
    expect(published.reply.content["msgtype"]).toBe("m.notice");
    expect(published.reply.content["format"]).toBe("org.matrix.custom.html");
    expect(bodyOf(published.reply)).toMatch(/for confirmation\. Its card is in the thread\.$/);
    const card = await alice.waitFor(cardOf("e2e_first"), T, "the status card");
    // The card is a threaded reply to the publish event.
    expect(card.content["m.relates_to"]).toMatchObject({ rel_type: "m.thread", event_id: published.id });
    expect(bodyOf(card)).toMatch(/awaiting confirmation/);

    // Two-person rule: the publisher cannot confirm her own DAG.
    const own = await command(alice, "!dag confirm e2e_first");
    expect(bodyOf(own.reply)).toMatch(/⛔/);
    expect((await store.getRun(roomId, "e2e_first"))?.status).toBe("pending");

    const confirmed = await command(bob, "!dag confirm e2e_first");
    expect(bodyOf(confirmed.reply)).toMatch(/confirmed/);
    await alice.waitFor(cardEditSaying(card.event_id, /succeeded/), T, "the card edited to succeeded");
    const final = await alice.waitFor(
      (e) => txnOf(e)?.startsWith("final.") === true && bodyOf(e).includes("e2e_first"),
      T,
      "the final message",
    );
    expect(final.content["m.mentions"]).toEqual({ user_ids: [alice.userId] });

    const run = await store.getRun(roomId, "e2e_first");
    expect(run).toMatchObject({ status: "succeeded", confirmedBy: bob.userId, publisher: alice.userId });
    const history = await roomHistory(alice, roomId);
    const counts = countByTxn(history);
    expect(counts.get(`final.${run!.runId}`)).toBe(1);
    expect(counts.get(`card.${run!.runId}`)).toBe(1);
    // Every edit of the card targets the one card event.
    const edits = history.filter((e) => e.content["m.relates_to"]?.rel_type === "m.replace");
    expect(edits.filter((e) => e.content["m.relates_to"].event_id === card.event_id).length).toBeGreaterThan(
      0,
    );
  });

  it("a matrix task's card reads, as a client shows it, one line over its instances; !dag status names an instance", async () => {
    const published = await command(
      alice,
      publishJson({
        id: "e2e_matrix",
        tasks: [
          {
            id: "deploy",
            action: "echo",
            matrix: { region: ["eu", "us"], tier: ["web", "db", "cache"] },
            args: { message: "{matrix.region}-{matrix.tier}" },
          },
        ],
      }),
    );
    expect(bodyOf(published.reply)).toMatch(/for confirmation/);
    const card = await alice.waitFor(cardOf("e2e_matrix"), T, "the matrix run's card");
    // Awaiting confirmation, the card groups the six instances as waiting.
    expect(bodyOf(card)).toContain("`deploy` × 6: 6 ⚪");
    await command(bob, "!dag confirm e2e_matrix");
    // The edit a client shows in place of the card: the group line once every instance succeeded.
    const done = await alice.waitFor(
      cardEditSaying(card.event_id, "`deploy` × 6: 6 ✅"),
      T,
      "the matrix card edited to six succeeded instances",
    );
    expect(String(done.content["m.new_content"]?.body)).toMatch(/6\/6 succeeded/);
    const one = await command(carol, "!dag status e2e_matrix deploy[region=us,tier=db]");
    expect(bodyOf(one.reply)).toContain("deploy[region=us,tier=db]");
    expect(bodyOf(one.reply)).toMatch(/succeeded/);
  });

  it("the same DAG again is 'already exists'; other content under the id is a conflict and stores nothing", async () => {
    const again = await command(alice, publishJson(twoTasks("e2e_first")));
    expect(bodyOf(again.reply)).toMatch(/already exists with the same content/);
    const before = await store.getRun(roomId, "e2e_first");
    const conflict = await command(alice, publishJson(twoTasks("e2e_first", "other words")));
    expect(bodyOf(conflict.reply)).toMatch(/already exists with different content/);
    const after = await store.getRun(roomId, "e2e_first");
    expect(after?.hash).toBe(before?.hash);
    expect((await store.listRuns(roomId)).filter((r) => r.dagId === "e2e_first")).toHaveLength(1);
  });

  it("!dag run starts a new run with checked parameters: its own id, card and confirmation; refusals store nothing", async () => {
    const dag = {
      id: "e2e_params",
      params: { who: { pattern: "[a-z]{1,20}", default: "world" } },
      tasks: [{ id: "greet", action: "echo", args: { message: "hi {params.who}" } }],
    };
    await command(alice, publishJson(dag));
    await command(bob, "!dag confirm e2e_params");
    await waitFor(
      "e2e_params succeeded",
      () => store.getRun(roomId, "e2e_params"),
      (r) => r?.status === "succeeded",
      { timeoutMs: T },
    );
    const before = (await store.listRuns(roomId)).length;
    expect(bodyOf((await command(carol, "!dag run e2e_params who=ann")).reply)).toMatch(/⛔/);
    expect(bodyOf((await command(alice, "!dag run e2e_params who=Ann!")).reply)).toMatch(
      /parameter "who": "Ann!" does not match its pattern/,
    );
    expect(bodyOf((await command(alice, "!dag run e2e_params whom=ann")).reply)).toMatch(
      /unknown parameter "whom"/,
    );
    expect((await store.listRuns(roomId)).length).toBe(before);

    const started = await command(alice, "!dag run e2e_params who=ann");
    expect(bodyOf(started.reply)).toMatch(/New run of e2e_params: `e2e_params\.2`.*who=ann/s);
    expect(bodyOf(started.reply)).toMatch(/for confirmation\. Its card is in the thread\.$/);
    const card = await alice.waitFor(cardOf("e2e_params.2"), T, "the new run's card");
    expect(bodyOf(card)).toContain("hi ann");
    expect(bodyOf((await command(alice, "!dag confirm e2e_params.2")).reply)).toMatch(/⛔/);
    await command(bob, "!dag confirm e2e_params.2");
    await alice.waitFor(
      cardEditSaying(card.event_id, /succeeded/),
      T,
      "the new run's card edited to succeeded",
    );
    const run = (await store.getRun(roomId, "e2e_params.2"))!;
    expect((await store.listTasks(run.runId))[0]?.output).toContain("hi ann");
    expect(bodyOf((await command(carol, "!dag list e2e_params")).reply)).toMatch(/2 runs of `e2e_params`/);
  });

  it("a user below the power level is refused and nothing is stored; help marks what needs an operator and says she is not one", async () => {
    const refused = await command(carol, publishJson(twoTasks("e2e_carol")));
    expect(bodyOf(refused.reply)).toMatch(/⛔/);
    expect(await store.getRun(roomId, "e2e_carol")).toBeNull();
    // Help lists every verb by what people do, not only hers: publish is marked.
    const help = await command(carol, "!dag help");
    expect(bodyOf(help.reply)).toMatch(/`status`/);
    expect(bodyOf(help.reply)).toMatch(/`publish` 🔒/);
    expect(bodyOf(help.reply)).toMatch(/you are not one/);
  });

  it("a malformed DAG and a malformed command get one clear error each, nothing stored", async () => {
    const cyclic = {
      id: "e2e_cycle",
      tasks: [
        { id: "a", action: "true", needs: ["b"] },
        { id: "b", action: "true", needs: ["a"] },
      ],
    };
    const bad = await command(alice, publishJson(cyclic));
    expect(bodyOf(bad.reply)).toMatch(/not valid/);
    expect(bodyOf(bad.reply)).toMatch(/a -> b -> a|b -> a -> b/);
    expect(await store.getRun(roomId, "e2e_cycle")).toBeNull();
    const unknown = await command(alice, "!dag frobnicate now");
    expect(bodyOf(unknown.reply)).toMatch(/unknown command/);
    expect(bodyOf(unknown.reply)).toMatch(/Usage|!dag help/);
  });

  it("✅ on a card confirms it (by an authorised user); a library DAG publishes by name", async () => {
    const published = await command(alice, "!dag publish nightly");
    expect(bodyOf(published.reply)).toMatch(/nightly/);
    const card = await alice.waitFor(cardOf("nightly"), T, "the nightly card");
    // carol may not confirm: her ✅ is refused with a reply in the card's thread.
    const carols = await carol.sendReaction(roomId, card.event_id, "✅");
    const refusal = await alice.waitFor(replyTo(carols), T, "the answer to carol's ✅");
    expect(bodyOf(refusal)).toMatch(/⛔/);
    expect(refusal.content["m.relates_to"]).toMatchObject({ rel_type: "m.thread", event_id: published.id });
    expect((await store.getRun(roomId, "nightly"))?.status).toBe("pending");
    const reaction = await bob.sendReaction(roomId, card.event_id, "✅");
    commands.push(reaction);
    await alice.waitFor(replyTo(reaction), T, "the answer to bob's ✅");
    await alice.waitFor(
      cardEditSaying(card.event_id, /succeeded/),
      T,
      "the nightly card edited to succeeded",
    );
    expect(await store.getRun(roomId, "nightly")).toMatchObject({
      status: "succeeded",
      confirmedBy: bob.userId,
    });
  });

  it("notices and plain chatter are not commands; an edit into a command is answered, not applied", async () => {
    const chatter = await alice.sendText(roomId, "just chatting about !dag things");
    const notice = await alice.sendText(roomId, "!dag help", { msgtype: "m.notice" });
    const original = await alice.sendText(roomId, "typo");
    const edit = await alice.sendEvent(roomId, "m.room.message", {
      msgtype: "m.text",
      body: "* !dag help",
      "m.new_content": { msgtype: "m.text", body: "!dag help" },
      "m.relates_to": { rel_type: "m.replace", event_id: original },
    });
    commands.push(edit);
    const answer = await alice.waitFor(replyTo(edit), T, "the answer to the edit");
    expect(bodyOf(answer)).toMatch(/Edits are not applied/);
    expect(answer.content["m.relates_to"]).toEqual({ "m.in_reply_to": { event_id: original } });
    // A command after them is answered; by then any reply to the others would have been sent first.
    const marker = await command(alice, "!dag list");
    expect(bodyOf(marker.reply)).toMatch(/run/);
    for (const id of [chatter, notice, original]) {
      expect(await store.getInboxEvent(id)).toBeNull();
    }
    const history = await roomHistory(alice, roomId);
    expect(history.filter((e) => [chatter, notice, original].some((id) => replyTo(id)(e)))).toEqual([]);
  });

  it("an encrypted room gets one notice and nothing else; an invite to another room is declined", async () => {
    const stranger = await alice.request("POST", "/_matrix/client/v3/createRoom", {
      preset: "private_chat",
      invite: [bots[0]!.userId],
    });
    const strangerRoom = stranger.room_id as string;
    await alice.waitFor(
      (e) => e.room_id === encryptedRoomId && txnOf(e) === `e2ee-notice.${encryptedRoomId}`,
      T,
      "the encryption notice",
    );
    await alice.waitFor(
      (e) =>
        e.room_id === strangerRoom &&
        e.type === "m.room.member" &&
        e.state_key === bots[0]!.userId &&
        e.content["membership"] === "leave",
      T,
      "bot 1 declining the invite",
    );
    const history = await roomHistory(alice, encryptedRoomId);
    expect(
      history.filter((e) => bots.some((b) => b.userId === e.sender) && e.type === "m.room.message"),
    ).toHaveLength(1);
  });

  it("a command older than the command window when a node first sees it is ignored, never replayed", async () => {
    const { hs } = room;
    const lone = await hs.registerUser("cmdbot-window", { deviceId: "WINDOWBOT" });
    const windowRoom = await hs.createRoom(alice.accessToken, { name: "window", invite: [lone.userId] });
    const stale = await alice.sendText(windowRoom, "!dag list");
    const sent = await alice.waitFor((e) => e.event_id === stale, T, "the stale command");
    // Wait until the command is older than the 2 s window by the homeserver's own timestamp.
    await waitFor(
      "the command to age",
      () => Date.now() - sent.origin_server_ts,
      (age) => age > 2_500,
      {
        timeoutMs: 10_000,
        intervalMs: 100,
      },
    );
    const windowFleet = new BotFleet({
      hs,
      bots: [lone],
      rooms: [windowRoom],
      config: {
        matrix: { homeserver_url: hs.url, user_id: lone.userId, rooms: [windowRoom], command_window: "2s" },
      },
    });
    try {
      await windowFleet.startAll();
      const fresh = await alice.sendText(windowRoom, "!dag list");
      await alice.waitFor(replyTo(fresh), T, "the reply to a fresh command");
      const windowStore = await openSqliteStore(windowFleet.storePath);
      try {
        expect(await windowStore.getInboxEvent(fresh)).not.toBeNull();
        expect(await windowStore.getInboxEvent(stale)).toBeNull();
      } finally {
        await windowStore.close();
      }
      expect(countByTxn(await roomHistory(alice, windowRoom)).get(`reply.${stale}`)).toBeUndefined();
      expect(windowFleet.logLines(0, "ignoring a command older than the command window")).toContainEqual(
        expect.objectContaining({ event: stale }),
      );
    } finally {
      await windowFleet.dispose();
    }
  });

  it("a token of another account than matrix.user_id stops the node with exit status 2", async () => {
    const { hs } = room;
    const real = await hs.registerUser("cmdbot-real");
    const wrong = new BotFleet({
      hs,
      bots: [real],
      rooms: [roomId],
      config: { matrix: { homeserver_url: hs.url, user_id: "@somebody-else:localhost", rooms: [roomId] } },
    });
    try {
      await expect(wrong.start(0)).rejects.toThrow(/exited before ready/);
      expect(await wrong.nodes[0]!.exited).toBe(2);
      expect(wrong.logText(0)).toMatch(
        /the access token belongs to @cmdbot-real:localhost, but matrix.user_id is @somebody-else:localhost/,
      );
      expect(wrong.logText(0)).not.toContain(real.accessToken);
    } finally {
      await wrong.dispose();
    }
  });

  it("every command sent in this file got exactly one reply", async () => {
    const counts = countByTxn(await roomHistory(alice, roomId));
    const wrong = commands
      .filter((id) => counts.get(`reply.${id}`) !== 1)
      .map((id) => [id, counts.get(`reply.${id}`)]);
    expect(wrong).toEqual([]);
    expect(commands.length).toBeGreaterThan(10);
  });
});
