/**
 * The crypto binding matrix-bot-sdk 0.8.0 calls (the API of the native
 * @matrix-org/matrix-sdk-crypto-nodejs), implemented over the WebAssembly build of the same Rust
 * crypto (@matrix-org/matrix-sdk-crypto-wasm), which installs from the npm registry without a download
 * step of its own. The SDK requires the native package at load time; npm `overrides` point it at
 * stubs/matrix-sdk-crypto-nodejs, which throws on any use until installWasmCryptoBinding() puts these
 * classes into that module's exports (the SDK reads them off the module object at call time).
 *
 * Where the two bindings differ, and what this file does about it (each has its own unit test in
 * test/unit/crypto-wasm-binding.test.ts):
 * 1. initialize(user, device, storePath, passphrase, storeType): WASM wants an IndexedDB database
 *    name and no store type; the path goes to the caller's openStore, the name it returns to WASM.
 * 2. To-device requests: WASM names the fields txn_id / event_type and its body holds only
 *    `messages`; the SDK reads txnId / eventType off shareRoomKey's requests and txn_id / event_type
 *    out of the body of outgoingRequests' ones. Both are provided.
 * 3. UserId[] arguments: WASM takes ownership and frees them; the SDK reuses its array (tracked users,
 *    then missing sessions, then sharing), which then fails "array contains a value of the wrong type".
 *    Clones are passed.
 * 4. receiveSyncChanges: WASM wants a Map and a Set and returns processed events; the SDK passes a
 *    Record and an array and JSON.parses the answer. Converted both ways.
 * 5. decryptRoomEvent: WASM requires DecryptionSettings; the SDK passes two arguments. The sender's
 *    device need not be verified (TrustRequirement.Untrusted), as for any member of a room.
 * 6. sign: WASM's Signatures.get() is a Map of MaybeSignature with isValid() a method; the SDK does
 *    Object.entries() on it and reads isValid as a property (a Map has no entries that way, and a
 *    method is always truthy). A plain object with boolean isValid is returned.
 */
import { createRequire } from "node:module";
import { setFlagsFromString } from "node:v8";
import * as wasm from "@matrix-org/matrix-sdk-crypto-wasm";

export interface WasmBindingOptions {
  /**
   * Given the SDK's store path (a folder), prepares the IndexedDB the machine will use and returns
   * the database name to give WASM; undefined keeps the machine in memory.
   */
  openStore?: (storePath: string) => Promise<string | undefined>;
  /** Told of each machine the SDK makes, by its store path: what the SDK cannot do (cross-signing). */
  onMachine?: (storePath: string | undefined, machine: wasm.OlmMachine) => void;
}

/** The request shapes the SDK reads (RustEngine): type, id, body, and for to-device txnId/eventType. */
export interface SdkRequest {
  readonly id: string | undefined;
  readonly type: number;
  readonly body: string;
  readonly txnId?: string;
  readonly eventType?: string;
}

type WasmRequest =
  | wasm.KeysUploadRequest
  | wasm.KeysQueryRequest
  | wasm.KeysClaimRequest
  | wasm.ToDeviceRequest
  | wasm.SignatureUploadRequest
  | wasm.RoomMessageRequest
  | wasm.KeysBackupRequest;

/** Difference 2: to-device requests in the shape the SDK reads, body included. */
export function sdkRequest(request: WasmRequest): SdkRequest {
  if (request instanceof wasm.ToDeviceRequest) {
    const body = JSON.parse(request.body) as Record<string, unknown>;
    return {
      id: request.id,
      type: request.type,
      txnId: request.txn_id,
      eventType: request.event_type,
      body: JSON.stringify({ ...body, txn_id: request.txn_id, event_type: request.event_type }),
    };
  }
  return { id: request.id, type: request.type, body: request.body };
}

/** Difference 3: WASM consumes the ids it is given; the SDK reuses them. */
const cloned = (users: readonly wasm.UserId[]): wasm.UserId[] => users.map((u) => u.clone());

/** Difference 6: a signature container the SDK can walk with Object.entries and `.isValid`. */
export interface SdkSignatures {
  get(userId: wasm.UserId): Record<string, { isValid: boolean; signature: wasm.Signature | undefined }>;
}

export class SdkOlmMachine {
  constructor(readonly inner: wasm.OlmMachine) {}

  /** Difference 1 (the caller's openStore maps the path to an IndexedDB name). */
  static async initializeWith(
    options: WasmBindingOptions,
    userId: wasm.UserId,
    deviceId: wasm.DeviceId,
    storePath?: string,
    passphrase?: string,
  ): Promise<SdkOlmMachine> {
    const storeName =
      storePath !== undefined && options.openStore ? await options.openStore(storePath) : undefined;
    const inner = await wasm.OlmMachine.initialize(
      userId,
      deviceId,
      storeName,
      storeName !== undefined && passphrase !== undefined && passphrase !== "" ? passphrase : undefined,
    );
    options.onMachine?.(storePath, inner);
    return new SdkOlmMachine(inner);
  }

  get identityKeys(): wasm.IdentityKeys {
    return this.inner.identityKeys;
  }

  get deviceId(): wasm.DeviceId {
    return this.inner.deviceId;
  }

  get userId(): wasm.UserId {
    return this.inner.userId;
  }

  async outgoingRequests(): Promise<SdkRequest[]> {
    const requests = (await this.inner.outgoingRequests()) as WasmRequest[];
    return requests.map(sdkRequest);
  }

  markRequestAsSent(id: string, type: wasm.RequestType, response: string): Promise<true> {
    return this.inner.markRequestAsSent(id, type, response);
  }

  updateTrackedUsers(users: wasm.UserId[]): Promise<void> {
    return this.inner.updateTrackedUsers(cloned(users));
  }

  async getMissingSessions(users: wasm.UserId[]): Promise<SdkRequest | null> {
    const request = await this.inner.getMissingSessions(cloned(users));
    return request ? sdkRequest(request) : null;
  }

  async shareRoomKey(
    roomId: wasm.RoomId,
    users: wasm.UserId[],
    settings: wasm.EncryptionSettings,
  ): Promise<SdkRequest[]> {
    const requests = await this.inner.shareRoomKey(roomId, cloned(users), settings);
    return requests.map(sdkRequest);
  }

  /** Difference 4. Returns the JSON array of to-device events that were decrypted (or plain). */
  async receiveSyncChanges(
    toDeviceEvents: string,
    changedDevices: wasm.DeviceLists,
    oneTimeKeyCounts: Record<string, number> | Map<string, number>,
    unusedFallbackKeys: readonly string[] | Set<string>,
  ): Promise<string> {
    const counts =
      oneTimeKeyCounts instanceof Map ? oneTimeKeyCounts : new Map(Object.entries(oneTimeKeyCounts));
    const processed = await this.inner.receiveSyncChanges(
      toDeviceEvents,
      changedDevices,
      counts,
      new Set(unusedFallbackKeys),
      new wasm.DecryptionSettings(wasm.TrustRequirement.Untrusted),
    );
    const kept: unknown[] = [];
    for (const event of processed) {
      if (
        event.type === wasm.ProcessedToDeviceEventType.Decrypted ||
        event.type === wasm.ProcessedToDeviceEventType.PlainText
      ) {
        kept.push(JSON.parse(event.rawEvent));
      }
    }
    return JSON.stringify(kept);
  }

  /** Difference 5. */
  decryptRoomEvent(event: string, roomId: wasm.RoomId): Promise<wasm.DecryptedRoomEvent> {
    return this.inner.decryptRoomEvent(
      event,
      roomId,
      new wasm.DecryptionSettings(wasm.TrustRequirement.Untrusted),
    );
  }

  encryptRoomEvent(roomId: wasm.RoomId, eventType: string, content: string): Promise<string> {
    return this.inner.encryptRoomEvent(roomId, eventType, content);
  }

  /** Difference 6. */
  async sign(message: string): Promise<SdkSignatures> {
    const signatures = await this.inner.sign(message);
    return {
      get(userId) {
        const out: Record<string, { isValid: boolean; signature: wasm.Signature | undefined }> = {};
        for (const [key, maybe] of signatures.get(userId) ?? new Map<string, wasm.MaybeSignature>()) {
          out[key] = { isValid: maybe.isValid(), signature: maybe.signature };
        }
        return out;
      },
    };
  }

  close(): void {
    this.inner.close();
  }
}

/** The module the SDK expects, built for one set of options. */
export function wasmBinding(options: WasmBindingOptions = {}): Record<string, unknown> {
  class OlmMachine extends SdkOlmMachine {
    /** The native signature: (user, device, storePath, passphrase, storeType). */
    static initialize(
      userId: wasm.UserId,
      deviceId: wasm.DeviceId,
      storePath?: string,
      passphrase?: string,
    ): Promise<SdkOlmMachine> {
      return SdkOlmMachine.initializeWith(options, userId, deviceId, storePath, passphrase);
    }
  }
  return {
    DAGBOT_STUB: false,
    DAGBOT_WASM: true,
    OlmMachine,
    // The native binding's StoreType; WASM has none (its store is IndexedDB).
    StoreType: Object.freeze({ Sqlite: 0 }),
    UserId: wasm.UserId,
    DeviceId: wasm.DeviceId,
    RoomId: wasm.RoomId,
    DeviceLists: wasm.DeviceLists,
    EncryptionSettings: wasm.EncryptionSettings,
    EncryptionAlgorithm: wasm.EncryptionAlgorithm,
    HistoryVisibility: wasm.HistoryVisibility,
    RequestType: wasm.RequestType,
    Attachment: wasm.Attachment,
    EncryptedAttachment: wasm.EncryptedAttachment,
  };
}

let installed: Record<string, unknown> | null = null;

/**
 * V8 flags set before the module is compiled (they apply to WebAssembly compiled afterwards). Lazy
 * compilation is V8's default on Node 20 already, so only the baseline-only flag is toggled; setting
 * lazy compilation off afterwards would have made every later module (graph drawing) compile eagerly.
 */
const WASM_V8_FLAGS = ["--liftoff-only"];
/** Set back once the crypto module is compiled: other WebAssembly is compiled as usual. */
const WASM_V8_FLAGS_AFTER = ["--no-liftoff-only"];

/**
 * Loads the WebAssembly module and puts the binding into the exports of the package matrix-bot-sdk
 * requires (our stub), so its CryptoClient works. Once per process; later calls return the first.
 */
export async function installWasmCryptoBinding(options: WasmBindingOptions = {}): Promise<void> {
  if (installed !== null) return;
  // Memory (an idle bot within 150 MB): each WebAssembly function is compiled on its first
  // call (V8's default) and keeps the baseline compiler's code, instead of all 7.8 MB of it compiled up front and the hot
  // part again optimised. A bot's crypto is a few operations a minute; this saves about 10 MB.
  for (const flag of WASM_V8_FLAGS) setFlagsFromString(flag);
  try {
    await wasm.initAsync();
  } finally {
    for (const flag of WASM_V8_FLAGS_AFTER) setFlagsFromString(flag);
  }
  const require = createRequire(import.meta.url);
  const sdkRequire = createRequire(require.resolve("matrix-bot-sdk"));
  const target = sdkRequire("@matrix-org/matrix-sdk-crypto-nodejs") as Record<string, unknown>;
  installed = wasmBinding(options);
  Object.assign(target, installed);
}
