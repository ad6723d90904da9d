// A command that did nothing keeps a trimmed copy of its content; the trimmed copy must still read as
// the same kind of event, or the reply loses its place (a refused ✅ answered outside the card's thread).
import { describe, expect, it } from "vitest";
import { decodeInboxContent } from "../../src/app/commands/inbox-intent.js";
import { KEPT_BODY_CHARS, trimmedContent } from "../../src/app/commands/inbox-step.js";
import { INBOX_EVENT_TYPE_KEY } from "../../src/ports/store.js";

describe("trimmedContent", () => {
  it("keeps a reaction a reaction", () => {
    const reaction = {
      [INBOX_EVENT_TYPE_KEY]: "m.reaction",
      "m.relates_to": { rel_type: "m.annotation", event_id: "$card", key: "✅" },
      "org.example.junk": "x".repeat(5_000),
    };
    const kept = trimmedContent(reaction);
    expect(kept).not.toBeNull();
    expect(kept).not.toHaveProperty("org.example.junk");
    expect(decodeInboxContent(kept ?? {})).toEqual(decodeInboxContent(reaction));
    expect(decodeInboxContent(kept ?? {})).toMatchObject({ kind: "reaction", targetEventId: "$card" });
  });

  it("cuts a long body to its prefix and keeps the thread it was sent in", () => {
    const message = {
      [INBOX_EVENT_TYPE_KEY]: "m.room.message",
      msgtype: "m.text",
      body: `!dag frobnicate ${"y".repeat(10_000)}`,
      "m.relates_to": { rel_type: "m.thread", event_id: "$root" },
    };
    const kept = trimmedContent(message) ?? {};
    expect(String(kept["body"]).length).toBe(KEPT_BODY_CHARS + 1);
    expect(decodeInboxContent(kept)).toMatchObject({ kind: "message", threadRoot: "$root" });
  });
});
