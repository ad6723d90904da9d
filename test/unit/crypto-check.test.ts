/** The `crypto` readiness check of a chat node: its device's signing and its last decryption failure. */
import { describe, expect, it } from "vitest";
import { cryptoCheck, UNDECRYPTABLE_SHOWN_MS } from "../../src/composition/crypto-check.js";

const NOW = 1_000_000_000;
const failure = {
  at: NOW - 12_000,
  sender: "@erin:example.org",
  reason: "withheld: the sender encrypts only to verified devices",
};

describe("cryptoCheck", () => {
  it("is ok before any room is encrypted, and for a signed device with nothing undecryptable", () => {
    expect(cryptoCheck({ crypto: null, lastUndecryptable: null }, NOW)).toBe("ok");
    expect(cryptoCheck({ crypto: { signing: null }, lastUndecryptable: null }, NOW)).toBe("ok");
    expect(
      cryptoCheck({ crypto: { signing: { signed: true, justSigned: false } }, lastUndecryptable: null }, NOW),
    ).toBe("ok");
  });

  it("says why a device is not signed, and the last failure's reason while it is recent", () => {
    const signing = {
      signed: false as const,
      why: "device D1 is not cross-signed by @bot:example.org: no recovery key",
      retry: false,
    };
    expect(cryptoCheck({ crypto: { signing }, lastUndecryptable: failure }, NOW)).toBe(
      "device D1 is not cross-signed by @bot:example.org: no recovery key; " +
        "an event from @erin:example.org 12 s ago could not be decrypted: withheld: the sender encrypts only to verified devices",
    );
    const signed = { signed: true as const, justSigned: true };
    expect(cryptoCheck({ crypto: { signing: signed }, lastUndecryptable: failure }, NOW)).toMatch(
      /^an event from/,
    );
    const old = { ...failure, at: NOW - UNDECRYPTABLE_SHOWN_MS };
    expect(cryptoCheck({ crypto: { signing: signed }, lastUndecryptable: old }, NOW)).toBe("ok");
  });
});
