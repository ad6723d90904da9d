/**
 * Masks the node's own secrets in text kept from a task (its output tail, its error), as CI systems
 * mask theirs: every occurrence of a secret, and of its URL-encoded, JSON-escaped and base64 forms,
 * becomes `*`s, one per byte, so byte positions in a task's output stay right for `logs --follow`
 * (docs/architecture.md, "Node config").
 *
 * A tail cuts text at both ends: its start may begin inside a secret (the rest of it was dropped) and,
 * while the action runs, its end may stop inside one (the rest is not written yet). A start that is
 * the end of a secret and an end that is the start of one are masked too, from PARTIAL_CHARS on.
 */

/** Shorter secrets are not masked: they would mask ordinary words of the output. */
export const MIN_SECRET_CHARS = 6;
/** A piece of a secret at a tail's edge is masked from this many characters. */
export const PARTIAL_CHARS = 4;

export type Masker = (text: string) => string;

/** Leaves the text as it is: a node without secrets. */
export const noMasking: Masker = (text) => text;

/** The forms a secret can take in output, each at least MIN_SECRET_CHARS long. */
export function secretForms(secret: string): string[] {
  const forms = new Set<string>([secret]);
  forms.add(encodeURIComponent(secret));
  forms.add(JSON.stringify(secret).slice(1, -1));
  // Base64 of a secret inside a longer text depends on where it starts in a group of three bytes:
  // for each of the three alignments, the characters that only the secret's bytes determine.
  const bytes = new TextEncoder().encode(secret);
  for (let offset = 0; offset < 3; offset += 1) {
    const padded = new Uint8Array(offset + bytes.length);
    padded.set(bytes, offset);
    const encoded = toBase64(padded);
    const from = Math.ceil((offset * 8) / 6);
    const to = Math.floor(((offset + bytes.length) * 8) / 6);
    const core = encoded.slice(from, to);
    forms.add(core);
    forms.add(core.replaceAll("+", "-").replaceAll("/", "_"));
  }
  return [...forms].filter((f) => f.length >= MIN_SECRET_CHARS);
}

/** A masker for these secrets (empty ones and those under MIN_SECRET_CHARS are left out). */
export function secretMasker(secrets: readonly string[]): Masker {
  const forms = [
    ...new Set(secrets.filter((s) => s.length >= MIN_SECRET_CHARS).flatMap((s) => secretForms(s))),
  ].sort((a, b) => b.length - a.length);
  if (forms.length === 0) return noMasking;
  // Longest first, so a form that contains another is masked whole.
  const pattern = new RegExp(forms.map(escapeRegExp).join("|"), "g");
  return (text) => {
    if (text === "") return text;
    let masked = text.replace(pattern, stars);
    const head = longestEdge(masked, forms, "start");
    if (head > 0) masked = stars(masked.slice(0, head)) + masked.slice(head);
    const tail = longestEdge(masked, forms, "end");
    if (tail > 0) masked = masked.slice(0, masked.length - tail) + stars(masked.slice(-tail));
    return masked;
  };
}

/**
 * The length of the longest piece of a form (at least PARTIAL_CHARS, shorter than the form) that the
 * text starts with as the form's end, or ends with as the form's start; 0 when none.
 */
function longestEdge(text: string, forms: readonly string[], edge: "start" | "end"): number {
  let best = 0;
  for (const form of forms) {
    for (let n = Math.min(form.length - 1, text.length); n >= PARTIAL_CHARS && n > best; n -= 1) {
      const hit = edge === "start" ? text.startsWith(form.slice(-n)) : text.endsWith(form.slice(0, n));
      if (hit) {
        best = n;
        break;
      }
    }
  }
  return best;
}

/** One `*` per UTF-8 byte of the masked text. */
function stars(text: string): string {
  return "*".repeat(new TextEncoder().encode(text).length);
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\/-]/g, "\\$&");
}

const BASE64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/** Standard base64 without padding (the domain has no Buffer). */
function toBase64(bytes: Uint8Array): string {
  let out = "";
  for (let i = 0; i < bytes.length; i += 3) {
    const n = ((bytes[i] ?? 0) << 16) | ((bytes[i + 1] ?? 0) << 8) | (bytes[i + 2] ?? 0);
    const chars = Math.ceil((Math.min(3, bytes.length - i) * 8) / 6);
    for (let c = 0; c < chars; c += 1) out += BASE64[(n >> (18 - 6 * c)) & 63];
  }
  return out;
}
