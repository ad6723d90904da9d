/**
 * Turning a Matrix message into the plain text of a command: reply fallbacks stripped, HTML-only
 * bodies flattened (code blocks kept as fences), entities decoded. Every scan here is linear, since
 * the input is whatever anyone in the room typed.
 */

/** Drops the leading `> ...` lines a Matrix reply fallback puts before the reply's own text. */
export function stripReplyFallback(body: string): string {
  let i = 0;
  while (i < body.length && body[i] === ">") {
    const nl = body.indexOf("\n", i);
    if (nl < 0) return "";
    i = nl + 1;
  }
  return body.slice(i);
}

const NAMED_ENTITIES: Readonly<Record<string, string>> = {
  lt: "<",
  gt: ">",
  amp: "&",
  quot: '"',
  apos: "'",
  nbsp: "\u00a0",
};

export function decodeEntities(text: string): string {
  return text.replace(
    /&(?:#(\d{1,7})|#[xX]([0-9a-fA-F]{1,6})|([a-zA-Z]{2,8}));/g,
    (whole, dec: string | undefined, hex: string | undefined, name: string | undefined) => {
      if (name !== undefined)
        return Object.hasOwn(NAMED_ENTITIES, name) ? (NAMED_ENTITIES[name] ?? whole) : whole;
      const code = dec !== undefined ? Number.parseInt(dec, 10) : Number.parseInt(hex ?? "", 16);
      // fromCodePoint throws outside Unicode; surrogates and NUL are not characters either.
      if (!(code > 0 && code <= 0x10ffff) || (code >= 0xd800 && code <= 0xdfff)) return "\ufffd";
      return String.fromCodePoint(code);
    },
  );
}

const BLOCK_TAGS = new Set([
  "p",
  "div",
  "br",
  "li",
  "ul",
  "ol",
  "blockquote",
  "h1",
  "h2",
  "h3",
  "h4",
  "h5",
  "h6",
  "tr",
  "table",
  "hr",
]);

function languageOf(attributes: string): string {
  const m = /class\s*=\s*["']?([^"'>]*)/i.exec(attributes);
  const cls = m?.[1] ?? "";
  for (const token of cls.split(/\s+/)) {
    if (token.toLowerCase().startsWith("language-")) return token.slice("language-".length).toLowerCase();
  }
  return "";
}

/**
 * The text of a Matrix HTML body: `<mx-reply>` dropped, block tags as line breaks, other tags
 * removed, `<pre><code class="language-x">` turned back into a ```x fence so the command parser
 * sees what the sender typed.
 */
export function htmlToText(html: string): string {
  const out: string[] = [];
  let inPre = false;
  let fencePending = false;
  let lang = "";
  const text = (chunk: string): void => {
    if (chunk === "") return;
    if (inPre && fencePending) {
      out.push("\n```" + lang + "\n");
      fencePending = false;
    }
    out.push(decodeEntities(chunk));
  };
  let i = 0;
  let textStart = 0;
  // Once a search for a closing `</mx-reply>` fails, every later one would too: remembering that
  // keeps a message of many unclosed `<mx-reply>` tags linear.
  let replyCloseMissing = false;
  while (i < html.length) {
    const lt = html.indexOf("<", i);
    if (lt < 0) break;
    const next = html[lt + 1] ?? "";
    if (!/[a-zA-Z/!]/.test(next)) {
      i = lt + 1; // a bare "<" is text
      continue;
    }
    let end: number;
    if (html.startsWith("<!--", lt)) {
      const close = html.indexOf("-->", lt + 4);
      end = close < 0 ? html.length : close + 3;
    } else {
      const gt = html.indexOf(">", lt);
      // No tag can close any more: the rest is text, and we stop looking.
      if (gt < 0) break;
      end = gt + 1;
    }
    text(html.slice(textStart, lt));
    i = textStart = end;
    const m = /^<(\/?)\s*([a-zA-Z][a-zA-Z0-9-]*)/.exec(html.slice(lt, end));
    if (m === null) continue;
    const closing = m[1] === "/";
    const name = (m[2] ?? "").toLowerCase();
    if (name === "mx-reply" && !closing) {
      if (replyCloseMissing) continue;
      // Searched in place: lowering the whole string could shift indexes (İ becomes two units).
      const close = /<\/mx-reply\s*>/gi;
      close.lastIndex = i;
      const found = close.exec(html);
      if (found === null) replyCloseMissing = true;
      else i = textStart = found.index + found[0].length;
    } else if (name === "pre") {
      if (!closing) {
        inPre = true;
        fencePending = true;
        lang = "";
      } else if (inPre) {
        if (fencePending) out.push("\n```" + lang + "\n");
        out.push("\n```\n");
        inPre = false;
        fencePending = false;
      }
    } else if (name === "code" && !closing && inPre && fencePending) {
      lang = languageOf(html.slice(lt, end));
    } else if (BLOCK_TAGS.has(name)) {
      out.push("\n");
    }
  }
  text(html.slice(textStart));
  if (inPre) {
    if (fencePending) out.push("\n```" + lang + "\n");
    out.push("\n```\n");
  }
  return out.join("");
}

/** Size in UTF-8 bytes, without encoding the string. A lone surrogate counts as U+FFFD (3 bytes). */
export function utf8Length(text: string): number {
  let bytes = 0;
  for (let i = 0; i < text.length; i += 1) {
    const c = text.charCodeAt(i);
    if (c < 0x80) bytes += 1;
    else if (c < 0x800) bytes += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
      const d = text.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        bytes += 4;
        i += 1;
      } else bytes += 3;
    } else bytes += 3;
  }
  return bytes;
}

/** A piece of user input fit to quote in a reply: short, one line, no control or format characters. */
export function quoteInput(text: string, max = 40): string {
  const chars = Array.from(text.length > max * 4 ? text.slice(0, max * 4) : text);
  const short = chars.length > max ? chars.slice(0, max).join("") + "…" : chars.join("");
  return `"${short.replace(/[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/gu, "\ufffd")}"`;
}

/** A fenced code block: its info string (language), content, and the text after its closing fence. */
export interface Fence {
  info: string;
  content: string;
  rest: string;
}

/**
 * Reads the fenced block opening at `start`; the closing fence is the first line that begins with it.
 * An unclosed block is `{ unclosed }`, the fix to tell.
 */
export function readFence(s: string, start: number): Fence | { unclosed: string } {
  let k = start;
  while (s[k] === "`") k += 1;
  const marker = s.slice(start, k);
  const nl = s.indexOf("\n", k);
  const sameLine = s.indexOf(marker, k);
  if (sameLine >= 0 && (nl < 0 || sameLine < nl)) {
    // A one-line block: ```{"id": "x", ...}``` or ```json {...}```.
    const inner = s.slice(k, sameLine);
    const lang = /^(json|toml)\s/i.exec(inner);
    return {
      info: lang?.[1] ?? "",
      content: lang === null ? inner : inner.slice(lang[0].length),
      rest: s.slice(sameLine + marker.length),
    };
  }
  if (nl < 0) return { unclosed: "end it with ```" };
  const info = s.slice(k, nl).trim();
  const contentStart = nl + 1;
  let lineStart = contentStart;
  for (;;) {
    const lineEnd = s.indexOf("\n", lineStart);
    const line = s.slice(lineStart, lineEnd < 0 ? s.length : lineEnd);
    const body = line.trimStart();
    if (body.startsWith(marker)) {
      const content = s.slice(contentStart, lineStart).replace(/\r?\n$/, "");
      const rest = s.slice(lineStart + (line.length - body.length) + marker.length);
      return { info, content, rest };
    }
    if (lineEnd < 0) break;
    lineStart = lineEnd + 1;
  }
  // No closing line: accept a fence glued to the last line (`}```), as people type it.
  const last = s.lastIndexOf(marker);
  if (last >= contentStart && s.slice(last + marker.length).trim() === "") {
    return { info, content: s.slice(contentStart, last), rest: "" };
  }
  return { unclosed: "end it with a line of ```" };
}
