/**
 * The reason an event could not be decrypted, as logged and counted: the WASM crypto's
 * MegolmDecryptionError is not an Error, and `String(e)` said only "[object Object]".
 */
import * as wasm from "@matrix-org/matrix-sdk-crypto-wasm";
import { beforeAll, describe, expect, it } from "vitest";
import { decryptionReason } from "../../src/adapters/matrix/crypto/decryption-reason.js";

beforeAll(async () => {
  await wasm.initAsync();
});

describe("decryptionReason", () => {
  it("reads the WASM error's code and description instead of [object Object]", () => {
    const e = wasm.MegolmDecryptionError.unable_to_decrypt("bad MAC");
    expect(String(e)).toBe("[object Object]");
    expect(decryptionReason(e)).toBe("the event cannot be decrypted (UnableToDecrypt, bad MAC)");
  });

  it("says first that the key was withheld, and why, in words", () => {
    // The shape of a MegolmDecryptionError for a key withheld with m.unverified (its getters).
    const e = {
      code: wasm.DecryptionErrorCode.MissingRoomKey,
      description: "Can't find the room key to decrypt the event",
      withheldCode: "m.unverified",
      maybe_withheld: "The sender has disabled encrypting to unverified devices.",
    };
    const reason = decryptionReason(e);
    expect(reason).toMatch(
      /^withheld: the sender encrypts only to verified devices, and this device is not cross-signed/,
    );
    expect(reason).toContain("MissingRoomKey");
    expect(reason).toContain("withheld_code=m.unverified");
    expect(reason).toContain("The sender has disabled encrypting to unverified devices.");
  });

  it("names a missing key without a withheld code, and keeps an Error's message", () => {
    expect(decryptionReason({ code: wasm.DecryptionErrorCode.MissingRoomKey, description: "no key" })).toBe(
      "the room key never arrived (MissingRoomKey, no key)",
    );
    expect(decryptionReason(new Error("encryption is not ready yet"))).toBe("encryption is not ready yet");
    expect(decryptionReason("plain")).toBe("plain");
  });
});
