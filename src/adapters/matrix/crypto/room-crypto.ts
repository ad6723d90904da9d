/**
 * End-to-end encryption for one node's Matrix device, between intake, sender and matrix-bot-sdk's
 * CryptoClient (which runs on the WASM binding, wasm-binding.ts):
 * - before the client starts: the binding is installed and the device's crypto store loaded from its
 *   snapshot in the state folder (idb-snapshot.ts). A device whose keys the homeserver has but whose
 *   store is missing has lost its crypto state: that is an error with the recovery in it (a new
 *   device), never a device that silently cannot decrypt.
 * - per sync batch, before its timeline is read: to-device messages, one-time-key counts and device
 *   list changes go to the crypto (as the SDK's own processSync does); after the batch is stored and
 *   before the sync position moves on, the store is saved.
 * - timeline events of type m.room.encrypted are decrypted (sync and gap backfill alike).
 * - sends to an encrypted room are encrypted (room key shared with the members' devices first).
 * - after the first sync batch, the device signs itself with the account's self-signing key
 *   (cross-signing.ts; docs/architecture.md §12), so clients that exclude insecure devices read it.
 * Crypto calls that change state run one at a time (a sync batch, an encryption).
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { OlmMachine } from "@matrix-org/matrix-sdk-crypto-wasm";
import { RustSdkCryptoStorageProvider, type MatrixClient } from "matrix-bot-sdk";
import type { Logger } from "../../../ports/logger.js";
import type { TimelineEvent } from "../classify.js";
import { type MatrixHttp } from "../http.js";
import { signOwnDevice, type DeviceSigning } from "./cross-signing.js";
import { decryptionReason } from "./decryption-reason.js";
import { IdbSnapshotFile } from "./idb-snapshot.js";
import { installWasmCryptoBinding } from "./wasm-binding.js";

export const SNAPSHOT_FILE = "crypto-store.idb";

/** The crypto state of this device is gone or unreadable; the message says how to recover. */
export class CryptoStateError extends Error {
  override readonly name = "CryptoStateError";
}

export type DecryptResult = { ok: true; event: TimelineEvent } | { ok: false; reason: string };

type Json = Record<string, unknown>;
const obj = (v: unknown): Json =>
  v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Json) : {};

/** The store paths the binding gets from the SDK, mapped to their snapshot files. */
const snapshots = new Map<string, IdbSnapshotFile>();
/** The machines the SDK made, by store path: cross-signing goes to them directly. */
const machines = new Map<string, OlmMachine>();
const noteMachine = (storePath: string | undefined, machine: OlmMachine): void => {
  if (storePath !== undefined) machines.set(storePath, machine);
};
/** How many sync batches a node tries again to sign its device when the answer may change. */
const SIGNING_ATTEMPTS = 10;

async function openStore(storePath: string): Promise<string> {
  const snapshot = snapshots.get(storePath);
  if (snapshot === undefined) throw new CryptoStateError(`no crypto store was prepared for ${storePath}`);
  return snapshot.storeName;
}

export interface RoomCryptoOptions {
  /** This device's folder (cryptoStateDir). */
  dir: string;
  userId: string;
  deviceId: string;
  http: MatrixHttp;
  logger: Logger;
  /** The account's recovery key (matrix.recovery_key_file), to sign this device; null: not configured. */
  recoveryKey: string | null;
}

export class RoomCrypto {
  readonly cryptoStore: RustSdkCryptoStorageProvider;
  private readonly snapshot: IdbSnapshotFile;
  private client: MatrixClient | null = null;
  private queue: Promise<unknown> = Promise.resolve();
  private announced = false;
  private markReady: () => void = () => undefined;
  /** Resolves once the client's crypto is prepared (keys uploaded). */
  readonly ready: Promise<void>;
  readonly stats = { decrypted: 0, undecryptable: 0, encrypted: 0 };
  /** Whether this device is cross-signed by its account (null until the first sync batch). */
  signing: DeviceSigning | null = null;
  private signingAttempts = 0;

  constructor(private readonly o: RoomCryptoOptions) {
    // Owner-only before anything is written into it.
    mkdirSync(o.dir, { recursive: true, mode: 0o700 });
    this.snapshot = new IdbSnapshotFile(join(o.dir, SNAPSHOT_FILE), `dagbot-${o.deviceId}`);
    snapshots.set(o.dir, this.snapshot);
    this.cryptoStore = new RustSdkCryptoStorageProvider(o.dir, 0);
    this.ready = new Promise((resolve) => (this.markReady = resolve));
  }

  /**
   * Installs the binding and loads this device's store. Throws CryptoStateError when the state is
   * unreadable, or missing for a device the homeserver already has keys for.
   */
  async load(): Promise<"loaded" | "new device"> {
    await installWasmCryptoBinding({ openStore, onMachine: noteMachine });
    let loaded: "loaded" | "missing";
    try {
      loaded = await this.snapshot.load();
    } catch (e) {
      throw new CryptoStateError(
        `the crypto state of device ${this.o.deviceId} in ${this.snapshot.path} cannot be read (${String(e)}). ` +
          `${RECOVERY}`,
      );
    }
    if (loaded === "loaded") {
      this.o.logger.info({ device: this.o.deviceId, file: this.snapshot.path }, "crypto state loaded");
      return "loaded";
    }
    const res = await this.o.http.request("POST", "/_matrix/client/v3/keys/query", {
      body: { device_keys: { [this.o.userId]: [this.o.deviceId] } },
    });
    const published = obj(obj(obj(res["device_keys"])[this.o.userId])[this.o.deviceId]);
    if (Object.keys(published).length > 0) {
      throw new CryptoStateError(
        `the crypto state of device ${this.o.deviceId} is lost: the homeserver has this device's keys, ` +
          `but ${this.snapshot.path} does not exist, so it could not decrypt anything sent to it. ${RECOVERY}`,
      );
    }
    this.o.logger.info(
      { device: this.o.deviceId, file: this.snapshot.path },
      "new crypto device: keys are made and uploaded",
    );
    return "new device";
  }

  /** The client whose CryptoClient this is; call before client.start(). */
  attach(client: MatrixClient): void {
    this.client = client;
  }

  private get crypto() {
    const crypto = this.client?.crypto;
    if (!crypto?.isReady) throw new Error("encryption is not ready yet");
    return crypto;
  }

  /** Runs `fn` after every crypto operation queued before it. */
  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.queue.then(fn, fn);
    this.queue = run.catch(() => undefined);
    return run;
  }

  /** The crypto part of a sync batch (what matrix-bot-sdk's processSync does), before its timeline. */
  async onSync(raw: Json): Promise<void> {
    const crypto = this.crypto;
    const toDevice = Array.isArray(obj(raw["to_device"])["events"])
      ? (obj(raw["to_device"])["events"] as [])
      : [];
    const fallback =
      raw["device_unused_fallback_key_types"] ?? raw["org.matrix.msc2732.device_unused_fallback_key_types"];
    const counts = obj(raw["device_one_time_keys_count"]) as Record<string, number>;
    const lists = obj(raw["device_lists"]);
    const strings = (v: unknown): string[] =>
      Array.isArray(v) ? v.filter((x) => typeof x === "string") : [];
    await this.serial(() =>
      crypto.updateSyncData(
        toDevice,
        counts,
        strings(fallback) as never[],
        strings(lists["changed"]),
        strings(lists["left"]),
      ),
    );
    // After the batch: the crypto has asked for this account's keys by then (its own device, its
    // cross-signing identity).
    if (this.signing === null || (!this.signing.signed && this.signing.retry)) await this.sign();
    if (!this.announced) {
      this.announced = true;
      const signed = this.signing?.signed === true;
      // The fingerprint an operator compares when verifying this device by hand, and whether people's
      // clients will trust it without that.
      this.o.logger.info(
        { device: this.o.deviceId, ed25519: crypto.clientDeviceEd25519, crossSigned: signed },
        signed
          ? "end-to-end encryption ready; this device is cross-signed by its account"
          : "end-to-end encryption ready; this device is NOT cross-signed by its account",
      );
    }
    this.markReady();
  }

  /** Signs this device with the account's self-signing key if it is not signed (cross-signing.ts). */
  private async sign(): Promise<void> {
    const machine = machines.get(this.o.dir);
    if (machine === undefined || this.signingAttempts >= SIGNING_ATTEMPTS) return;
    this.signingAttempts += 1;
    let outcome: DeviceSigning;
    try {
      outcome = await this.serial(() =>
        signOwnDevice({
          machine,
          http: this.o.http,
          userId: this.o.userId,
          deviceId: this.o.deviceId,
          recoveryKey: this.o.recoveryKey,
        }),
      );
    } catch (e) {
      outcome = {
        signed: false,
        why: `signing device ${this.o.deviceId} failed: ${e instanceof Error ? e.message : String(e)}`,
        retry: true,
      };
    }
    const before = this.signing;
    this.signing = outcome;
    if (outcome.signed) {
      if (outcome.justSigned) {
        this.o.logger.info(
          { device: this.o.deviceId },
          "signed this device with the account's self-signing key",
        );
      }
      return;
    }
    // Loud once per reason: people whose clients exclude insecure devices cannot use this node.
    if (before === null || before.signed || before.why !== outcome.why) {
      this.o.logger.error({ device: this.o.deviceId, err: outcome.why }, "this device is not cross-signed");
    }
  }

  /** Saves the crypto store (skipped when unchanged); before the sync position moves on. */
  save(): Promise<boolean> {
    return this.serial(() => this.snapshot.save());
  }

  async decrypt(roomId: string, ev: TimelineEvent): Promise<DecryptResult> {
    try {
      const out = await this.crypto.decryptRoomEvent({ raw: ev } as never, roomId);
      const clear = out.raw as TimelineEvent;
      const content = { ...obj(clear.content) };
      // The relation stays in the clear on the encrypted event (reactions, edits, threads).
      const relation = obj(ev.content)["m.relates_to"];
      if (content["m.relates_to"] === undefined && relation !== undefined) content["m.relates_to"] = relation;
      this.stats.decrypted += 1;
      return { ok: true, event: { ...clear, content } };
    } catch (e) {
      this.stats.undecryptable += 1;
      return { ok: false, reason: decryptionReason(e) };
    }
  }

  /** The event to send in `roomId`: encrypted when the room is, as it was otherwise. */
  async encryptFor(roomId: string, type: string, content: Json): Promise<{ type: string; content: Json }> {
    await this.ready;
    const crypto = this.crypto;
    if (!(await crypto.isRoomEncrypted(roomId))) return { type, content };
    const encrypted = await this.serial(async () => {
      const out = (await crypto.encryptRoomEvent(roomId, type, content)) as unknown as Json;
      await this.snapshot.save();
      return out;
    });
    this.stats.encrypted += 1;
    return { type: "m.room.encrypted", content: encrypted };
  }

  /** Whether `roomId` is encrypted (as the crypto sees it), waiting for the crypto to be ready. */
  async isRoomEncrypted(roomId: string): Promise<boolean> {
    await this.ready;
    return this.crypto.isRoomEncrypted(roomId);
  }

  /** Encrypts a file for an encrypted room: the bytes to upload and the `file` info without its url. */
  async encryptMedia(data: Uint8Array): Promise<{ data: Uint8Array; file: Json }> {
    await this.ready;
    const out = await this.crypto.encryptMedia(Buffer.from(data));
    return { data: new Uint8Array(out.buffer), file: out.file as unknown as Json };
  }
}

const RECOVERY =
  "Recover with a new device: log in again for a new access token (a new device id), put it in the " +
  "config and restart; the new device gets new keys, and room keys for messages sent from then on " +
  "(see docs/encryption.md).";
