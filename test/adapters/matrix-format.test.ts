/** The pure content builders of src/adapters/matrix/format.ts: escaping, shapes, and the size guard. */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  MAX_CONTENT_BYTES,
  TRUNCATION_MARKER_HTML,
  TRUNCATION_MARKER_TEXT,
  codeBlockHtml,
  contentBytes,
  editContent,
  escapeHtml,
  fitToSize,
  mentionHtml,
  noticeContent,
  reactionContent,
  truncateHtml,
} from "../../src/adapters/matrix/format.js";
import { retryAfterMs } from "../../src/adapters/matrix/sender.js";

/** Tags still open at the end of html, or null if a closing tag does not match (our HTML only). */
function openTags(html: string): string[] | null {
  const stack: string[] = [];
  for (const m of html.matchAll(/<(\/?)([a-z]+)[^>]*>/g)) {
    const [, closing, name] = m as unknown as [string, string, string];
    if (name === "br") continue;
    if (!closing) stack.push(name);
    else if (stack.pop() !== name) return null;
  }
  return stack;
}

const htmlDoc = fc
  .array(
    fc.oneof(
      fc.string({ maxLength: 40 }).map(escapeHtml),
      fc.string({ maxLength: 40 }).map((s) => `<b>${escapeHtml(s)}</b>`),
      fc.string({ maxLength: 40 }).map((s) => `<pre><code>${escapeHtml(s)}</code></pre>`),
      fc.string({ maxLength: 40 }).map((s) => `<ul><li>${escapeHtml(s)}</li><li>x<br>y</li></ul>`),
      fc.constant("<br>"),
    ),
    { maxLength: 30 },
  )
  .map((parts) => parts.join(""));

describe("escapeHtml", () => {
  it("escapes the five special characters and leaves everything else", () => {
    expect(escapeHtml(`<a href="x">'&'</a> ✅`)).toBe(
      "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt; ✅",
    );
  });

  it("never lets a tag or an unescaped ampersand through", () => {
    fc.assert(
      fc.property(fc.string(), (s) => {
        const out = escapeHtml(s);
        expect(out).not.toMatch(/[<>"']/);
        expect(out.replace(/&(amp|lt|gt|quot|#39);/g, "")).not.toContain("&");
      }),
    );
  });

  it("is used for mentions and code blocks", () => {
    expect(mentionHtml("@a:b", "<A>")).toBe('<a href="https://matrix.to/#/%40a%3Ab">&lt;A&gt;</a>');
    expect(codeBlockHtml("x < y")).toBe("<pre><code>x &lt; y</code></pre>");
  });
});

describe("content shapes", () => {
  it("builds an m.notice with both bodies, HTML from escaped text when none is given", () => {
    expect(noticeContent({ body: "1 < 2\nok" })).toEqual({
      msgtype: "m.notice",
      body: "1 < 2\nok",
      format: "org.matrix.custom.html",
      formatted_body: "1 &lt; 2<br>ok",
      "m.mentions": { user_ids: [] },
    });
  });

  it("puts thread replies in the thread, falling back to the root only when replying to nothing else", () => {
    expect(noticeContent({ body: "t", threadRoot: "$root" })["m.relates_to"]).toEqual({
      rel_type: "m.thread",
      event_id: "$root",
      is_falling_back: true,
      "m.in_reply_to": { event_id: "$root" },
    });
    expect(noticeContent({ body: "t", threadRoot: "$root", replyTo: "$cmd" })["m.relates_to"]).toEqual({
      rel_type: "m.thread",
      event_id: "$root",
      is_falling_back: false,
      "m.in_reply_to": { event_id: "$cmd" },
    });
    expect(noticeContent({ body: "t", replyTo: "$cmd" })["m.relates_to"]).toEqual({
      "m.in_reply_to": { event_id: "$cmd" },
    });
  });

  it("builds an edit with the '* ' fallback, m.new_content without a relation, and no new mentions", () => {
    const edit = editContent("$orig", { body: "done", html: "<b>done</b>", mentions: ["@p:hs"] });
    expect(edit).toEqual({
      msgtype: "m.notice",
      body: "* done",
      format: "org.matrix.custom.html",
      formatted_body: "* <b>done</b>",
      "m.mentions": { user_ids: [] },
      "m.new_content": {
        msgtype: "m.notice",
        body: "done",
        format: "org.matrix.custom.html",
        formatted_body: "<b>done</b>",
        "m.mentions": { user_ids: ["@p:hs"] },
      },
      "m.relates_to": { rel_type: "m.replace", event_id: "$orig" },
    });
  });

  it("builds a reaction annotation", () => {
    expect(reactionContent("$card", "✅")).toEqual({
      "m.relates_to": { rel_type: "m.annotation", event_id: "$card", key: "✅" },
    });
  });
});

describe("size guard", () => {
  it("leaves content that fits untouched", () => {
    const { content, truncated } = fitToSize("small", "<b>small</b>", (t, h) => ({
      body: t,
      formatted_body: h,
    }));
    expect(truncated).toBe(false);
    expect(content).toEqual({ body: "small", formatted_body: "<b>small</b>" });
  });

  it("keeps any notice or edit under the byte limit, marks the cut, and keeps the HTML balanced", () => {
    const bigText = fc.string({ unit: "binary", minLength: 0, maxLength: 3000 }).map((s) => s.repeat(40));
    fc.assert(
      fc.property(bigText, htmlDoc, fc.integer({ min: 1, max: 60 }), (text, doc, times) => {
        const html = doc.repeat(times);
        for (const content of [
          noticeContent({ body: text, html }),
          editContent("$e", { body: text, html }),
        ]) {
          expect(contentBytes(content)).toBeLessThanOrEqual(MAX_CONTENT_BYTES);
          const inner = (content["m.new_content"] as Record<string, string> | undefined) ?? content;
          const body = inner["body"] as string;
          const formatted = inner["formatted_body"] as string;
          if (body !== text) expect(body.endsWith(TRUNCATION_MARKER_TEXT)).toBe(true);
          if (formatted !== html) expect(formatted.endsWith(TRUNCATION_MARKER_HTML)).toBe(true);
          expect(openTags(formatted)).toEqual([]);
          // No surrogate pair was split by a cut: every high surrogate is still followed by its low half.
          expect(body).not.toMatch(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])/);
        }
      }),
      { numRuns: 40 },
    );
  });

  it("measures multi-byte characters in bytes, not string length", () => {
    const emoji = "✅".repeat(40_000); // 3 bytes each in UTF-8: 120 kB in 40 000 UTF-16 units
    const content = noticeContent({ body: emoji, html: emoji });
    expect(contentBytes(content)).toBeLessThanOrEqual(MAX_CONTENT_BYTES);
    expect(String(content["body"]).endsWith(TRUNCATION_MARKER_TEXT)).toBe(true);
  });

  it("cuts HTML outside tags and entities and closes what was open", () => {
    const html = "<ul><li>one &amp; two</li><li><b>three</b> four</li></ul>";
    for (let n = 0; n <= html.length + 5; n++) {
      const cut = truncateHtml(html, n + TRUNCATION_MARKER_HTML.length);
      expect(openTags(cut)).toEqual([]);
      expect(cut.replace(/&(amp|lt|gt|quot|#39);/g, "")).not.toMatch(/&/);
    }
  });
});

describe("retryAfterMs", () => {
  it("prefers retry_after_ms, then a Retry-After in seconds or as a date", () => {
    expect(retryAfterMs({ retry_after_ms: 1234 }, "9")).toBe(1234);
    expect(retryAfterMs({}, "2")).toBe(2000);
    const now = Date.parse("2026-01-01T00:00:00Z");
    expect(retryAfterMs({}, "Thu, 01 Jan 2026 00:00:05 GMT", now)).toBe(5000);
    expect(retryAfterMs({ retry_after_ms: "soon" }, null)).toBeNull();
    expect(retryAfterMs({}, "whenever")).toBeNull();
  });
});
