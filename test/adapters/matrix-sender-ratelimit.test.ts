/** MatrixSender under Synapse's real rate limiter (rc_message 1/s, burst 2): 429s are waited out, not dropped. */
import { describe, expect, it } from "vitest";
import { MatrixSender, type RetryEvent } from "../../src/adapters/matrix/sender.js";
import { useSynapse } from "../support/matrix-fixture.js";
import { MatrixUser } from "../support/matrix-user.js";

const fx = useSynapse({ rateLimits: "low" });

describe("MatrixSender against a rate-limiting Synapse", () => {
  it("delivers a burst of 10 messages exactly once each, waiting out every M_LIMIT_EXCEEDED", async () => {
    const { hs } = fx;
    const owner = await hs.registerUser("limit-owner");
    const bot = await hs.registerUser("limit-bot");
    const roomId = await hs.createRoom(owner.accessToken, { invite: [bot.userId] });
    const person = new MatrixUser(hs.url, owner);
    await new MatrixUser(hs.url, bot).joinRoom(roomId);

    const retries: RetryEvent[] = [];
    const sender = new MatrixSender({
      homeserverUrl: hs.url,
      accessToken: bot.accessToken,
      onRetry: (e) => retries.push(e),
    });
    const bodies = Array.from({ length: 10 }, (_, i) => `burst ${i}`);
    const ids = await Promise.all(bodies.map((body, i) => sender.send(roomId, { body }, `burst-${i}`)));

    const limited = retries.filter((r) => r.reason === "rate_limited");
    expect(limited.length).toBeGreaterThan(0);
    expect(limited.every((r) => r.status === 429 && r.errcode === "M_LIMIT_EXCEEDED" && r.delayMs > 0)).toBe(
      true,
    );
    expect(retries.length).toBe(limited.length);
    expect(new Set(ids).size).toBe(10);

    const seen = (await person.messages(roomId))
      .filter((e) => e.sender === bot.userId && e.type === "m.room.message")
      .map((e) => e.content["body"] as string);
    expect([...seen].sort()).toEqual([...bodies].sort());
  });
});
