/** The pure and file-level parts of Matrix intake: which events are commands, power levels, the sync file. */
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { classifyEvent, TXN_CONTENT_KEY, type TimelineEvent } from "../../src/adapters/matrix/classify.js";
import { powerLevelOf } from "../../src/adapters/matrix/power-levels.js";
import { SyncStateFile } from "../../src/adapters/matrix/sync-state-file.js";
import { TXN_CONTENT_KEY as APP_TXN_KEY } from "../../src/app/outbox-loop.js";
import { INBOX_EVENT_TYPE_KEY } from "../../src/ports/store.js";

const NOW = 1_800_000_000_000;
const ctx = { now: NOW, commandWindowMs: 3_600_000, fleet: new Set(["@bot1:hs", "@bot2:hs"]) };

function message(content: Record<string, unknown>, extra: Partial<TimelineEvent> = {}): TimelineEvent {
  return {
    event_id: "$e1",
    type: "m.room.message",
    sender: "@alice:hs",
    origin_server_ts: NOW - 1_000,
    content,
    ...extra,
  };
}

describe("classifyEvent", () => {
  it("takes a !dag message from a person as a command, with its content as received", () => {
    const content = { msgtype: "m.text", body: "!dag status x" };
    expect(classifyEvent(message(content), ctx)).toEqual({
      kind: "command",
      eventId: "$e1",
      sender: "@alice:hs",
      originServerTs: NOW - 1_000,
      content: { ...content, [INBOX_EVENT_TYPE_KEY]: "m.room.message" },
    });
    // The event's type is what intake says it is, whatever the sender wrote under that key.
    const forged = classifyEvent(message({ ...content, [INBOX_EVENT_TYPE_KEY]: "m.reaction" }), ctx);
    expect(forged.kind === "command" && forged.content[INBOX_EVENT_TYPE_KEY]).toBe("m.room.message");
    // A reply (fallback quote first) and an HTML-only code block still count.
    expect(classifyEvent(message({ msgtype: "m.text", body: "> <@b:hs> hi\n\n!dag list" }), ctx).kind).toBe(
      "command",
    );
    // A malformed command is still a command: the leader answers it with an error.
    expect(classifyEvent(message({ msgtype: "m.text", body: "!dag frobnicate" }), ctx).kind).toBe("command");
  });

  it.each([
    ["chatter", message({ msgtype: "m.text", body: "what does !dag do?" }), "not a !dag command"],
    ["a notice", message({ msgtype: "m.notice", body: "!dag help" }), "a notice"],
    [
      "a message carrying a reaction's relation",
      message({
        msgtype: "m.text",
        body: "!dag help",
        "m.relates_to": { rel_type: "m.annotation", event_id: "$card", key: "✅" },
      }),
      "a message with a reaction's relation",
    ],
    [
      "our own message",
      message({ msgtype: "m.text", body: "!dag help" }, { sender: "@bot1:hs" }),
      "sent by the fleet",
    ],
    ["a redacted event", message({}), "no content (redacted)"],
    [
      "a redacted event with unsigned.redacted_because",
      message({ body: "!dag help" }, { unsigned: { redacted_because: {} } }),
      "redacted",
    ],
    [
      "a command older than the window",
      message({ msgtype: "m.text", body: "!dag help" }, { origin_server_ts: NOW - 3_600_001 }),
      "older than the command window",
    ],
    ["a redaction", { ...message({ redacts: "$x" }), type: "m.room.redaction" }, "type m.room.redaction"],
    ["a state event", message({ body: "!dag help" }, { state_key: "" }), "a state event"],
    ["no sender", message({ body: "!dag help" }, { sender: undefined }), "malformed event"],
  ])("ignores %s", (_name, event, why) => {
    expect(classifyEvent(event, ctx)).toEqual({ kind: "ignored", why });
  });

  it("only the configured fleet is the fleet: our txn key from anyone else proves nothing", () => {
    const copy = message(
      { msgtype: "m.text", body: "!dag help", [TXN_CONTENT_KEY]: "reply.$x" },
      { sender: "@mallory:hs" },
    );
    expect(classifyEvent(copy, ctx).kind).toBe("command");
    // ...and the copier's next command is still a command: nothing was learnt from the copy.
    expect(
      classifyEvent(message({ msgtype: "m.text", body: "!dag list" }, { sender: "@mallory:hs" }), ctx).kind,
    ).toBe("command");
  });

  it("an edit is taken with what it edits; whether it counts depends on its new text or the original", () => {
    const edit = (newBody: string) =>
      classifyEvent(
        message({
          msgtype: "m.text",
          body: `* ${newBody}`,
          "m.new_content": { msgtype: "m.text", body: newBody },
          "m.relates_to": { rel_type: "m.replace", event_id: "$orig" },
        }),
        ctx,
      );
    expect(edit("!dag help")).toMatchObject({ kind: "edit", editedEventId: "$orig", isCommand: true });
    expect(edit("never mind")).toMatchObject({ kind: "edit", editedEventId: "$orig", isCommand: false });
  });

  it("a command exactly at the window's edge still counts", () => {
    const edge = message({ msgtype: "m.text", body: "!dag help" }, { origin_server_ts: NOW - 3_600_000 });
    expect(classifyEvent(edge, ctx).kind).toBe("command");
  });

  it("takes annotation reactions, and only well-formed ones", () => {
    const reaction = (content: Record<string, unknown>): TimelineEvent => ({
      ...message(content),
      type: "m.reaction",
    });
    expect(
      classifyEvent(
        reaction({ "m.relates_to": { rel_type: "m.annotation", event_id: "$card", key: "✅" } }),
        ctx,
      ).kind,
    ).toBe("reaction");
    expect(
      classifyEvent(reaction({ "m.relates_to": { rel_type: "m.annotation", event_id: "$card" } }), ctx),
    ).toEqual({
      kind: "ignored",
      why: "a malformed reaction",
    });
    expect(
      classifyEvent(reaction({ "m.relates_to": { rel_type: "m.reference", event_id: "$x" } }), ctx).kind,
    ).toBe("ignored");
  });

  it("the adapter and the outbox agree on the txn content key", () => {
    expect(TXN_CONTENT_KEY).toBe(APP_TXN_KEY);
  });
});

describe("powerLevelOf", () => {
  it("is users[id], else users_default, else 0", () => {
    const content = { users: { "@a:hs": 100, "@b:hs": 0 }, users_default: 10 };
    expect(powerLevelOf(content, "@a:hs")).toBe(100);
    expect(powerLevelOf(content, "@b:hs")).toBe(0);
    expect(powerLevelOf(content, "@c:hs")).toBe(10);
    expect(powerLevelOf({}, "@c:hs")).toBe(0);
    expect(powerLevelOf({ users: { "@a:hs": "100" } }, "@a:hs")).toBe(0);
  });
});

describe("SyncStateFile", () => {
  const dirs: string[] = [];
  const tempDir = () => {
    const dir = mkdtempSync(join(tmpdir(), "dagbot-sync-state-"));
    dirs.push(dir);
    return dir;
  };
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  it("keeps the token and filter across instances, in a file replaced whole", () => {
    const path = join(tempDir(), "state", "sync.json");
    const first = new SyncStateFile(path);
    expect(first.getSyncToken()).toBeNull();
    expect(first.getFilter()).toBeNull();
    first.setFilter({ id: 7, filter: { room: {} } });
    first.setSyncToken("s1_2_3");
    first.storeValue("k", "v");
    const second = new SyncStateFile(path);
    expect(second.loadProblem).toBeNull();
    expect(second.getSyncToken()).toBe("s1_2_3");
    expect(second.getFilter()).toEqual({ id: 7, filter: { room: {} } });
    expect(second.readValue("k")).toBe("v");
    // No temporary file is left next to it.
    expect(readdirSync(join(path, ".."))).toEqual(["sync.json"]);
    expect(JSON.parse(readFileSync(path, "utf8"))).toMatchObject({ syncToken: "s1_2_3" });
  });

  it("starts a fresh sync, and says why, when the file is torn", () => {
    const path = join(tempDir(), "sync.json");
    writeFileSync(path, '{"syncToken":"s1_');
    const state = new SyncStateFile(path);
    expect(state.getSyncToken()).toBeNull();
    expect(state.loadProblem).toMatch(/not valid JSON/);
    state.setSyncToken("s9");
    expect(new SyncStateFile(path).getSyncToken()).toBe("s9");
  });
});
