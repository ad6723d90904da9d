/**
 * The building blocks of every chat message: HTML escaping, code blocks, user pills and the size
 * limit of one Matrix event. Every user-controlled string (DAG and task ids, arguments, output,
 * sender names) goes through `escapeHtml` before it reaches a formatted_body.
 */
import { escapeHtml } from "../../domain/escape-html.js";

/** A message in both forms Matrix wants: a plain `body` and an HTML `formatted_body`. */
export interface Rendered {
  body: string;
  html: string;
}

export { escapeHtml };

/** Inline code in both forms. */
export function code(text: string): Rendered {
  return { body: `\`${text}\``, html: `<code>${escapeHtml(text)}</code>` };
}

/**
 * A fenced block in the body and <pre><code> in HTML. A run of backticks in the text would close a
 * markdown fence early in some clients, so the fence is made longer than any run inside.
 */
export function codeBlock(text: string, language?: string): Rendered {
  const longestRun = Math.max(2, ...Array.from(text.matchAll(/`+/g), (m) => m[0].length));
  const fence = "`".repeat(longestRun + 1);
  const lang = language === undefined ? "" : language;
  const cls = language === undefined ? "" : ` class="language-${escapeHtml(language)}"`;
  return {
    body: `${fence}${lang}\n${text}\n${fence}`,
    html: `<pre><code${cls}>${escapeHtml(text)}</code></pre>`,
  };
}

/** A Matrix user id looks like `@local:server`; only those get a pill and a mention. */
export function isMatrixUserId(value: string): boolean {
  return /^@[^:\s]+:\S+$/.test(value);
}

/** A user pill (matrix.to link) for a Matrix id, plain escaped text for anything else. */
export function userPill(userId: string): Rendered {
  if (!isMatrixUserId(userId)) return { body: userId, html: escapeHtml(userId) };
  const href = `https://matrix.to/#/${encodeURIComponent(userId)}`;
  return { body: userId, html: `<a href="${escapeHtml(href)}">${escapeHtml(userId)}</a>` };
}

/**
 * A link from outside (a webhook payload's URL): only http(s), printable, at most 500 characters;
 * the body shows the URL, the HTML an escaped anchor. Anything else is shown as code, never linked.
 */
export function link(url: string): Rendered {
  if (!/^https?:\/\/[\x21-\x7e]{1,500}$/.test(url)) return code(url.slice(0, 100));
  return { body: url, html: `<a href="${escapeHtml(url)}">${escapeHtml(url)}</a>` };
}

/** Plain text as both forms. */
export function text(value: string): Rendered {
  return { body: value, html: escapeHtml(value) };
}

/** Joins parts, each already rendered, in both forms. */
export function join(parts: readonly Rendered[], separator = ""): Rendered {
  return {
    body: parts.map((p) => p.body).join(separator),
    html: parts.map((p) => p.html).join(escapeHtml(separator)),
  };
}

/**
 * Tagged template over Rendered parts: literal text is escaped for HTML, interpolated strings are
 * escaped too, interpolated Rendered values are used as they are. So `r\`run ${code(id)} is ${status}\``
 * cannot inject markup whatever the id or status holds.
 */
export function r(strings: TemplateStringsArray, ...values: Array<Rendered | string | number>): Rendered {
  let body = strings[0] ?? "";
  let html = escapeHtml(strings[0] ?? "");
  values.forEach((value, i) => {
    const part = typeof value === "object" ? value : text(String(value));
    body += part.body + (strings[i + 1] ?? "");
    html += part.html + escapeHtml(strings[i + 1] ?? "");
  });
  return { body, html };
}

/** Wraps the HTML form in a tag (no attributes); the body is unchanged. */
export function tag(name: "b" | "i" | "em" | "strong" | "li" | "ul" | "p" | "h4", part: Rendered): Rendered {
  return { body: part.body, html: `<${name}>${part.html}</${name}>` };
}

/** Lines: newline-separated in the body, <br/>-separated in HTML. */
export function lines(parts: readonly Rendered[]): Rendered {
  return { body: parts.map((p) => p.body).join("\n"), html: parts.map((p) => p.html).join("<br/>") };
}

/**
 * Synapse refuses events over 65 536 bytes (the whole PDU, signatures and all); keeping the content's
 * JSON under 60 000 bytes leaves room for that envelope.
 */
export const MAX_EVENT_CONTENT_BYTES = 60_000;

const encoder = new TextEncoder();

/** Bytes of the JSON of a value, as it goes over the wire. */
export function jsonBytes(value: unknown): number {
  return encoder.encode(JSON.stringify(value)).length;
}

/** Bytes of a string in UTF-8. */
export function utf8Bytes(value: string): number {
  return encoder.encode(value).length;
}

/**
 * The longest tail of `text` (whole code points) for which `fits(tail)` holds, found by binary
 * search. `fits` must be monotonic: if a tail fits, every shorter one does.
 */
export function longestFittingTail(text: string, fits: (tail: string) => boolean): string {
  const points = Array.from(text);
  if (fits(text)) return text;
  let lo = 0;
  let hi = points.length;
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (fits(points.slice(points.length - mid).join(""))) lo = mid;
    else hi = mid - 1;
  }
  return points.slice(points.length - lo).join("");
}

/** The first `max` code points of a string, with "…" when it was cut. */
export function truncate(value: string, max: number): string {
  const points = Array.from(value);
  return points.length <= max ? value : `${points.slice(0, max - 1).join("")}…`;
}
