/**
 * A person in encrypted rooms for the e2e tests: an independent real Matrix client, matrix-js-sdk
 * with its Rust (WASM) crypto, as Element uses. It syncs, decrypts what it receives, sends encrypted
 * messages and reactions in encrypted rooms, and waits for decrypted events matching a predicate.
 * Its crypto is in memory (no IndexedDB on Node), which a test person does not need to keep.
 */
import {
  ClientEvent,
  createClient,
  MatrixEventEvent,
  RoomEvent,
  type MatrixClient,
  type MatrixEvent as SdkEvent,
} from "matrix-js-sdk";
import { OnlySignedDevicesIsolationMode } from "matrix-js-sdk/lib/crypto-api/index.js";
import type { MatrixEvent } from "./matrix-user.js";
import type { RegisteredUser } from "./synapse.js";

// matrix-js-sdk 43 declares Node >= 22 and uses Promise.withResolvers (Node 22); Node 20 lacks it.
// The test person only: dagbot itself does not load matrix-js-sdk.
const promiseCtor = Promise as unknown as Record<string, unknown>;
if (typeof promiseCtor["withResolvers"] !== "function") {
  promiseCtor["withResolvers"] = function withResolvers<T>() {
    let resolve!: (value: T) => void;
    let reject!: (reason: unknown) => void;
    const promise = new Promise<T>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    return { promise, resolve, reject };
  };
}

export interface PersonEvent extends MatrixEvent {
  /** Whether the event came encrypted (and was decrypted by this client). */
  encrypted: boolean;
}

export class EncryptedPerson {
  private readonly seen = new Map<string, PersonEvent>();
  private readonly waiters = new Set<() => void>();
  /** Events this client failed to decrypt (event id → reason). */
  readonly undecryptable = new Map<string, string>();

  private constructor(
    readonly client: MatrixClient,
    readonly userId: string,
  ) {}

  /**
   * `mode: "2026"` runs the client as Element does since April 2026: its account cross-signed (its
   * first cross-signing keys need no interactive auth) and devices not cross-signed by their owner
   * excluded (OnlySignedDevicesIsolationMode: no room keys for them, nothing shown from them).
   */
  static async start(
    baseUrl: string,
    user: RegisteredUser,
    { mode = "legacy" }: { mode?: "legacy" | "2026" } = {},
  ): Promise<EncryptedPerson> {
    const client = createClient({
      baseUrl,
      accessToken: user.accessToken,
      userId: user.userId,
      deviceId: user.deviceId,
      // matrix-js-sdk logs a lot at debug; the test reads its own records.
      logger: silentLogger,
    });
    await client.initRustCrypto({ useIndexedDB: false });
    if (mode === "2026") {
      const crypto = client.getCrypto();
      if (crypto === undefined) throw new Error("matrix-js-sdk has no crypto after initRustCrypto");
      await crypto.bootstrapCrossSigning({
        setupNewCrossSigning: true,
        authUploadDeviceSigningKeys: async (makeRequest) => {
          await makeRequest(null);
        },
      });
      crypto.setDeviceIsolationMode(new OnlySignedDevicesIsolationMode());
    }
    const person = new EncryptedPerson(client, user.userId);
    client.on(RoomEvent.Timeline, (event) => person.note(event));
    client.on(MatrixEventEvent.Decrypted, (event) => person.note(event));
    const synced = new Promise<void>((resolve) => {
      const onSync = (state: string) => {
        if (state === "PREPARED" || state === "SYNCING") {
          client.off(ClientEvent.Sync, onSync);
          resolve();
        }
      };
      client.on(ClientEvent.Sync, onSync);
    });
    await client.startClient({ initialSyncLimit: 50 });
    await synced;
    return person;
  }

  private note(event: SdkEvent): void {
    const id = event.getId();
    const roomId = event.getRoomId();
    if (id === undefined || roomId === undefined) return;
    if (event.isBeingDecrypted() || event.shouldAttemptDecryption()) return;
    if (event.isDecryptionFailure()) {
      this.undecryptable.set(id, String(event.decryptionFailureReason));
      return;
    }
    this.undecryptable.delete(id);
    this.seen.set(id, {
      event_id: id,
      room_id: roomId,
      type: event.getType(),
      sender: event.getSender() ?? "",
      origin_server_ts: event.getTs(),
      content: event.getContent() as Record<string, unknown>,
      encrypted: event.isEncrypted(),
    });
    for (const wake of this.waiters) wake();
  }

  events(roomId?: string): PersonEvent[] {
    return [...this.seen.values()].filter((e) => roomId === undefined || e.room_id === roomId);
  }

  /** Sends a text message (encrypted in an encrypted room) and returns its event id. */
  async sendText(roomId: string, body: string): Promise<string> {
    const res = await this.client.sendEvent(
      roomId,
      "m.room.message" as never,
      { msgtype: "m.text", body } as never,
    );
    return res.event_id;
  }

  async sendReaction(roomId: string, eventId: string, key: string): Promise<string> {
    const res = await this.client.sendEvent(
      roomId,
      "m.reaction" as never,
      { "m.relates_to": { rel_type: "m.annotation", event_id: eventId, key } } as never,
    );
    return res.event_id;
  }

  waitFor(predicate: (e: PersonEvent) => boolean, timeoutMs: number, what: string): Promise<PersonEvent> {
    return new Promise((resolve, reject) => {
      const check = (): boolean => {
        const found = [...this.seen.values()].find(predicate);
        if (found === undefined) return false;
        cleanup();
        resolve(found);
        return true;
      };
      const timer = setTimeout(() => {
        cleanup();
        const failures = [...this.undecryptable.entries()].map(([id, why]) => `${id}: ${why}`);
        reject(
          new Error(
            `${this.userId}: no ${what} within ${timeoutMs} ms` +
              (failures.length > 0 ? ` (undecryptable: ${failures.join("; ")})` : ""),
          ),
        );
      }, timeoutMs);
      const cleanup = () => {
        clearTimeout(timer);
        this.waiters.delete(wake);
      };
      const wake = () => void check();
      this.waiters.add(wake);
      check();
    });
  }

  stop(): void {
    this.client.stopClient();
  }
}

const noop = () => undefined;
const silentLogger = {
  trace: noop,
  debug: noop,
  info: noop,
  warn: noop,
  error: noop,
  getChild: () => silentLogger,
};
