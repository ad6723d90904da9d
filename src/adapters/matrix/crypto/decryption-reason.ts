/**
 * Why an encrypted event could not be decrypted, in words an operator can act on. The WASM crypto
 * throws a MegolmDecryptionError, which is not an Error: `String(e)` gives "[object Object]" and
 * hides the reason (a room key withheld because this device is not cross-signed, above all).
 */
import { DecryptionErrorCode } from "@matrix-org/matrix-sdk-crypto-wasm";

/** The withheld codes of the spec (m.room_key.withheld), as the reason this device got no key. */
const WITHHELD: Record<string, string> = {
  "m.unverified":
    "the sender encrypts only to verified devices, and this device is not cross-signed by its owner",
  "m.blacklisted": "the sender blocked this device",
  "m.unauthorised": "the sender did not share this message's key with this device",
  "m.unavailable": "the sender's device does not have this message's key",
  "m.no_olm": "the sender could not set up an encrypted channel to this device",
};

const CODES: Record<number, string> = {
  [DecryptionErrorCode.MissingRoomKey]: "the room key never arrived",
  [DecryptionErrorCode.UnknownMessageIndex]: "the room key arrived only for later messages",
  [DecryptionErrorCode.MismatchedIdentityKeys]: "the room key came from a device other than its sender's",
  [DecryptionErrorCode.UnknownSenderDevice]: "the sender's device is unknown",
  [DecryptionErrorCode.UnsignedSenderDevice]: "the sender's device is not cross-signed",
  [DecryptionErrorCode.SenderIdentityVerificationViolation]:
    "the sender's identity changed after it was verified",
  [DecryptionErrorCode.UnableToDecrypt]: "the event cannot be decrypted",
  [DecryptionErrorCode.MismatchedSender]: "the event's sender does not own the room key",
};

const text = (v: unknown): string | undefined => (typeof v === "string" && v !== "" ? v : undefined);

/**
 * One line: what happened first ("withheld: …" when the sender said why), then the crypto's own
 * code, withheld code and description for whoever reads the logs further.
 */
export function decryptionReason(e: unknown): string {
  if (e instanceof Error) return e.message;
  if (e === null || typeof e !== "object") return String(e);
  const err = e as Record<string, unknown>;
  const code = typeof err["code"] === "number" ? err["code"] : undefined;
  const withheldCode = text(err["withheldCode"]);
  const withheld = text(err["maybe_withheld"]);
  const description = text(err["description"]);
  const codeName = code === undefined ? undefined : DecryptionErrorCode[code];
  const head =
    withheldCode !== undefined || withheld !== undefined
      ? `withheld: ${(withheldCode !== undefined ? WITHHELD[withheldCode] : undefined) ?? withheld ?? "no reason given"}`
      : ((code !== undefined ? CODES[code] : undefined) ?? description ?? "unknown decryption error");
  const details = [
    codeName,
    withheldCode === undefined ? undefined : `withheld_code=${withheldCode}`,
    withheld === undefined ? undefined : JSON.stringify(withheld),
    description,
  ].filter((p): p is string => p !== undefined);
  return details.length > 0 ? `${head} (${details.join(", ")})` : head;
}
