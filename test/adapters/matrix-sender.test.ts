/** MatrixSender against a real Synapse: idempotent sends, edits, threads, reactions, errors, restarts. */
import { MatrixClient } from "matrix-bot-sdk";
import { beforeAll, describe, expect, it } from "vitest";
import { MatrixSender, type RetryEvent } from "../../src/adapters/matrix/sender.js";
import { MAX_CONTENT_BYTES, TRUNCATION_MARKER_TEXT, contentBytes } from "../../src/adapters/matrix/format.js";
import { ChatSendError } from "../../src/ports/chat.js";
import { useSynapse } from "../support/matrix-fixture.js";
import { MatrixUser, match, type MatrixEvent } from "../support/matrix-user.js";
import type { RegisteredUser } from "../support/synapse.js";

const fx = useSynapse();
let bot: RegisteredUser;
let alice: RegisteredUser;
let person: MatrixUser;
let roomId: string;
let sender: MatrixSender;

beforeAll(async () => {
  const { hs } = fx;
  bot = await hs.registerUser("sender-bot", { deviceId: "BOTDEVICE" });
  alice = await hs.registerUser("sender-alice");
  person = new MatrixUser(hs.url, alice);
  roomId = await hs.createRoom(alice.accessToken, { invite: [bot.userId], name: "sender tests" });
  await new MatrixUser(hs.url, bot).joinRoom(roomId);
  sender = new MatrixSender({ homeserverUrl: hs.url, accessToken: bot.accessToken });
});

const botMessages = async (): Promise<MatrixEvent[]> =>
  (await person.messages(roomId)).filter((e) => e.sender === bot.userId && e.type === "m.room.message");

describe("MatrixSender against Synapse", () => {
  it("sends one event for one txnId, however often it is retried", async () => {
    const first = await sender.send(roomId, { body: "once only" }, "txn-once");
    const again = await sender.send(roomId, { body: "once only" }, "txn-once");
    const concurrent = await Promise.all(
      [1, 2, 3].map(() => sender.send(roomId, { body: "once only" }, "txn-once")),
    );
    expect(new Set([first, again, ...concurrent])).toEqual(new Set([first]));
    // A different txnId is a different message: the dedup above is the txnId's doing.
    const other = await sender.send(roomId, { body: "once only" }, "txn-once-b");
    expect(other).not.toBe(first);

    const onceOnly = (await botMessages()).filter((e) => e.content["body"] === "once only");
    expect(onceOnly.map((e) => e.event_id)).toEqual([first, other]);
  });

  it("with an encrypt hook: sends what it returns under the same txnId; its failure is 'unavailable'; a stop does not wait for it", async () => {
    const calls: string[] = [];
    const encrypting = new MatrixSender({
      homeserverUrl: fx.hs.url,
      accessToken: bot.accessToken,
      encrypt: (room, type, content) => {
        calls.push(`${room} ${type}`);
        return Promise.resolve({
          type: "m.room.encrypted",
          content: { algorithm: "test", wrapped: content },
        });
      },
    });
    const first = await encrypting.send(roomId, { body: "sealed" }, "txn-sealed");
    expect(await encrypting.send(roomId, { body: "sealed" }, "txn-sealed")).toBe(first);
    expect(calls).toEqual([`${roomId} m.room.message`, `${roomId} m.room.message`]);
    const seen = (await person.messages(roomId)).find((e) => e.event_id === first);
    expect(seen?.type).toBe("m.room.encrypted");
    expect(seen?.content["wrapped"]).toMatchObject({ body: "sealed", msgtype: "m.notice" });

    const broken = new MatrixSender({
      homeserverUrl: fx.hs.url,
      accessToken: bot.accessToken,
      encrypt: () => Promise.reject(new Error("no keys yet")),
    });
    const err = await broken.send(roomId, { body: "x" }, "txn-broken").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ChatSendError);
    expect((err as ChatSendError).failure).toBe("unavailable");
    expect((err as ChatSendError).message).toMatch(/cannot encrypt: no keys yet/);

    const stop = new AbortController();
    const waiting = new MatrixSender({
      homeserverUrl: fx.hs.url,
      accessToken: bot.accessToken,
      signal: stop.signal,
      encrypt: () => new Promise(() => undefined),
    });
    const pending = waiting.send(roomId, { body: "never" }, "txn-never").catch((e: unknown) => e);
    stop.abort(new Error("shutting down"));
    expect(String(await pending)).toMatch(/shutting down/);
  });

  it("can take its homeserver and token (and so its device) from a matrix-bot-sdk client", async () => {
    const viaClient = MatrixSender.fromClient(new MatrixClient(fx.hs.url, bot.accessToken));
    const first = await sender.send(roomId, { body: "shared device" }, "txn-shared-device");
    expect(await viaClient.send(roomId, { body: "shared device" }, "txn-shared-device")).toBe(first);
  });

  it("sends m.notice with escaped HTML and a plain body, seen as such by a room member", async () => {
    const eventId = await sender.send(
      roomId,
      { body: "a <b> & c\nline 2", mentions: [person.userId] },
      "txn-html",
    );
    const seen = await person.waitFor(match.id(eventId), 20_000, "the notice");
    expect(seen.content).toEqual({
      msgtype: "m.notice",
      body: "a <b> & c\nline 2",
      format: "org.matrix.custom.html",
      formatted_body: "a &lt;b&gt; &amp; c<br>line 2",
      "m.mentions": { user_ids: [person.userId] },
    });
  });

  it("edits in place: Synapse records the m.replace against the original", async () => {
    const original = await sender.send(
      roomId,
      { body: "status: running", html: "status: <b>running</b>" },
      "txn-card",
    );
    const edit = await sender.edit(
      roomId,
      original,
      { body: "status: done", html: "status: <b>done</b>" },
      "txn-card-edit-1",
    );
    const seen = await person.waitFor(match.edits(roomId, original), 20_000, "the edit");
    expect(seen.event_id).toBe(edit);
    expect(seen.content).toMatchObject({
      body: "* status: done",
      "m.new_content": { msgtype: "m.notice", body: "status: done", formatted_body: "status: <b>done</b>" },
      "m.relates_to": { rel_type: "m.replace", event_id: original },
    });
    const bundled = await person.request(
      "GET",
      `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/event/${encodeURIComponent(original)}`,
    );
    expect(bundled.unsigned["m.relations"]["m.replace"].event_id).toBe(edit);
  });

  it("replies in a thread, and the server lists the reply under the thread root", async () => {
    const root = await person.sendText(roomId, "!dag publish something");
    const reply = await sender.send(roomId, { body: "card", threadRoot: root }, "txn-thread");
    const seen = await person.waitFor(match.id(reply));
    expect(seen.content["m.relates_to"]).toEqual({
      rel_type: "m.thread",
      event_id: root,
      is_falling_back: true,
      "m.in_reply_to": { event_id: root },
    });
    const thread = await person.request(
      "GET",
      `/_matrix/client/v1/rooms/${encodeURIComponent(roomId)}/relations/${encodeURIComponent(root)}/m.thread`,
    );
    expect(thread.chunk.map((e: MatrixEvent) => e.event_id)).toEqual([reply]);
  });

  it("reacts once; the same key again is reported as already there", async () => {
    const target = await person.sendText(roomId, "react to me");
    const reaction = await sender.react(roomId, target, "✅", "txn-react-1");
    expect(reaction).toMatch(/^\$/);
    expect(await sender.react(roomId, target, "✅", "txn-react-1")).toBe(reaction);
    expect(await sender.react(roomId, target, "✅", "txn-react-2")).toBeNull();
    const seen = await person.waitFor(match.id(reaction!));
    expect(seen).toMatchObject({ type: "m.reaction", sender: bot.userId });
  });

  it("keeps oversized content under the limit, so Synapse accepts it, with a visible marker", async () => {
    const huge = "x".repeat(150_000);
    const sent = await sender.send(
      roomId,
      { body: huge, html: `<pre><code>${huge}</code></pre>` },
      "txn-huge",
    );
    const edited = await sender.edit(roomId, sent, { body: huge, html: `<p>${huge}</p>` }, "txn-huge-edit");
    const [seenSent, seenEdit] = [
      await person.waitFor(match.id(sent)),
      await person.waitFor(match.id(edited)),
    ];
    for (const e of [seenSent, seenEdit])
      expect(contentBytes(e.content)).toBeLessThanOrEqual(MAX_CONTENT_BYTES);
    // Booleans, not toMatch: a failure message would print 60 kB of "x".
    expect(String(seenSent.content["body"]).endsWith(TRUNCATION_MARKER_TEXT)).toBe(true);
    expect(
      /^<pre><code>x+<\/code><\/pre><br><em>… \(truncated\)<\/em>$/.test(seenSent.content["formatted_body"]),
    ).toBe(true);
    expect(
      /^<p>x+<\/p><br><em>… \(truncated\)<\/em>$/.test(seenEdit.content["m.new_content"].formatted_body),
    ).toBe(true);
    expect(seenEdit.content["m.relates_to"]).toEqual({ rel_type: "m.replace", event_id: sent });
  });

  it("gives up at once with a typed, non-retryable error on a 4xx other than 429", async () => {
    const retries: RetryEvent[] = [];
    const s = new MatrixSender({
      homeserverUrl: fx.hs.url,
      accessToken: bot.accessToken,
      onRetry: (e) => retries.push(e),
    });
    const foreign = await fx.hs.createRoom(alice.accessToken, { name: "no bot" });
    const err = await s.send(foreign, { body: "not a member" }, "txn-403").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ChatSendError);
    expect(err).toMatchObject({
      failure: "rejected",
      retryable: false,
      details: { status: 403, errcode: "M_FORBIDDEN", attempts: 1 },
    });
    expect(retries).toEqual([]);
  });

  it("rejects bad arguments before any request, naming what was wrong", async () => {
    await expect(sender.send("not-a-room", { body: "x" }, "t")).rejects.toThrow(
      /room id must start with "!"/,
    );
    await expect(sender.send(roomId, { body: "x" }, "")).rejects.toThrow(/txnId must be 1\.\.255 characters/);
    await expect(sender.react(roomId, "$x", "", "t")).rejects.toThrow(/reaction key must be 1\.\.500/);
  });

  it("backs off while Synapse is down and delivers once it is back; the txnId still dedupes", async () => {
    const { hs } = fx;
    const before = await sender.send(roomId, { body: "before the outage" }, "txn-outage-0");
    const retries: RetryEvent[] = [];
    let sawNetworkError!: () => void;
    const networkErrorSeen = new Promise<void>((r) => (sawNetworkError = r));
    const patient = new MatrixSender({
      homeserverUrl: hs.url,
      accessToken: bot.accessToken,
      backoffInitialMs: 100,
      backoffMaxMs: 1_000,
      maxAttempts: 200,
      onRetry: (e) => {
        retries.push(e);
        if (e.reason === "network") sawNetworkError();
      },
    });
    const aborter = new AbortController();
    const doomed = new MatrixSender({
      homeserverUrl: hs.url,
      accessToken: bot.accessToken,
      signal: aborter.signal,
    });

    await hs.stop();
    const during = patient.send(roomId, { body: "during the outage" }, "txn-outage-1");
    const abandoned = doomed.send(roomId, { body: "never" }, "txn-outage-abandoned");
    await networkErrorSeen;
    aborter.abort(new Error("shutting down"));
    await expect(abandoned).rejects.toThrow("shutting down");

    await hs.restart();
    const duringId = await during;
    expect(retries.length).toBeGreaterThan(0);
    expect(retries.every((r) => r.reason === "network")).toBe(true);
    expect(retries.map((r) => r.error)).toContain("ECONNREFUSED");

    // The in-memory transaction cache died with the old process; the database one did not.
    expect(await patient.send(roomId, { body: "before the outage" }, "txn-outage-0")).toBe(before);
    expect(await patient.send(roomId, { body: "during the outage" }, "txn-outage-1")).toBe(duringId);
    const bodies = (await botMessages()).map((e) => e.content["body"]);
    expect(bodies.filter((b) => b === "during the outage")).toHaveLength(1);
    expect(bodies).not.toContain("never");
  });
});
