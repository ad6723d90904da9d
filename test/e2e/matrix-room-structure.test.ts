/**
 * The room's structure, read back from a real Synapse's history (/messages, the thread root's
 * bundled thread summary, /relations): which bot messages exist, where they go and what they reply
 * to. Five runs: one confirmed by `!dag confirm` typed in the main timeline (with a `!dag graph`
 * there), one confirmed by ✅ on its card, one canceled while it awaited confirmation, one rejected by
 * ❌, one that started at once. The rules (docs/chat.md):
 *   - every command gets exactly one answer, where it was typed;
 *   - after a run ends, its thread's latest event (what the thread summary under the publish shows;
 *     edits are not thread events) says how it ended, and no main-timeline message says a state that
 *     is no longer true;
 *   - a thread message's reply fallback points at a bot message of the thread (the card) or the
 *     acknowledgement, never at the publish; only the acknowledgement replies to the publish; no bot
 *     message repeats the DAG; an edit's fallback is one line; the acknowledgement is one line.
 * With DAGBOT_ROOM_TRANSCRIPT=<file> it writes the room as text there (the transcript in docs/chat.md).
 */
import { writeFileSync } from "node:fs";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { openSqliteStore } from "../../src/adapters/sqlite/index.js";
import type { RunRecord, Store } from "../../src/ports/store.js";
import { BotFleet } from "../support/bot-fleet.js";
import { bodyOf, cardOf, publishJson, replyTo, roomHistory, txnOf } from "../support/bot-chat.js";
import { useSynapse } from "../support/matrix-fixture.js";
import { MatrixUser, type MatrixEvent } from "../support/matrix-user.js";
import { waitFor } from "../support/store-wait.js";

const fx = useSynapse();
let fleet: BotFleet;
let store: Store;
let roomId: string;
let alice: MatrixUser; // publisher, power 100: her runs await confirmation
let bob: MatrixUser; // confirmer, power 50, on auto_confirm: his run starts at once
let botUserId: string;
let history: MatrixEvent[] = [];

const T = 30_000;

interface Published {
  dagId: string;
  dag: { id: string; tasks: Record<string, unknown>[] };
  publishId: string;
  run: RunRecord;
  card: MatrixEvent;
}
const published: Published[] = [];
/** Commands and reactions sent, with whether they were typed in the main timeline. */
const commands: { id: string; what: string; where: "main" | { thread: string } }[] = [];

const dagOf = (id: string) => ({
  id,
  tasks: [
    { id: "fetch", action: "echo", args: { message: `fetching for ${id}` } },
    { id: "build", action: "true", needs: ["fetch"] },
    { id: "test", action: "true", needs: ["build"] },
  ],
});

async function publish(user: MatrixUser, dagId: string): Promise<Published> {
  const dag = dagOf(dagId);
  const publishId = await user.sendText(roomId, publishJson(dag));
  commands.push({ id: publishId, what: `publish ${dagId}`, where: "main" });
  await alice.waitFor(replyTo(publishId), T, `the acknowledgement of ${dagId}`);
  const card = await alice.waitFor(cardOf(dagId), T, `the card of ${dagId}`);
  const run = (await store.getRun(roomId, dagId))!;
  const p = { dagId, dag, publishId, run, card };
  published.push(p);
  return p;
}

async function typed(user: MatrixUser, body: string): Promise<string> {
  const id = await user.sendText(roomId, body);
  commands.push({ id, what: body, where: "main" });
  await alice.waitFor(answers(id), T, `the answer to ${body}`);
  return id;
}

async function reacted(user: MatrixUser, p: Published, key: string): Promise<string> {
  const id = await user.sendReaction(roomId, p.card.event_id, key);
  commands.push({ id, what: `${key} on the card of ${p.dagId}`, where: { thread: p.publishId } });
  await alice.waitFor(answers(id), T, `the answer to ${key}`);
  return id;
}

/** The one answer to a command: its reply, or the message that says it answers it. */
const answers = (commandId: string) => (e: MatrixEvent) =>
  replyTo(commandId)(e) || e.content["org.dagbot.answers"] === commandId;

const ended = (dagId: string) =>
  waitFor(
    `${dagId} ended`,
    () => store.getRun(roomId, dagId),
    (r) => r !== null && ["succeeded", "failed", "canceled", "rejected"].includes(r.status),
    { timeoutMs: T },
  );

const isBot = (e: MatrixEvent) => e.sender === botUserId;
const relation = (e: MatrixEvent): Record<string, any> => e.content["m.relates_to"] ?? {};
const isEdit = (e: MatrixEvent) => relation(e).rel_type === "m.replace";
const threadOf = (e: MatrixEvent): string | null =>
  relation(e).rel_type === "m.thread" ? String(relation(e).event_id) : null;
const inReplyTo = (e: MatrixEvent): string | null => relation(e)["m.in_reply_to"]?.event_id ?? null;
const messages = () => history.filter((e) => e.type === "m.room.message");

beforeAll(async () => {
  const { hs } = fx;
  const bot = await hs.registerUser("structbot1", { deviceId: "STRUCTBOT1" });
  botUserId = bot.userId;
  const a = await hs.registerUser("alice");
  const b = await hs.registerUser("bob");
  alice = new MatrixUser(hs.url, a);
  bob = new MatrixUser(hs.url, b);
  roomId = await hs.createRoom(a.accessToken, {
    name: "dagbot room structure",
    invite: [bot.userId, b.userId],
    powerLevels: { users: { [a.userId]: 100, [b.userId]: 50 } },
  });
  await bob.joinRoom(roomId);
  fleet = new BotFleet({
    hs,
    bots: [bot],
    rooms: [roomId],
    // bob's publishes start at once; alice's await confirmation.
    config: { permissions: { power_level: 50, auto_confirm: [b.userId] } },
    matrix: { encryption: false },
  });
  await fleet.startAll();
  store = await openSqliteStore(fleet.storePath);
  alice.startSync();

  // 1. Confirmed by a command typed in the main timeline, with a picture asked for there.
  const confirmed = await publish(alice, "deploy");
  await typed(bob, "!dag graph deploy");
  await typed(bob, "!dag confirm deploy");
  // 2. Confirmed by ✅ on its card.
  const reacted1 = await publish(alice, "nightly");
  await reacted(bob, reacted1, "✅");
  // 3. Canceled while it awaited confirmation, by a command typed in the main timeline.
  await publish(alice, "backup");
  await typed(bob, "!dag cancel backup");
  // 4. Rejected by ❌ on its card.
  const rejected = await publish(alice, "cleanup");
  await reacted(bob, rejected, "❌");
  // 5. Started at once (bob is on auto_confirm).
  await publish(bob, "report");
  for (const p of published) await ended(p.dagId);
  // Every run's final word is sent (the keeper waits for its card to show the end first).
  for (const p of published)
    await alice.waitFor(
      (e) => txnOf(e) === `final.${p.run.runId}`,
      T,
      `the final message of ${p.dagId} (${confirmed.dagId} first)`,
    );
  // Nothing more is due: the last card edits settle within the 2 s spacing.
  await new Promise((r) => setTimeout(r, 3_000));
  history = await roomHistory(alice, roomId);
  const file = process.env["DAGBOT_ROOM_TRANSCRIPT"];
  if (file) writeFileSync(file, transcript(history));
}, 240_000);

afterEach((ctx) => {
  if (ctx.task.result?.state === "fail") {
    fleet?.keepDir();
    console.error(fleet?.tails());
    console.error(transcript(history));
  }
});

afterAll(async () => {
  await alice?.stopSync();
  await store?.close();
  await fleet?.dispose();
});

describe("the room's structure, from its history", () => {
  it("every command gets exactly one answer, where it was typed", () => {
    expect(commands).toHaveLength(10);
    for (const c of commands) {
      const got = messages().filter(answers(c.id));
      expect(got.map((e) => [c.what, bodyOf(e)])).toHaveLength(1);
      const answer = got[0]!;
      expect(isBot(answer)).toBe(true);
      if (c.where === "main") {
        // In the main timeline, as a reply to the command: not in a thread.
        expect([c.what, relation(answer)]).toEqual([c.what, { "m.in_reply_to": { event_id: c.id } }]);
      } else {
        expect([c.what, threadOf(answer)]).toEqual([c.what, c.where.thread]);
      }
    }
    // `!dag graph` typed in the main timeline: a short answer there points to the picture, which is
    // in the run's thread.
    const graph = commands.find((c) => c.what === "!dag graph deploy")!;
    expect(bodyOf(messages().find(answers(graph.id))!)).toBe(
      "🖼️ The picture of `deploy` goes into its thread.",
    );
    const picture = messages().filter((e) => txnOf(e) === `picture.${graph.id}`);
    expect(picture).toHaveLength(1);
    // A notice showing the upload inline: it notifies no bystander, as an m.image would.
    expect(picture[0]!.content["msgtype"]).toBe("m.notice");
    expect(String(picture[0]!.content["url"])).toMatch(/^mxc:/);
    expect(threadOf(picture[0]!)).toBe(published[0]!.publishId);
    // `!dag cancel` of a run awaiting confirmation: one bot message anywhere says it was canceled by
    // the command (its answer); the run's thread ends with its final message, which answers nothing.
    const cancel = commands.find((c) => c.what === "!dag cancel backup")!;
    const backup = published.find((p) => p.dagId === "backup")!;
    expect(messages().filter((e) => isBot(e) && inReplyTo(e) === cancel.id)).toHaveLength(1);
    const backupFinal = messages().filter((e) => txnOf(e) === `final.${backup.run.runId}`);
    expect(backupFinal).toHaveLength(1);
    expect(backupFinal[0]!.content["org.dagbot.answers"]).toBeUndefined();
    // It says who canceled the run, which never started.
    expect(bodyOf(backupFinal[0]!)).toMatch(/^🚫 `backup` canceled by @bob:localhost — 0\/3 succeeded/);
  });

  it("after each run ends, its thread summary (the thread's latest event) says how it ended", async () => {
    const words: Record<string, RegExp> = {
      deploy: /succeeded/,
      nightly: /succeeded/,
      backup: /canceled/,
      cleanup: /rejected/,
      report: /succeeded/,
    };
    for (const p of published) {
      // What a client shows under the publish: the homeserver's bundled thread summary of the root.
      const root = (await alice.request(
        "GET",
        `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/event/${encodeURIComponent(p.publishId)}`,
      )) as MatrixEvent;
      const summary = root.unsigned?.["m.relations"]?.["m.thread"];
      const latest = summary?.latest_event as MatrixEvent | undefined;
      // The same read from the history: the last event whose relation is this thread (edits relate to
      // the card, not the thread, so they are not candidates).
      const inThread = messages().filter((e) => threadOf(e) === p.publishId);
      expect(latest?.event_id).toBe(inThread.at(-1)?.event_id);
      expect([p.dagId, bodyOf(latest!)]).toEqual([p.dagId, expect.stringMatching(words[p.dagId]!)]);
      expect(bodyOf(latest!)).not.toMatch(/running|awaiting|awaits/);
      // Outcome first: what a cut summary, a threads list or a notification keeps is how it ended,
      // never a mention; the publisher is reached through m.mentions.
      expect(bodyOf(latest!)).toMatch(/^(✅|❌|🚫|✋) /);
      if (p.dagId !== "cleanup") {
        expect(bodyOf(latest!)).toMatch(new RegExp(`^\\S+ \`${p.dagId}\` `));
        expect(latest!.content["m.mentions"]).toEqual({ user_ids: [p.run.publisher] });
      }
      // Its own final message, or (❌ on the card) the answer that ended it, sent as the final message.
      expect(txnOf(latest!)).toBe(`final.${p.run.runId}`);
    }
    // The ❌ answer is that run's final word: no second one.
    const cleanup = published.find((p) => p.dagId === "cleanup")!;
    expect(messages().filter((e) => txnOf(e) === `final.${cleanup.run.runId}`)).toHaveLength(1);
  });

  it("the main timeline never shows a state that is no longer true", () => {
    const main = messages().filter((e) => isBot(e) && threadOf(e) === null && !isEdit(e));
    // Per run: its acknowledgement (plus the answers to commands typed there); cards, pictures and
    // final messages are in the threads.
    expect(
      main.filter(
        (e) => txnOf(e)?.startsWith("reply.") && published.some((p) => inReplyTo(e) === p.publishId),
      ),
    ).toHaveLength(published.length);
    for (const e of main)
      expect(bodyOf(e)).not.toMatch(
        /running now|is running|awaits confirmation|awaiting confirmation|Canceling|being stopped|starts now/,
      );
    for (const e of main) expect(txnOf(e)?.startsWith("card.") || txnOf(e)?.startsWith("final.")).toBe(false);
  });

  it("reply fallbacks point at the card or the acknowledgement, never at the publish; no bot message repeats the DAG", () => {
    const roots = new Set(published.map((p) => p.publishId));
    for (const p of published) {
      const ack = messages().find(replyTo(p.publishId))!;
      // Only the acknowledgement replies to the publish.
      expect(
        messages()
          .filter((e) => isBot(e) && inReplyTo(e) === p.publishId)
          .map(txnOf),
      ).toEqual([`reply.${p.publishId}`]);
      // The card: first in the thread; clients without threads see it as a reply to the acknowledgement.
      expect(relation(p.card)).toEqual({
        rel_type: "m.thread",
        event_id: p.publishId,
        is_falling_back: true,
        "m.in_reply_to": { event_id: ack.event_id },
      });
      // The final message: a reply to the card for them.
      const final = messages().find((e) => txnOf(e) === `final.${p.run.runId}`)!;
      expect(threadOf(final)).toBe(p.publishId);
      expect(inReplyTo(final)).toBe(p.card.event_id);
    }
    const botMessages = new Set(
      messages()
        .filter(isBot)
        .map((e) => e.event_id),
    );
    const cards = new Set(published.map((p) => p.card.event_id));
    for (const e of messages().filter((m) => isBot(m) && threadOf(m) !== null)) {
      const target = inReplyTo(e);
      expect(target).not.toBeNull();
      expect(roots.has(target!)).toBe(false);
      // A fallback points at a bot message (the card or the acknowledgement); a real reply in the
      // thread answers a reaction on the card.
      if (relation(e)["is_falling_back"] === true) expect(botMessages.has(target!)).toBe(true);
      else expect(cards.has(target!)).toBe(true);
    }
    for (const e of history.filter(isBot)) {
      const texts = [
        bodyOf(e),
        String(e.content["formatted_body"] ?? ""),
        String(e.content["m.new_content"]?.["body"] ?? ""),
      ];
      for (const p of published) {
        for (const t of texts) {
          expect(t).not.toContain(JSON.stringify(p.dag, null, 2));
          expect(t).not.toContain('"action": "echo"');
        }
      }
    }
  });

  it("clients without edits see one line per edit; the acknowledgement is one line naming the thread", () => {
    const edits = history.filter((e) => isBot(e) && isEdit(e));
    expect(edits.length).toBeGreaterThanOrEqual(published.length);
    for (const e of edits) {
      expect(bodyOf(e)).toMatch(/^\* /);
      expect(bodyOf(e).split("\n")).toHaveLength(1);
      expect(String(e.content["formatted_body"]).startsWith("* ")).toBe(true);
    }
    for (const p of published) {
      const ack = messages().find(replyTo(p.publishId))!;
      expect(bodyOf(ack).split("\n")).toEqual([expect.stringMatching(/^📥 .*Its card is in the thread\.$/)]);
      expect(bodyOf(ack)).not.toMatch(/!dag confirm|react/);
    }
  });

  it("a card awaiting confirmation lists its tasks once and gives its expiry as a time", () => {
    const pending = published.filter((p) => p.dagId !== "report");
    for (const p of pending) {
      const body = bodyOf(p.card);
      expect(body).toMatch(/awaiting confirmation/);
      // The plan lists each task once; no folded "3 waiting: `fetch`, …" line repeats them.
      for (const task of ["fetch", "build", "test"]) {
        expect(body.split("\n").filter((l) => l.trimStart().startsWith(`${task}:`))).toHaveLength(1);
        expect(body).not.toContain(`\`${task}\``);
      }
      expect(body).not.toMatch(/waiting: `/);
      expect(body).toMatch(/It expires at \d\d:\d\d:\d\d UTC\./);
    }
  });
});

/**
 * The room as text, as a client with threads shows it: the main timeline, each thread root with its
 * summary (reply count and latest reply, as the homeserver bundles it: edits are not replies); then
 * each thread in full, edits marked ✎ (a client without edits shows their one-line `* …` body).
 */
function transcript(events: readonly MatrixEvent[]): string {
  const name = (e: MatrixEvent) => e.sender.replace(/^@/, "").replace(/:.*$/, "");
  const text = (e: MatrixEvent) => {
    const body = bodyOf(e);
    if (typeof e.content["url"] === "string") return `[picture] ${body}`;
    const id = /^!dag publish\n```json\n\{\n {2}"id": "([^"]+)"/.exec(body)?.[1];
    if (id !== undefined) return `!dag publish + a \`\`\`json block (the DAG \`${id}\`, its 3 tasks)`;
    return body;
  };
  const indent = (t: string, pad: string) => t.split("\n").join(`\n${pad}`);
  const msgs = events.filter((e) => e.type === "m.room.message" || e.type === "m.reaction");
  const byId = new Map(msgs.map((e) => [e.event_id, e]));
  const replies = (rootId: string) => msgs.filter((e) => e.type !== "m.reaction" && threadOf(e) === rootId);
  const lines: string[] = ["Main timeline:", ""];
  const threads: string[] = [];
  for (const e of msgs) {
    if (e.type === "m.reaction" || threadOf(e) !== null || isEdit(e)) continue;
    const reply = inReplyTo(e);
    const to = reply === null ? "" : `↳ ${name(byId.get(reply) ?? e)}: `;
    lines.push(`${name(e)}: ${to}${indent(text(e), "  ")}`);
    const inside = replies(e.event_id);
    if (inside.length === 0) continue;
    const latest = inside.at(-1)!;
    lines.push(`  🧵 ${inside.length} replies · latest: ${name(latest)}: ${text(latest).split("\n")[0]}`);
    threads.push("", `Thread of ${name(e)}'s publish of ${/the DAG (`[^`]+`)/.exec(text(e))?.[1]}:`, "");
    const edited = (id: string) =>
      msgs.filter((x) => isEdit(x) && relation(x).event_id === id).map((x) => `  ✎ ${bodyOf(x)}`);
    for (const t of inside) {
      threads.push(`${name(t)}: ${indent(text(t), "  ")}`, ...edited(t.event_id));
      for (const r of msgs.filter((x) => x.type === "m.reaction" && relation(x).event_id === t.event_id))
        threads.push(`  ${name(r)} reacts ${String(relation(r).key)}`);
    }
  }
  return `${[...lines, ...threads].join("\n")}\n`;
}
