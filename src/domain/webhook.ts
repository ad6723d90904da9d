/**
 * Signed webhooks (docs/architecture.md §10): how a delivery is verified for each sender kind, and
 * what run, if any, it maps to. Pure: the secret, the headers, the raw body and the time are given.
 *
 * - `github`: HMAC-SHA256 of the raw body, `X-Hub-Signature-256: sha256=<hex>`; delivery id
 *   `X-GitHub-Delivery`, event `X-GitHub-Event`.
 * - `gitlab`: the shared secret itself in `X-Gitlab-Token`; delivery id `X-Gitlab-Event-UUID` (or
 *   `Idempotency-Key`), event `X-Gitlab-Event`.
 * - `hmac`: HMAC-SHA256 of `<timestamp>.<raw body>` in a signature header (`sha256=<hex>`), the
 *   timestamp (Unix seconds) in its own header and within the replay window of now; delivery id and
 *   (optionally) event from headers the hook names.
 * - `bearer`: the shared secret in `Authorization: Bearer <secret>` (what Alertmanager's
 *   `http_config.authorization` sends); delivery id from the hook's delivery header.
 *
 * A sender without a delivery id header (Alertmanager) names its deliveries by their content: a hook
 * with `delivery_from` (JSON pointers, e.g. /groupKey and /alerts/0/startsAt) takes the SHA-256 of
 * those values as the delivery id when the header is absent, so retries and repeats of one
 * notification are one delivery.
 *
 * Secrets and signatures are compared in constant time (equal-length digests). A payload is data:
 * its values become parameter values, checked by the leader against the DAG's patterns like any
 * typed value, and nothing of it is ever a command, an option or a shell word.
 */
import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import { compileParamPattern } from "./param-pattern.js";

export const WEBHOOK_KINDS = ["github", "gitlab", "hmac", "bearer"] as const;
export type WebhookKind = (typeof WEBHOOK_KINDS)[number];

/** One condition a payload must meet: the value at `pointer` matches `pattern` (RE2, whole value). */
export interface WebhookFilter {
  pointer: string;
  pattern: string;
}

/** A webhook endpoint as the node config declares it (without its secret). */
export interface WebhookSpec {
  id: string;
  room: string;
  /** The published DAG a delivery starts a run of. */
  dag: string;
  kind: WebhookKind;
  /** Parameter name → JSON pointer into the payload (RFC 6901). */
  params: Record<string, string>;
  /** Every filter must match, or the delivery maps to nothing. */
  filters: WebhookFilter[];
  /** The event types taken (the kind's event header); null: any. */
  events: string[] | null;
  /** Pointers whose values name a delivery that comes without a delivery id header; null: none. */
  deliveryFrom: string[] | null;
  /** Pointers to a link to show on the run's card, the first present wins; null: the kind's defaults. */
  link: string[] | null;
  /** Largest raw body accepted, in bytes. */
  bodyLimitBytes: number;
  /** hmac: how far the timestamp may be from now, either way. */
  replayWindowMs: number;
  /** hmac: header names (lower case). */
  timestampHeader: string;
  signatureHeader: string;
  deliveryHeader: string;
  eventHeader: string | null;
}

export type Headers = Readonly<Record<string, string | string[] | undefined>>;

/** Why a delivery is refused before anything is read of its payload (each is counted by name). */
export type RefusalReason =
  | "missing-signature"
  | "bad-signature"
  | "bad-timestamp"
  | "stale-timestamp"
  | "missing-delivery-id"
  | "too-large"
  | "bad-payload";

export const REFUSAL_REASONS: readonly RefusalReason[] = [
  "missing-signature",
  "bad-signature",
  "bad-timestamp",
  "stale-timestamp",
  "missing-delivery-id",
  "too-large",
  "bad-payload",
];

export type Verification =
  /** deliveryId null: the delivery has no id header, and the hook names it by content (deliveryFrom). */
  | { ok: true; deliveryId: string | null; event: string | null }
  | { ok: false; status: 400 | 401; reason: RefusalReason; detail: string };

/** A delivery id: printable ASCII, as a header safely holds; long enough for a UUID or a hash. */
const DELIVERY_ID = /^[\x21-\x7e]{1,128}$/;
const HEX_SIGNATURE = /^sha256=([0-9a-fA-F]{64})$/;
const TIMESTAMP = /^\d{1,12}$/;

function header(headers: Headers, name: string): string | null {
  const v = headers[name];
  if (Array.isArray(v)) return v.length === 1 ? (v[0] ?? null) : null;
  return typeof v === "string" ? v : null;
}

/** The HMAC-SHA256 of `data` under `secret`, as lower-case hex. */
export function hmacHex(secret: string, data: Buffer | string): string {
  return createHmac("sha256", secret).update(data).digest("hex");
}

/** Equal in constant time whatever the lengths: both sides are hashed to 32 bytes first. */
export function constantTimeEqual(a: string, b: string): boolean {
  const da = createHash("sha256").update(a, "utf8").digest();
  const db = createHash("sha256").update(b, "utf8").digest();
  return timingSafeEqual(da, db);
}

const refuse = (status: 400 | 401, reason: RefusalReason, detail: string): Verification => ({
  ok: false,
  status,
  reason,
  detail,
});

/** Checks a delivery's signature (and, for hmac, its timestamp) and reads its delivery id and event. */
export function verifyDelivery(
  spec: WebhookSpec,
  secret: string,
  headers: Headers,
  rawBody: Buffer,
  nowMs: number,
): Verification {
  let deliveryId: string | null;
  let event: string | null;
  switch (spec.kind) {
    case "github": {
      const given = header(headers, "x-hub-signature-256");
      if (given === null) return refuse(401, "missing-signature", "send X-Hub-Signature-256: sha256=<hex>");
      const hex = HEX_SIGNATURE.exec(given.trim())?.[1];
      if (hex === undefined || !constantTimeEqual(hex.toLowerCase(), hmacHex(secret, rawBody)))
        return refuse(
          401,
          "bad-signature",
          "X-Hub-Signature-256 is not the body's HMAC-SHA256 under this hook's secret",
        );
      deliveryId = header(headers, "x-github-delivery");
      event = header(headers, "x-github-event");
      break;
    }
    case "gitlab": {
      const given = header(headers, "x-gitlab-token");
      if (given === null) return refuse(401, "missing-signature", "send X-Gitlab-Token: <the hook's secret>");
      if (!constantTimeEqual(given, secret))
        return refuse(401, "bad-signature", "X-Gitlab-Token is not this hook's secret");
      deliveryId = header(headers, "x-gitlab-event-uuid") ?? header(headers, "idempotency-key");
      event = header(headers, "x-gitlab-event");
      break;
    }
    case "hmac": {
      const given = header(headers, spec.signatureHeader);
      const stamp = header(headers, spec.timestampHeader);
      if (given === null || stamp === null)
        return refuse(
          401,
          "missing-signature",
          `send ${spec.timestampHeader}: <unix seconds> and ${spec.signatureHeader}: sha256=<hex of HMAC-SHA256 over "<timestamp>.<body>">`,
        );
      if (!TIMESTAMP.test(stamp.trim()))
        return refuse(401, "bad-timestamp", `${spec.timestampHeader} is not a time in Unix seconds`);
      const hex = HEX_SIGNATURE.exec(given.trim())?.[1];
      const signed = Buffer.concat([Buffer.from(`${stamp.trim()}.`, "utf8"), rawBody]);
      if (hex === undefined || !constantTimeEqual(hex.toLowerCase(), hmacHex(secret, signed)))
        return refuse(
          401,
          "bad-signature",
          `${spec.signatureHeader} is not the HMAC-SHA256 of "<timestamp>.<body>" under this hook's secret`,
        );
      // Checked after the signature: an attacker learns nothing of the window from a forged request.
      const skew = Math.abs(nowMs - Number(stamp.trim()) * 1000);
      if (skew > spec.replayWindowMs)
        return refuse(
          401,
          "stale-timestamp",
          `${spec.timestampHeader} is ${Math.round(skew / 1000)} s from now; at most ${Math.round(spec.replayWindowMs / 1000)} s are accepted`,
        );
      deliveryId = header(headers, spec.deliveryHeader);
      event = spec.eventHeader === null ? null : header(headers, spec.eventHeader);
      break;
    }
    case "bearer": {
      const given = header(headers, "authorization");
      const token = given === null ? null : /^Bearer +(\S+)\s*$/i.exec(given)?.[1];
      if (token === null || token === undefined)
        return refuse(401, "missing-signature", "send Authorization: Bearer <the hook's secret>");
      if (!constantTimeEqual(token, secret))
        return refuse(401, "bad-signature", "the bearer token is not this hook's secret");
      deliveryId = header(headers, spec.deliveryHeader);
      event = spec.eventHeader === null ? null : header(headers, spec.eventHeader);
      break;
    }
  }
  if (deliveryId === null && spec.deliveryFrom !== null) return { ok: true, deliveryId: null, event };
  if (deliveryId === null || !DELIVERY_ID.test(deliveryId))
    return refuse(
      400,
      "missing-delivery-id",
      `a delivery needs its id (${deliveryHeaderOf(spec)}, 1-128 printable characters)`,
    );
  return { ok: true, deliveryId, event: event === null ? null : event.slice(0, 100) };
}

/** The header that names a delivery, for messages and docs. */
export function deliveryHeaderOf(spec: Pick<WebhookSpec, "kind" | "deliveryHeader">): string {
  switch (spec.kind) {
    case "github":
      return "X-GitHub-Delivery";
    case "gitlab":
      return "X-Gitlab-Event-UUID or Idempotency-Key";
    case "hmac":
    case "bearer":
      return spec.deliveryHeader;
  }
}

/**
 * The delivery id of a delivery without one, from the values at the hook's `delivery_from` pointers:
 * `c-` and 40 hex digits of their SHA-256. Null when none of them has a value.
 */
export function contentDeliveryId(pointers: readonly string[], payload: unknown): string | null {
  const values = pointers.map((p) => {
    const v = resolvePointer(payload, p);
    return v === undefined ? null : JSON.stringify(v);
  });
  if (values.every((v) => v === null)) return null;
  return `c-${createHash("sha256").update(JSON.stringify(values), "utf8").digest("hex").slice(0, 40)}`;
}

/** The inbox event id of a delivery: one row per (hook, delivery id), whichever node gets it. */
export function deliveryEventId(hookId: string, deliveryId: string): string {
  return `hook:${hookId}:${deliveryId}`;
}

/** The sender a hook's commands are stored under: a principal of its own in the room's policy. */
export function hookSender(hookId: string): string {
  return `hook:${hookId}`;
}

/** The hook id of a hook sender, else null. */
export function hookOfSender(sender: string): string | null {
  return sender.startsWith("hook:") ? sender.slice("hook:".length) : null;
}

// --- JSON pointers and the mapping ---------------------------------------------------------------

/** A JSON pointer as RFC 6901 writes one: "" (the whole document) or "/" followed by tokens. */
export function pointerProblem(pointer: string): string | null {
  if (pointer !== "" && !pointer.startsWith("/")) return 'must be a JSON pointer: "" or starting with "/"';
  if (pointer.length > 200) return "is longer than 200 characters";
  if (/~[^01]|~$/.test(pointer)) return 'has a "~" not followed by 0 or 1';
  return null;
}

/** The value at `pointer`, or undefined when the payload has none there (own properties only). */
export function resolvePointer(doc: unknown, pointer: string): unknown {
  if (pointer === "") return doc;
  let at: unknown = doc;
  for (const raw of pointer.slice(1).split("/")) {
    const token = raw.replaceAll("~1", "/").replaceAll("~0", "~");
    if (Array.isArray(at)) {
      if (!/^(0|[1-9]\d{0,8})$/.test(token)) return undefined;
      at = at[Number(token)];
    } else if (typeof at === "object" && at !== null) {
      if (!Object.hasOwn(at, token)) return undefined;
      at = (at as Record<string, unknown>)[token];
    } else return undefined;
  }
  return at;
}

/** A scalar as a parameter value; null for objects, arrays and null. */
function scalarText(value: unknown): string | null {
  if (typeof value === "string") return value;
  if (typeof value === "number" && Number.isFinite(value)) return String(value);
  if (typeof value === "boolean") return String(value);
  return null;
}

/** Where each kind's payloads usually carry a link worth showing on the run's card. */
const DEFAULT_LINKS: Record<WebhookKind, string[]> = {
  github: [
    "/head_commit/url",
    "/compare",
    "/release/html_url",
    "/pull_request/html_url",
    "/repository/html_url",
  ],
  gitlab: ["/object_attributes/url", "/project/web_url"],
  hmac: ["/url", "/html_url"],
  bearer: ["/externalURL", "/url"],
};

/** A link shown on a card: http(s), printable, bounded. */
const LINK = /^https?:\/\/[\x21-\x7e]{1,500}$/;

export type Mapping =
  | { kind: "run"; params: Array<[string, string]>; link: string | null }
  | { kind: "ignored"; reason: string }
  | { kind: "refused"; reason: string };

const show = (value: string): string => JSON.stringify(value.length > 80 ? `${value.slice(0, 80)}…` : value);

/**
 * What a verified delivery asks for: a run with these parameter values (still to be checked against
 * the DAG's patterns by the leader), nothing (an event or a filter that does not match, said why), or
 * a refusal (a mapped value is not a value).
 */
export function mapDelivery(spec: WebhookSpec, payload: unknown, event: string | null): Mapping {
  if (spec.kind === "github" && event === "ping")
    return { kind: "ignored", reason: "a ping: the hook is reachable" };
  if (spec.events !== null && (event === null || !spec.events.includes(event)))
    return {
      kind: "ignored",
      reason: `event ${event === null ? "(none)" : show(event)} is not one this hook takes (${spec.events.join(", ")})`,
    };
  for (const f of spec.filters) {
    const value = scalarText(resolvePointer(payload, f.pointer));
    if (value === null)
      return { kind: "ignored", reason: `filter ${f.pointer}: the payload has no value there` };
    const pattern = compileParamPattern(f.pattern);
    if (typeof pattern === "string")
      return { kind: "refused", reason: `filter ${f.pointer}: its pattern ${pattern}` };
    if (value.length > 1000 || !pattern.matches(value))
      return {
        kind: "ignored",
        reason: `filter ${f.pointer}: ${show(value)} does not match ${show(f.pattern)}`,
      };
  }
  const params: Array<[string, string]> = [];
  for (const [name, pointer] of Object.entries(spec.params)) {
    const found = resolvePointer(payload, pointer);
    // Nothing there: the parameter is left out (its default applies, or the leader names it missing).
    if (found === undefined) continue;
    const value = scalarText(found);
    if (value === null)
      return {
        kind: "refused",
        reason: `parameter "${name}": the payload's ${pointer} is not a string, number or boolean`,
      };
    params.push([name, value]);
  }
  let link: string | null = null;
  for (const pointer of spec.link ?? DEFAULT_LINKS[spec.kind]) {
    const value = resolvePointer(payload, pointer);
    if (typeof value === "string" && LINK.test(value)) {
      link = value;
      break;
    }
  }
  return { kind: "run", params, link };
}

/** What a run keeps of the delivery that started it (ParsedDag.hook): shown on its card. */
export interface HookOrigin {
  id: string;
  delivery: string;
  link?: string;
}
