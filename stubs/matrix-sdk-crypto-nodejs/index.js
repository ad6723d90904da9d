"use strict";
// matrix-bot-sdk 0.8.0 requires this package at load time, and the real one needs a native library
// downloaded from the internet at install (and Node >= 22). This stand-in loads harmlessly; anything
// that would use encryption throws with a clear message, until dagbot puts its adapter over the
// WebAssembly build into these exports (src/adapters/matrix/crypto/wasm-binding.ts,
// installWasmCryptoBinding), which the SDK reads at call time.
const MESSAGE = "end-to-end encryption is not supported by dagbot (matrix-sdk-crypto-nodejs is stubbed)";
function disabled(name) {
  return class {
    constructor() {
      throw new Error(`${MESSAGE}: ${name}`);
    }
  };
}
const OlmMachine = disabled("OlmMachine");
OlmMachine.initialize = async () => {
  throw new Error(MESSAGE);
};
module.exports = {
  DAGBOT_STUB: true,
  StoreType: Object.freeze({ Sqlite: 0 }),
  OlmMachine,
  UserId: disabled("UserId"),
  DeviceId: disabled("DeviceId"),
  RoomId: disabled("RoomId"),
  DeviceLists: disabled("DeviceLists"),
  EncryptionSettings: disabled("EncryptionSettings"),
  EncryptedAttachment: disabled("EncryptedAttachment"),
  Attachment: {
    encrypt() {
      throw new Error(MESSAGE);
    },
    decrypt() {
      throw new Error(MESSAGE);
    },
  },
};
