/**
 * What a hostile or careless room member could make the bot do (docs/security.md, the chat side), tried
 * against a real Synapse with scripted people and a real `dagbot start` node:
 * - the confirmer sees what runs: a pending card shows each task's action and arguments and the
 *   content hash; a confirmation names the hash; a message whose formatted text shows another DAG
 *   than its body is refused; an edit is answered, never applied;
 * - every bot message carries m.mentions; the final message reaches the publisher's notifications
 *   and the bot's other messages do not;
 * - only the configured fleet accounts are bots: a member copying a bot message is not muted, and
 *   their copy does not count as a send a new leader inherited;
 * - a message carrying a reaction's fields does not confirm; retry does not revive a rejected run;
 * - the node's access token (in its environment, as the fleet gives it) never reaches the room, even
 *   when an action prints the node's /proc/<pid>/environ or a file holding the token.
 * One homeserver and one node serve the file (the fleet config names a second bot account that is
 * never started: it is only a configured member of the fleet).
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { matrixHttp } from "../../src/adapters/matrix/http.js";
import { MatrixOutboxTransport } from "../../src/adapters/matrix/outbox-transport.js";
import type { Store } from "../../src/ports/store.js";
import { TEST_ACTIONS, type BotFleet } from "../support/bot-fleet.js";
import { bodyOf, cardOf, countByTxn, publishJson, replyTo, roomHistory, txnOf } from "../support/bot-chat.js";
import { MatrixUser, type MatrixEvent } from "../support/matrix-user.js";
import { useRoomWithPeople } from "../support/room-with-people.js";
import type { RegisteredUser } from "../support/synapse.js";

const room = useRoomWithPeople({
  people: {
    alice: { localpart: "sec-alice", power: 100 }, // publisher
    bob: { localpart: "sec-bob", power: 50 }, // confirmer
    carol: { localpart: "sec-carol" }, // member, power 0
  },
  bots: { prefix: "secbot", count: 2 },
  roomName: "dagbot security",
  async beforeFleet({ hs, roomId, bots }) {
    await new MatrixUser(hs.url, bots[1]!).joinRoom(roomId);
  },
  fleet: {
    config: {
      permissions: { power_level: 50, two_person_rule: true },
      actions: {
        ...TEST_ACTIONS,
        environ: {
          argv: ["cat", "/proc/{pid}/environ"],
          args: { pid: { pattern: "[0-9]{1,10}" } },
          timeout: "1m",
          kill_grace: "300ms",
        },
        show: {
          argv: ["cat", "{path}"],
          args: { path: { pattern: "[A-Za-z0-9_./-]{1,200}" } },
          timeout: "1m",
          kill_grace: "300ms",
        },
      },
    },
  },
  start: "first",
});
let fleet: BotFleet;
let store: Store;
let roomId: string;
let alice: MatrixUser;
let bob: MatrixUser;
let carol: MatrixUser;
let bots: RegisteredUser[];

const T = 30_000;

async function command(user: MatrixUser, body: string): Promise<{ id: string; reply: MatrixEvent }> {
  const id = await user.sendText(roomId, body);
  const reply = await alice.waitFor(replyTo(id), T, `the reply to ${JSON.stringify(body.slice(0, 40))}`);
  return { id, reply };
}

const oneTask = (id: string, action: string, message?: string) => ({
  id,
  tasks: [{ id: "t", action, ...(message === undefined ? {} : { args: { message } }) }],
});

/** The notifications Synapse computed for a user (its push rules applied), newest first. */
async function notifications(user: MatrixUser): Promise<Array<{ event: MatrixEvent; actions: unknown[] }>> {
  const res = await user.request("GET", "/_matrix/client/v3/notifications?limit=100");
  return res.notifications as Array<{ event: MatrixEvent; actions: unknown[] }>;
}

beforeAll(() => {
  ({
    roomId,
    store,
    fleet,
    bots,
    people: { alice, bob, carol },
  } = room);
});

describe("what the confirmer sees is what runs", () => {
  it("a publish whose formatted text shows another DAG than its body is refused, nothing stored", async () => {
    const hidden = publishJson(oneTask("sec_twofaced", "fail"));
    const shown = JSON.stringify(oneTask("sec_twofaced", "echo", "hello"), null, 2);
    const id = await alice.sendText(roomId, hidden, {
      formattedBody: `<p>!dag publish</p>\n<pre><code class="language-json">${shown
        .replace(/&/g, "&amp;")
        .replace(/</g, "&lt;")}\n</code></pre>\n`,
    });
    const reply = await alice.waitFor(replyTo(id), T, "the answer to a two-faced publish");
    expect(bodyOf(reply)).toMatch(/formatted text shows a different DAG \(code block\) than its plain text/);
    expect(await store.getRun(roomId, "sec_twofaced")).toBeNull();
  });

  it("the pending card shows each task's action, arguments and the hash; a wrong hash is refused; an edit is answered once per edit", async () => {
    const hostile = 'hi <b>@room</b> "quoted"\u202e';
    const published = await command(alice, publishJson(oneTask("sec_seen", "echo", hostile)));
    const run = (await store.getRun(roomId, "sec_seen"))!;
    const short = run.hash.slice(0, 12);
    // The acknowledgement is one line pointing to the card; the card shows the hash.
    expect(bodyOf(published.reply)).toMatch(/Its card is in the thread\.$/);
    const card = await alice.waitFor(cardOf("sec_seen"), T, "the card");
    expect(bodyOf(card)).toContain(`What runs if confirmed (content hash \`${short}\`):`);
    expect(bodyOf(card)).toContain('t: echo message="hi <b>@room</b> \\"quoted\\"\\u{202e}"');
    expect(bodyOf(card)).toContain(`!dag confirm sec_seen ${short}`);
    expect(String(card.content["formatted_body"])).toContain("&lt;b&gt;@room&lt;/b&gt;");
    expect(String(card.content["formatted_body"])).not.toContain("\u202e");

    // Two edits of the publish: each is answered, once, and neither changes the run.
    const edits: string[] = [];
    for (const action of ["fail", "true"]) {
      const body = publishJson(oneTask("sec_seen", action));
      edits.push(
        await alice.sendEvent(roomId, "m.room.message", {
          msgtype: "m.text",
          body: `* ${body}`,
          "m.new_content": { msgtype: "m.text", body },
          "m.relates_to": { rel_type: "m.replace", event_id: published.id },
        }),
      );
    }
    for (const edit of edits) {
      const answer = await alice.waitFor(replyTo(edit), T, "the answer to an edit");
      expect(bodyOf(answer)).toMatch(/Edits are not applied.*publish again/);
    }

    const wrong = short === "0".repeat(12) ? "1".repeat(12) : "0".repeat(12);
    const refused = await command(bob, `!dag confirm sec_seen ${wrong}`);
    expect(bodyOf(refused.reply)).toContain(`has content hash ${short}, not ${wrong}`);
    expect((await store.getRun(roomId, "sec_seen"))?.status).toBe("pending");

    const confirmed = await command(bob, `!dag confirm sec_seen ${short}`);
    expect(bodyOf(confirmed.reply)).toMatch(/confirmed `sec_seen`/);
    const final = await alice.waitFor((e) => txnOf(e) === `final.${run.runId}`, T, "the final message");
    expect(bodyOf(final)).toMatch(/succeeded/);
    const after = await store.getRun(roomId, "sec_seen");
    expect(after).toMatchObject({ status: "succeeded", hash: run.hash, confirmedBy: bob.userId });
    expect(after?.dag.tasks.map((t) => t.action)).toEqual(["echo"]);
    const counts = countByTxn(await roomHistory(alice, roomId));
    for (const edit of edits) expect(counts.get(`reply.${edit}`)).toBe(1);
  });

  it("a message carrying a reaction's fields does not confirm; retry does not revive a rejected run", async () => {
    await command(alice, publishJson(oneTask("sec_fakereact", "true")));
    const card = await alice.waitFor(cardOf("sec_fakereact"), T, "the card");
    const fake = await bob.sendEvent(roomId, "m.room.message", {
      msgtype: "m.text",
      body: "!dag help",
      "m.relates_to": { rel_type: "m.annotation", event_id: card.event_id, key: "✅" },
    });
    // A command after it is answered; by then the fake would have been handled.
    await command(bob, "!dag list");
    expect(await store.getInboxEvent(fake)).toBeNull();
    expect((await store.getRun(roomId, "sec_fakereact"))?.status).toBe("pending");

    const rejected = await command(bob, "!dag reject sec_fakereact");
    expect(bodyOf(rejected.reply)).toMatch(/rejected/);
    const retry = await command(alice, "!dag retry sec_fakereact");
    expect(bodyOf(retry.reply)).toMatch(/cannot be retried: nobody confirmed it/);
    expect(await store.getRun(roomId, "sec_fakereact.retry1")).toBeNull();
  });
});

describe("mentions and notifications", () => {
  it("every bot message carries m.mentions, empty but for the final message's publisher", async () => {
    // A reply that quotes what was typed, "@room" included.
    const quoted = await command(carol, "!dag status @room");
    expect(bodyOf(quoted.reply)).toContain("@room");
    const history = await roomHistory(alice, roomId);
    const ours = history.filter((e) => e.type === "m.room.message" && txnOf(e) !== undefined);
    expect(ours.length).toBeGreaterThan(5);
    const wrong = ours.filter((e) => {
      const mentions = e.content["m.mentions"];
      const inner = e.content["m.new_content"];
      if (inner !== undefined && JSON.stringify(inner["m.mentions"]) !== "{}") return true;
      if (txnOf(e)?.startsWith("final."))
        return JSON.stringify(mentions) !== JSON.stringify({ user_ids: [alice.userId] });
      return JSON.stringify(mentions) !== "{}";
    });
    expect(wrong.map((e) => [txnOf(e), e.content["m.mentions"]])).toEqual([]);
  });

  it("the final message reaches the publisher's notifications, highlighted; the bot's other messages do not", async () => {
    const run = (await store.getRun(roomId, "sec_seen"))!;
    const fromBot = (await notifications(alice)).filter((n) => n.event.sender === bots[0]!.userId);
    const final = fromBot.filter((n) => txnOf(n.event) === `final.${run.runId}`);
    expect(final).toHaveLength(1);
    // Replies, cards and card edits stay quiet notices: only final messages notify anyone.
    expect(fromBot.filter((n) => !txnOf(n.event)?.startsWith("final."))).toEqual([]);
    // Others get the final message as any message of the room, not highlighted, and nothing else.
    const highlighted = (n: { actions: unknown[] }) =>
      n.actions.some((a) => {
        const tweak = a as { set_tweak?: string; value?: unknown };
        return tweak.set_tweak === "highlight" && tweak.value !== false;
      });
    expect(highlighted(final[0]!)).toBe(true);
    const carols = (await notifications(carol)).filter((n) => n.event.sender === bots[0]!.userId);
    expect(carols.filter(highlighted)).toEqual([]);
    expect(carols.filter((n) => !txnOf(n.event)?.startsWith("final."))).toEqual([]);
  });
});

describe("only the configured fleet is the fleet", () => {
  it("a member who re-posts a copy of a bot message is not muted", async () => {
    const answer = await command(carol, "!dag list");
    // Carol copies the bot's reply, its transaction key and all, into the room as her own message.
    expect(txnOf(answer.reply)).toBe(`reply.${answer.id}`);
    await carol.sendEvent(roomId, "m.room.message", { ...answer.reply.content, msgtype: "m.text" });
    const after = await command(carol, "!dag nodes");
    expect(bodyOf(after.reply)).toMatch(/node1/);
  });

  it("a new leader's look for inherited sends counts only the fleet's events", async () => {
    const secondBot = new MatrixUser(room.hs.url, bots[1]!);
    await secondBot.sendEvent(roomId, "m.room.message", {
      msgtype: "m.notice",
      body: "sent by the fleet",
      "org.dagbot.txn": "sec.fleet",
      "m.mentions": {},
    });
    await carol.sendEvent(roomId, "m.room.message", {
      msgtype: "m.text",
      body: "a forged send",
      "org.dagbot.txn": "sec.forged",
    });
    const lead = bots[0]!;
    const transport = new MatrixOutboxTransport(
      { sendEvent: () => Promise.reject(new Error("not used")) },
      matrixHttp(room.hs.url, lead.accessToken),
      new Set(bots.map((b) => b.userId)),
    );
    const found = await transport.findSent(roomId, new Set(["sec.fleet", "sec.forged"]), Date.now() - 60_000);
    expect([...found.keys()]).toEqual(["sec.fleet"]);
  });
});

describe("the node's secrets never reach the room", () => {
  it("!dag logs of actions that printed the node's environ and a file holding its access token shows the token masked", async () => {
    const token = bots[0]!.accessToken;
    const file = join(fleet.dir, "token-copy.txt");
    writeFileSync(file, token);
    const pid = String(fleet.nodes[0]!.process!.pid);
    await command(
      alice,
      publishJson({
        id: "sec_peek",
        tasks: [
          { id: "env", action: "environ", args: { pid } },
          { id: "file", action: "show", args: { path: file } },
        ],
      }),
    );
    const run = (await store.getRun(roomId, "sec_peek"))!;
    await command(bob, `!dag confirm sec_peek ${run.hash.slice(0, 12)}`);
    const deadline = Date.now() + T;
    while ((await store.getRun(roomId, "sec_peek"))?.status !== "succeeded") {
      if (Date.now() > deadline) throw new Error("sec_peek did not succeed");
      await new Promise((r) => setTimeout(r, 100));
    }
    const env = await command(alice, "!dag logs sec_peek env");
    const shown = await command(alice, "!dag logs sec_peek file");
    expect(bodyOf(env.reply)).toContain("DAGBOT_ACCESS_TOKEN=***");
    expect(bodyOf(shown.reply)).toContain("*".repeat(token.length));
    const history = await roomHistory(alice, roomId);
    expect(history.length).toBeGreaterThan(0);
    for (const event of history) expect(JSON.stringify(event.content ?? {})).not.toContain(token.slice(-16));
  });
});
