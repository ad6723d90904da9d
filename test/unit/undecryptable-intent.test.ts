/** An inbox row intake stored for an encrypted event it could not decrypt, as the leader reads it. */
import { describe, expect, it } from "vitest";
import { decodeInboxContent } from "../../src/app/commands/inbox-intent.js";
import { renderOutcome } from "../../src/app/render/reply.js";
import { INBOX_EVENT_TYPE_KEY, UNDECRYPTABLE_KEY } from "../../src/ports/store.js";

describe("undecryptable events in the inbox", () => {
  it("an encrypted event marked undecryptable asks for an answer", () => {
    const intent = decodeInboxContent({
      [INBOX_EVENT_TYPE_KEY]: "m.room.encrypted",
      [UNDECRYPTABLE_KEY]: "no room key",
    });
    expect(intent.kind).toBe("undecryptable");
  });

  it("an encrypted event without the mark, and a message that carries the mark, are not", () => {
    expect(decodeInboxContent({ [INBOX_EVENT_TYPE_KEY]: "m.room.encrypted" }).kind).toBe("other");
    // Anyone can put the key in a plain message; only intake's event type decides.
    const spoofed = decodeInboxContent({
      [INBOX_EVENT_TYPE_KEY]: "m.room.message",
      [UNDECRYPTABLE_KEY]: "x",
      body: "!dag help",
    });
    expect(spoofed.kind).toBe("message");
  });

  it("the answer asks the sender to send it again", () => {
    expect(renderOutcome({ kind: "undecryptable" })?.body).toMatch(
      /could not decrypt your message.*send it again/,
    );
  });
});
