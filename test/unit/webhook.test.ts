// The pure rules of signed webhooks (src/domain/webhook.ts): each sender kind's verification, the
// replay window, JSON pointers, filters and the parameter mapping.
import { createHmac, randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import type { WebhookSpec } from "../../src/domain/webhook.js";
import {
  constantTimeEqual,
  contentDeliveryId,
  mapDelivery,
  pointerProblem,
  resolvePointer,
  verifyDelivery,
} from "../../src/domain/webhook.js";

const secret = randomBytes(24).toString("hex");
const sign = (data: string | Buffer, key = secret): string =>
  createHmac("sha256", key).update(data).digest("hex");

function spec(kind: WebhookSpec["kind"], more: Partial<WebhookSpec> = {}): WebhookSpec {
  return {
    id: "h",
    room: "local",
    dag: "deploy",
    kind,
    params: {},
    filters: [],
    events: null,
    link: null,
    deliveryFrom: null,
    bodyLimitBytes: 1 << 20,
    replayWindowMs: 300_000,
    timestampHeader: "x-dagbot-timestamp",
    signatureHeader: "x-dagbot-signature",
    deliveryHeader: "x-dagbot-delivery",
    eventHeader: null,
    ...more,
  };
}

const body = Buffer.from(JSON.stringify({ ref: "refs/tags/v1.2.3" }));
const NOW = 1_800_000_000_000;

describe("verifyDelivery", () => {
  it("github: the body's HMAC in X-Hub-Signature-256, the delivery id and event from their headers", () => {
    const headers = {
      "x-hub-signature-256": `sha256=${sign(body)}`,
      "x-github-delivery": "d-1",
      "x-github-event": "push",
    };
    expect(verifyDelivery(spec("github"), secret, headers, body, NOW)).toEqual({
      ok: true,
      deliveryId: "d-1",
      event: "push",
    });
    // Upper-case hex is the same signature.
    const upper = { ...headers, "x-hub-signature-256": `sha256=${sign(body).toUpperCase()}` };
    expect(verifyDelivery(spec("github"), secret, upper, body, NOW).ok).toBe(true);
  });

  it("github: a missing, malformed or wrong signature, or one over another body, is refused", () => {
    const base = { "x-github-delivery": "d-1" };
    const missing = verifyDelivery(spec("github"), secret, base, body, NOW);
    expect(missing).toMatchObject({ ok: false, status: 401, reason: "missing-signature" });
    for (const value of [
      "sha1=abc",
      `sha256=${sign(body).slice(1)}`,
      `sha256=${sign(body, "another secret of enough length")}`,
      `sha256=${sign(Buffer.concat([body, Buffer.from(" ")]))}`,
    ]) {
      const r = verifyDelivery(spec("github"), secret, { ...base, "x-hub-signature-256": value }, body, NOW);
      expect(r).toMatchObject({ ok: false, status: 401, reason: "bad-signature" });
    }
  });

  it("a verified delivery without a usable delivery id is a 400", () => {
    const headers = { "x-hub-signature-256": `sha256=${sign(body)}` };
    expect(verifyDelivery(spec("github"), secret, headers, body, NOW)).toMatchObject({
      ok: false,
      status: 400,
      reason: "missing-delivery-id",
    });
    const spaced = { ...headers, "x-github-delivery": "a b" };
    expect(verifyDelivery(spec("github"), secret, spaced, body, NOW)).toMatchObject({ status: 400 });
  });

  it("gitlab: the shared token, the event UUID or an Idempotency-Key", () => {
    const ok = verifyDelivery(
      spec("gitlab"),
      secret,
      { "x-gitlab-token": secret, "x-gitlab-event-uuid": "u-1", "x-gitlab-event": "Tag Push Hook" },
      body,
      NOW,
    );
    expect(ok).toEqual({ ok: true, deliveryId: "u-1", event: "Tag Push Hook" });
    const keyed = verifyDelivery(
      spec("gitlab"),
      secret,
      { "x-gitlab-token": secret, "idempotency-key": "k" },
      body,
      NOW,
    );
    expect(keyed).toMatchObject({ ok: true, deliveryId: "k" });
    const wrong = verifyDelivery(
      spec("gitlab"),
      secret,
      { "x-gitlab-token": `${secret}x`, "x-gitlab-event-uuid": "u" },
      body,
      NOW,
    );
    expect(wrong).toMatchObject({ ok: false, status: 401, reason: "bad-signature" });
    expect(verifyDelivery(spec("gitlab"), secret, {}, body, NOW)).toMatchObject({
      reason: "missing-signature",
    });
  });

  it("hmac: over <timestamp>.<body>, within the replay window either way", () => {
    const at = Math.floor(NOW / 1000);
    const headers = (t: number, sig = sign(`${t}.${body.toString()}`)) => ({
      "x-dagbot-timestamp": String(t),
      "x-dagbot-signature": `sha256=${sig}`,
      "x-dagbot-delivery": "g-1",
    });
    expect(verifyDelivery(spec("hmac"), secret, headers(at), body, NOW)).toMatchObject({
      ok: true,
      deliveryId: "g-1",
    });
    expect(verifyDelivery(spec("hmac"), secret, headers(at - 299), body, NOW).ok).toBe(true);
    expect(verifyDelivery(spec("hmac"), secret, headers(at - 301), body, NOW)).toMatchObject({
      ok: false,
      status: 401,
      reason: "stale-timestamp",
    });
    expect(verifyDelivery(spec("hmac"), secret, headers(at + 301), body, NOW)).toMatchObject({
      reason: "stale-timestamp",
    });
    // The timestamp is signed: moving it into the window breaks the signature.
    const moved = { ...headers(at - 3600), "x-dagbot-timestamp": String(at) };
    expect(verifyDelivery(spec("hmac"), secret, moved, body, NOW)).toMatchObject({ reason: "bad-signature" });
    // A signature over the body alone (GitHub's form) is not this kind's.
    expect(verifyDelivery(spec("hmac"), secret, headers(at, sign(body)), body, NOW)).toMatchObject({
      reason: "bad-signature",
    });
    const noStamp = { "x-dagbot-signature": "sha256=00", "x-dagbot-delivery": "g" };
    expect(verifyDelivery(spec("hmac"), secret, noStamp, body, NOW)).toMatchObject({
      reason: "missing-signature",
    });
    const badStamp = { ...headers(at), "x-dagbot-timestamp": "yesterday" };
    expect(verifyDelivery(spec("hmac"), secret, badStamp, body, NOW)).toMatchObject({
      reason: "bad-timestamp",
    });
  });

  it("bearer: the secret as a bearer token; without a delivery header, named by content when the hook says so", () => {
    const ok = verifyDelivery(
      spec("bearer"),
      secret,
      { authorization: `Bearer ${secret}`, "x-dagbot-delivery": "b-1" },
      body,
      NOW,
    );
    expect(ok).toEqual({ ok: true, deliveryId: "b-1", event: null });
    expect(
      verifyDelivery(spec("bearer"), secret, { authorization: `Bearer ${secret}x` }, body, NOW),
    ).toMatchObject({
      status: 401,
      reason: "bad-signature",
    });
    expect(
      verifyDelivery(spec("bearer"), secret, { authorization: `Basic ${secret}` }, body, NOW),
    ).toMatchObject({
      reason: "missing-signature",
    });
    // No delivery header: a 400, unless the hook names deliveries by their content.
    const auth = { authorization: `bearer ${secret}` };
    expect(verifyDelivery(spec("bearer"), secret, auth, body, NOW)).toMatchObject({ status: 400 });
    const byContent = spec("bearer", { deliveryFrom: ["/groupKey", "/alerts/0/startsAt"] });
    expect(verifyDelivery(byContent, secret, auth, body, NOW)).toEqual({
      ok: true,
      deliveryId: null,
      event: null,
    });
  });

  it("a content delivery id is the same for the same values, another for others", () => {
    const pointers = ["/groupKey", "/alerts/0/startsAt"];
    const firing = { groupKey: '{}:{alertname="DiskFull"}', alerts: [{ startsAt: "2026-01-01T00:00:00Z" }] };
    const id = contentDeliveryId(pointers, firing);
    expect(id).toMatch(/^c-[0-9a-f]{40}$/);
    expect(contentDeliveryId(pointers, { ...firing, status: "firing", receiver: "x" })).toBe(id);
    expect(
      contentDeliveryId(pointers, { ...firing, alerts: [{ startsAt: "2026-01-02T00:00:00Z" }] }),
    ).not.toBe(id);
    expect(contentDeliveryId(pointers, {})).toBeNull();
  });

  it("compares in constant time whatever the lengths", () => {
    expect(constantTimeEqual("abc", "abc")).toBe(true);
    expect(constantTimeEqual("abc", "abd")).toBe(false);
    expect(constantTimeEqual("abc", "abcd")).toBe(false);
    expect(constantTimeEqual("", "")).toBe(true);
  });
});

describe("JSON pointers", () => {
  const doc = { a: { "b/c": [10, { "~x": "y" }] }, n: null, t: true };
  it("resolve own properties and array indexes, with ~0 and ~1", () => {
    expect(resolvePointer(doc, "")).toBe(doc);
    expect(resolvePointer(doc, "/a/b~1c/0")).toBe(10);
    expect(resolvePointer(doc, "/a/b~1c/1/~0x")).toBe("y");
    expect(resolvePointer(doc, "/a/b~1c/2")).toBeUndefined();
    expect(resolvePointer(doc, "/a/b~1c/01")).toBeUndefined();
    expect(resolvePointer(doc, "/a/constructor")).toBeUndefined();
    expect(resolvePointer(doc, "/__proto__")).toBeUndefined();
    expect(resolvePointer(doc, "/n/x")).toBeUndefined();
  });
  it("are checked in the config", () => {
    expect(pointerProblem("/a/b")).toBeNull();
    expect(pointerProblem("")).toBeNull();
    expect(pointerProblem("a/b")).toMatch(/JSON pointer/);
    expect(pointerProblem("/a~2")).toMatch(/~/);
  });
});

describe("mapDelivery", () => {
  const tagHook = spec("github", {
    params: { tag: "/ref_name", sha: "/after", missing: "/nope" },
    filters: [{ pointer: "/ref", pattern: "refs/tags/v[0-9.]+" }],
    events: ["push"],
  });
  const push = {
    ref: "refs/tags/v1.2.3",
    ref_name: "v1.2.3",
    after: "0123abcd",
    head_commit: { url: "https://example.org/c/0123abcd" },
    compare: "https://example.org/compare",
  };

  it("a matching delivery gives its parameters (absent ones left out) and the payload's link", () => {
    expect(mapDelivery(tagHook, push, "push")).toEqual({
      kind: "run",
      params: [
        ["tag", "v1.2.3"],
        ["sha", "0123abcd"],
      ],
      link: "https://example.org/c/0123abcd",
    });
  });

  it("another event, a ping or a filter that does not match maps to nothing, with the reason", () => {
    expect(mapDelivery(tagHook, push, "issues")).toMatchObject({
      kind: "ignored",
      reason: expect.stringMatching(/"issues" is not one this hook takes \(push\)/),
    });
    expect(mapDelivery(tagHook, {}, "ping")).toMatchObject({
      kind: "ignored",
      reason: expect.stringMatching(/ping/),
    });
    expect(mapDelivery(tagHook, { ...push, ref: "refs/heads/main" }, "push")).toMatchObject({
      kind: "ignored",
      reason: 'filter /ref: "refs/heads/main" does not match "refs/tags/v[0-9.]+"',
    });
    // The pattern matches the whole value, as a parameter's does.
    expect(mapDelivery(tagHook, { ...push, ref: "refs/tags/v1;rm" }, "push")).toMatchObject({
      kind: "ignored",
    });
    expect(mapDelivery(tagHook, { ...push, ref: undefined }, "push")).toMatchObject({ kind: "ignored" });
  });

  it("a mapped value that is an object is refused; numbers and booleans are values", () => {
    expect(mapDelivery(tagHook, { ...push, after: { x: 1 } }, "push")).toMatchObject({
      kind: "refused",
      reason: expect.stringMatching(/parameter "sha"/),
    });
    expect(mapDelivery(tagHook, { ...push, after: 42 }, "push")).toMatchObject({
      params: [
        ["tag", "v1.2.3"],
        ["sha", "42"],
      ],
    });
  });

  it("links are http(s) only; Alertmanager's externalURL by default for bearer", () => {
    expect(
      mapDelivery(tagHook, { ...push, head_commit: { url: "javascript:alert(1)" } }, "push"),
    ).toMatchObject({
      link: "https://example.org/compare",
    });
    const alert = spec("bearer", { params: { alert: "/alerts/0/labels/alertname" } });
    expect(
      mapDelivery(
        alert,
        { externalURL: "http://am.example:9093", alerts: [{ labels: { alertname: "DiskFull" } }] },
        null,
      ),
    ).toEqual({ kind: "run", params: [["alert", "DiskFull"]], link: "http://am.example:9093" });
  });
});
