/** matrix-bot-sdk loads without the native crypto library because npm `overrides` swap in our stub. */
import { readFileSync, realpathSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const require = createRequire(join(root, "package.json"));
const stubDir = join(root, "stubs/matrix-sdk-crypto-nodejs");

describe("crypto stub", () => {
  it("lets require('matrix-bot-sdk') load and expose MatrixClient", () => {
    const sdk = require("matrix-bot-sdk");
    expect(typeof sdk.MatrixClient).toBe("function");
    // A client without a crypto store never touches the stub.
    const client = new sdk.MatrixClient("http://127.0.0.1:1", "token");
    expect(client.crypto).toBeUndefined();
  });

  it("is what matrix-bot-sdk resolves for @matrix-org/matrix-sdk-crypto-nodejs", () => {
    const sdkRequire = createRequire(require.resolve("matrix-bot-sdk"));
    const resolved = sdkRequire.resolve("@matrix-org/matrix-sdk-crypto-nodejs");
    expect(dirname(realpathSync(resolved))).toBe(realpathSync(stubDir));
    expect(sdkRequire("@matrix-org/matrix-sdk-crypto-nodejs").DAGBOT_STUB).toBe(true);
  });

  it("throws a clear 'not supported' error on any use of encryption", async () => {
    const crypto = require("@matrix-org/matrix-sdk-crypto-nodejs");
    expect(() => new crypto.OlmMachine()).toThrow(/end-to-end encryption is not supported by dagbot/);
    await expect(crypto.OlmMachine.initialize()).rejects.toThrow(/not supported/);
    expect(() => new crypto.UserId("@a:b")).toThrow(/not supported.*UserId/);
    expect(() => crypto.Attachment.encrypt(new Uint8Array(1))).toThrow(/not supported/);
  });

  it("is pinned by the lockfile, so `npm ci` installs the stub and not the real package", () => {
    const lock = JSON.parse(readFileSync(join(root, "package-lock.json"), "utf8"));
    const entry = lock.packages["node_modules/@matrix-org/matrix-sdk-crypto-nodejs"];
    expect(entry).toMatchObject({ resolved: "stubs/matrix-sdk-crypto-nodejs", link: true });
    expect(lock.packages["stubs/matrix-sdk-crypto-nodejs"]?.name).toBe(
      "@matrix-org/matrix-sdk-crypto-nodejs",
    );
    const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
    expect(pkg.overrides["@matrix-org/matrix-sdk-crypto-nodejs"]).toBe(
      "$@matrix-org/matrix-sdk-crypto-nodejs",
    );
  });
});
