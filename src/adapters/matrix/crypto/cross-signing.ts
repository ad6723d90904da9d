/**
 * The bot account's cross-signing (docs/architecture.md §12). Clients that exclude insecure devices
 * (Element since April 2026, MSC4153) share room keys only with devices their owner cross-signed,
 * and hide what other devices send. So:
 * - once per account, `dagbot crypto setup` makes the account's cross-signing keys (the Rust
 *   crypto's bootstrapCrossSigning), uploads their public halves, and keeps the private ones in the
 *   account's secret storage (m.secret_storage, through matrix-js-sdk's implementation), encrypted
 *   with a new recovery key, which Element also accepts ("Verify with recovery key");
 * - at each start, a node whose device is not cross-signed reads the self-signing key from secret
 *   storage with that recovery key, imports it into its device's crypto and uploads the signature
 *   the crypto makes for its own device (/keys/signatures/upload needs no interactive auth).
 * No cryptography is written here: keys, signatures and secret storage come from those libraries.
 */
import { randomBytes } from "node:crypto";
import * as wasm from "@matrix-org/matrix-sdk-crypto-wasm";
import { decodeRecoveryKey, encodeRecoveryKey } from "matrix-js-sdk/lib/crypto-api/recovery-key.js";
import {
  SECRET_STORAGE_ALGORITHM_V1_AES,
  ServerSideSecretStorageImpl,
  type SecretStorageKeyDescription,
} from "matrix-js-sdk/lib/secret-storage.js";
import { enc, isNotFound, type MatrixHttp } from "../http.js";

/** The secrets of secret storage that hold the private cross-signing keys (spec names). */
export const CROSS_SIGNING_SECRETS = {
  master: "m.cross_signing.master",
  selfSigning: "m.cross_signing.self_signing",
  userSigning: "m.cross_signing.user_signing",
} as const;

/** A device id the set-up's own crypto uses; it never uploads device keys, so no device appears. */
const SETUP_DEVICE_ID = "DAGBOTSETUP";

/** Something about the account's cross-signing that an operator must fix; the message says what. */
export class CrossSigningError extends Error {
  override readonly name = "CrossSigningError";
}

type Json = Record<string, unknown>;
const obj = (v: unknown): Json =>
  v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Json) : {};

/** The account's secret storage, over its account data; `key` (a decoded recovery key) opens it. */
function secretStorage(
  http: MatrixHttp,
  userId: string,
  key: Uint8Array<ArrayBuffer> | null,
): ServerSideSecretStorageImpl {
  const path = (type: string) => `/_matrix/client/v3/user/${enc(userId)}/account_data/${enc(type)}`;
  const adapter = {
    getAccountDataFromServer: async (type: string) => {
      try {
        const content = await http.request("GET", path(type));
        return Object.keys(content).length === 0 ? null : content;
      } catch (e) {
        if (isNotFound(e)) return null;
        throw e;
      }
    },
    setAccountData: async (type: string, content: unknown) => {
      await http.request("PUT", path(type), { body: content });
      return {};
    },
  };
  const storage: ServerSideSecretStorageImpl = new ServerSideSecretStorageImpl(adapter as never, {
    getSecretStorageKey: async ({ keys }: { keys: Record<string, SecretStorageKeyDescription> }) => {
      if (key === null) return null;
      for (const [keyId, info] of Object.entries(keys)) {
        if (await storage.checkKey(key, info as never)) return [keyId, key];
      }
      throw new CrossSigningError(
        `the recovery key does not open ${userId}'s secret storage (it is not the key \`dagbot crypto setup\` wrote, ` +
          "or the account's secret storage was reset since)",
      );
    },
  });
  return storage;
}

/** The account's published master key (unpadded base64), or null when it has no cross-signing keys. */
export async function publishedMasterKey(http: MatrixHttp, userId: string): Promise<string | null> {
  const res = await http.request("POST", "/_matrix/client/v3/keys/query", {
    body: { device_keys: { [userId]: [] } },
  });
  const keys = obj(obj(obj(res["master_keys"])[userId])["keys"]);
  const first = Object.values(keys)[0];
  return typeof first === "string" ? first : null;
}

export interface CreateCrossSigningOptions {
  http: MatrixHttp;
  userId: string;
  /**
   * Uploads the public keys (POST /keys/device_signing/upload with the body given), doing the
   * homeserver's interactive auth if it asks for one; the composition decides how (password).
   */
  uploadSigningKeys: (body: Json) => Promise<void>;
  /** Keeps the recovery key (written before anything is uploaded, so it is never lost). */
  keepRecoveryKey: (recoveryKey: string) => void;
  /** Takes it back when the set-up failed before the keys were uploaded. */
  dropRecoveryKey: () => void;
}

export interface CreatedCrossSigning {
  masterKey: string;
  secretStorageKeyId: string;
}

/**
 * Makes the account's cross-signing keys and keeps their private halves in its secret storage under
 * a new recovery key (the account's default key from then on). Refuses an account that already has
 * cross-signing keys: replacing them would distrust every device they signed.
 */
export async function createCrossSigning(o: CreateCrossSigningOptions): Promise<CreatedCrossSigning> {
  const existing = await publishedMasterKey(o.http, o.userId);
  if (existing !== null) {
    throw new CrossSigningError(
      `${o.userId} already has cross-signing keys (master key ${existing}); nothing was changed. ` +
        "A node reads the self-signing key from the account's secret storage with the recovery key made then.",
    );
  }
  await wasm.initAsync();
  const machine = await wasm.OlmMachine.initialize(
    new wasm.UserId(o.userId),
    new wasm.DeviceId(SETUP_DEVICE_ID),
  );
  try {
    const requests = await machine.bootstrapCrossSigning(true);
    const body = JSON.parse(requests.uploadSigningKeysRequest.body) as Json;
    const exported = await machine.exportCrossSigningKeys();
    const master = exported?.masterKey;
    const selfSigning = exported?.self_signing_key;
    const userSigning = exported?.userSigningKey;
    if (master === undefined || selfSigning === undefined || userSigning === undefined) {
      throw new Error("the crypto made no complete set of cross-signing keys");
    }
    const key = new Uint8Array(randomBytes(32));
    const recoveryKey = encodeRecoveryKey(key);
    if (recoveryKey === undefined) throw new Error("the recovery key could not be encoded");
    o.keepRecoveryKey(recoveryKey);
    try {
      await o.uploadSigningKeys(body);
    } catch (e) {
      o.dropRecoveryKey();
      throw e;
    }
    const storage = secretStorage(o.http, o.userId, key);
    const { keyId } = await storage.addKey(SECRET_STORAGE_ALGORITHM_V1_AES, {
      key,
      name: "dagbot recovery key",
    });
    await storage.setDefaultKeyId(keyId);
    await storage.store(CROSS_SIGNING_SECRETS.master, master, [keyId]);
    await storage.store(CROSS_SIGNING_SECRETS.selfSigning, selfSigning, [keyId]);
    await storage.store(CROSS_SIGNING_SECRETS.userSigning, userSigning, [keyId]);
    const masterKey = Object.values(obj(obj(body["master_key"])["keys"]))[0];
    return { masterKey: typeof masterKey === "string" ? masterKey : "", secretStorageKeyId: keyId };
  } finally {
    machine.close();
  }
}

/** Whether a device is cross-signed by its account, and if not, why (for the log and /readyz). */
export type DeviceSigning =
  { signed: true; justSigned: boolean } | { signed: false; why: string; retry: boolean };

export interface SignOwnDeviceOptions {
  machine: wasm.OlmMachine;
  http: MatrixHttp;
  userId: string;
  deviceId: string;
  /** The account's recovery key as written by `dagbot crypto setup` (null: not configured). */
  recoveryKey: string | null;
}

/**
 * Signs this node's own device with the account's self-signing key, unless it is signed already.
 * Never throws for what an operator must fix: that is the answer's `why`.
 */
export async function signOwnDevice(o: SignOwnDeviceOptions): Promise<DeviceSigning> {
  const userId = new wasm.UserId(o.userId);
  const device = await o.machine.getDevice(userId.clone(), new wasm.DeviceId(o.deviceId));
  if (device === undefined) {
    return { signed: false, why: `device ${o.deviceId} is not among ${o.userId}'s devices yet`, retry: true };
  }
  try {
    if (device.isCrossSignedByOwner()) return { signed: true, justSigned: false };
    const unsigned = `device ${o.deviceId} is not cross-signed by ${o.userId}, so clients that exclude insecure devices (Element since April 2026) neither send it room keys nor show its messages`;
    // The crypto's own view of the account (its keys query at start), not another round trip: a
    // node in a room of legacy clients starts as fast as before. Asked again at later batches, so a
    // set-up made while the node runs is seen.
    const identity = await o.machine.getIdentity(userId.clone());
    identity?.free();
    if (identity === undefined) {
      return {
        signed: false,
        why: `${unsigned}: the account has no cross-signing keys; run \`dagbot crypto setup --config …\` once for the account`,
        retry: true,
      };
    }
    if (o.recoveryKey === null) {
      return {
        signed: false,
        why: `${unsigned}: no recovery key is configured (matrix.recovery_key_file or DAGBOT_RECOVERY_KEY_FILE)`,
        retry: false,
      };
    }
    let status = await o.machine.crossSigningStatus();
    if (!status.hasSelfSigning) {
      let key: Uint8Array<ArrayBuffer>;
      try {
        key = new Uint8Array(decodeRecoveryKey(o.recoveryKey));
      } catch (e) {
        return {
          signed: false,
          why: `${unsigned}: the configured recovery key is not a recovery key (${e instanceof Error ? e.message : String(e)})`,
          retry: false,
        };
      }
      let selfSigning: string | undefined;
      try {
        selfSigning = await secretStorage(o.http, o.userId, key).get(CROSS_SIGNING_SECRETS.selfSigning);
      } catch (e) {
        if (!(e instanceof CrossSigningError)) throw e;
        return { signed: false, why: `${unsigned}: ${e.message}`, retry: false };
      }
      if (selfSigning === undefined) {
        return {
          signed: false,
          why: `${unsigned}: the account's secret storage has no self-signing key (${CROSS_SIGNING_SECRETS.selfSigning})`,
          retry: false,
        };
      }
      status = await o.machine.importCrossSigningKeys(undefined, selfSigning, undefined);
      if (!status.hasSelfSigning) {
        return {
          signed: false,
          why: `${unsigned}: the self-signing key in secret storage is not the account's published one`,
          retry: false,
        };
      }
    }
    const request = await device.verify();
    const res = await o.http.request("POST", "/_matrix/client/v3/keys/signatures/upload", {
      body: JSON.parse(request.body) as unknown,
    });
    const failures = obj(res["failures"]);
    if (Object.keys(failures).length > 0) {
      return {
        signed: false,
        why: `${unsigned}: the homeserver refused the signature (${JSON.stringify(failures).slice(0, 300)})`,
        retry: true,
      };
    }
    return { signed: true, justSigned: true };
  } finally {
    device.free();
  }
}
