/**
 * Matrix intake (docs/architecture.md §4 step 1, §8): every node syncs its configured rooms and inserts each
 * `!dag` command and each reaction into the shared inbox (insert-or-ignore by event id); only the
 * leader handles them. The sync loop is our own (plain-sync.ts) while every room is in the clear,
 * and matrix-bot-sdk's (sdk-client.ts, for its crypto) once one is encrypted; either way intake is
 * at-least-once and gap-free (recipe §3.4):
 * - each batch is processed by awaiting every insert of it, retrying store failures, and only then
 *   is the token persisted, into a file written atomically (SyncStateFile). A crash mid-batch
 *   replays the batch; the inbox dedupes.
 * - a `limited` timeline is backfilled with /messages back to the previous sync position, the last
 *   event already in the inbox, or the command window, whichever comes first.
 * - nothing is emitted, so no unawaited handler can reject unhandled.
 * Invites to rooms not in the config are declined; an encrypted room is reported once and skipped.
 *
 * With encryption on, the crypto (the SDK and the WASM machine, about 70 MB resident) is
 * loaded only once a configured room is encrypted: at start when one is, or when a sync batch shows
 * one turning encrypted. Then that batch is not stored: the plain loop stops and the SDK's client
 * with this device's crypto syncs again from the stored position, so the batch (its to-device keys
 * included) is read with the crypto.
 */
import type { Logger } from "../../ports/logger.js";
import type { InboxStore } from "../../ports/store.js";
import { StoreError } from "../../ports/errors.js";
import { INBOX_EVENT_TYPE_KEY, UNDECRYPTABLE_KEY } from "../../ports/store.js";
import { classifyEvent, type TimelineEvent } from "./classify.js";
import {
  enc,
  isNotFound,
  MatrixRequestError,
  matrixHttp,
  ResponseTooLargeError,
  type MatrixHttp,
} from "./http.js";
import { SyncStateFile } from "./sync-state-file.js";
import { PlainSync } from "./plain-sync.js";
import type { DecryptResult, RoomCrypto } from "./crypto/room-crypto.js";
import type { Backoff } from "../../domain/backoff.js";
import { backoffMs } from "../../domain/backoff.js";

/** Events per room per sync; more than this since the last sync is a gap that backfill fetches. */
export const DEFAULT_TIMELINE_LIMIT = 50;
const BACKFILL_PAGE_SIZE = 100;
/** 5000 events of one room in one gap: beyond that the command window would be the better bound. */
const MAX_BACKFILL_PAGES = 50;
const INTAKE_BACKOFF: Backoff = { baseMs: 250, capMs: 10_000, maxDoublings: 6 };
/**
 * How long an encrypted event that cannot be decrypted is retried (at each sync batch, as room keys
 * may come later) before it is recorded as undecryptable. Meanwhile another node of the fleet that
 * can decrypt it records the clear command first (the inbox keeps the first insert).
 */
export const DEFAULT_DECRYPT_GRACE_MS = 15_000;

export interface MatrixIntakeOptions {
  homeserverUrl: string;
  accessToken: string;
  /** The account the token must belong to (the config's matrix.user_id). */
  userId: string;
  /** The only rooms this node joins and reads. */
  rooms: readonly string[];
  commandWindowMs: number;
  /** How long an undecrypted event is retried before it counts as undecryptable (matrix.decrypt_grace). */
  decryptGraceMs?: number;
  /** This node's sync position file (one per node and account). */
  stateFile: string;
  /** Recorded as seen_by on the rows this node inserts first. */
  nodeId: string;
  inbox: Pick<InboxStore, "insertInboxEvent" | "latestInboxEvent" | "getInboxEvent">;
  logger: Logger;
  timelineLimit?: number;
  /**
   * The other bot accounts of the fleet (matrix.fleet). Their events, and this account's, are never
   * commands; nobody else counts as a bot, whatever their events carry.
   */
  fleet?: readonly string[];
  now?: () => number;
  /** Called when sync shows a change of a room's m.room.power_levels (drop cached permissions). */
  onPowerLevelsChanged?: (roomId: string) => void;
  /** Called once per room that turns out to be encrypted (at start or later). */
  onEncrypted?: (roomId: string) => void;
  /**
   * End-to-end encryption: the folder of a device's crypto state, given its device id (absent:
   * encrypted rooms are reported through onEncrypted and not read).
   */
  cryptoDir?: (deviceId: string) => string;
  /** The account's recovery key, with which a node signs its own device (cross-signing.ts). */
  recoveryKey?: string | null;
  /** An encrypted event in a configured room that could not be decrypted (after its retries). */
  onUndecryptable?: (roomId: string, event: TimelineEvent, reason: string) => void;
  /**
   * The crypto, loaded after start because a room turned encrypted, cannot be (its state is lost or
   * unreadable: an IntakeConfigError): the intake has stopped, as start() would have rejected.
   */
  onFailed?: (err: unknown) => void;
}

export interface IntakeStats {
  batches: number;
  inserted: number;
  duplicates: number;
  backfilled: number;
}

/** A sync loop: ours (PlainSync) or matrix-bot-sdk's with the crypto (IntakeClient). */
interface SyncClient {
  start(filter: Record<string, unknown>): Promise<unknown>;
  stop(): void;
}

const obj = (v: unknown): Record<string, unknown> =>
  v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
/** The objects of an event list; anything else in it (null, a number: the server is semi-trusted) is dropped. */
const list = (v: unknown): TimelineEvent[] =>
  Array.isArray(v)
    ? (v.filter((e) => e !== null && typeof e === "object" && !Array.isArray(e)) as TimelineEvent[])
    : [];

export class MatrixIntake {
  readonly stats: IntakeStats = { batches: 0, inserted: 0, duplicates: 0, backfilled: 0 };
  private readonly storage: SyncStateFile;
  private client: SyncClient | null = null;
  private roomCrypto: RoomCrypto | null = null;
  private readonly http: MatrixHttp;
  private readonly log: Logger;
  private readonly rooms: ReadonlySet<string>;
  private readonly fleet: ReadonlySet<string>;
  private readonly encrypted = new Set<string>();
  private readonly strangers = new Set<string>();
  /** Encrypted events not decrypted yet, retried at each batch until the decrypt grace has passed. */
  private readonly pendingDecryption = new Map<
    string,
    { roomId: string; ev: TimelineEvent; firstFailedAt: number; reason: string }
  >();
  /** Encrypted events of configured rooms that this node gave up decrypting (for `!dag nodes`). */
  undecryptable = 0;
  /** The last of them: when (this node's clock), from whom and why (for /readyz detail and the log). */
  lastUndecryptable: { at: number; sender: string; reason: string } | null = null;
  private readonly now: () => number;
  private readonly stopping = new AbortController();
  /** This device's id (whoami), for loading its crypto. */
  private deviceId: string | null = null;
  /** The crypto being loaded after start because a room turned encrypted. */
  private cryptoUpgrade: Promise<void> | null = null;
  private markReady: () => void = () => undefined;
  /** Resolves once the first sync batch is in the inbox. */
  readonly ready: Promise<void>;

  constructor(private readonly o: MatrixIntakeOptions) {
    this.log = o.logger.child({ component: "intake" });
    this.rooms = new Set(o.rooms);
    this.fleet = new Set([o.userId, ...(o.fleet ?? [])]);
    this.now = o.now ?? Date.now;
    this.http = matrixHttp(o.homeserverUrl, o.accessToken);
    this.storage = new SyncStateFile(o.stateFile);
    if (this.storage.loadProblem !== null) this.log.warn(this.storage.loadProblem);
    this.ready = new Promise((resolve) => (this.markReady = resolve));
  }

  isEncrypted(roomId: string): boolean {
    return this.encrypted.has(roomId);
  }

  /** This node's device crypto, once start() has loaded it (null without encryption). */
  get crypto(): RoomCrypto | null {
    return this.roomCrypto;
  }

  /**
   * This device's crypto for sending into `roomId`: null without encryption, or while no room is
   * encrypted; waits for the crypto when the room is known encrypted and it is still loading.
   */
  async cryptoFor(roomId: string): Promise<RoomCrypto | null> {
    if (this.o.cryptoDir === undefined) return null;
    await this.cryptoLoaded;
    if (this.roomCrypto === null && this.encrypted.has(roomId) && this.cryptoUpgrade !== null) {
      await this.cryptoUpgrade;
    }
    return this.roomCrypto;
  }

  /** The event to send: encrypted when the room is and encryption is on, else unchanged. */
  async encryptFor(
    roomId: string,
    type: string,
    content: Record<string, unknown>,
  ): Promise<{ type: string; content: Record<string, unknown> }> {
    const crypto = await this.cryptoFor(roomId);
    if (crypto === null) return { type, content };
    return crypto.encryptFor(roomId, type, content);
  }

  private markCryptoLoaded: () => void = () => undefined;
  private readonly cryptoLoaded = new Promise<void>((resolve) => (this.markCryptoLoaded = resolve));

  /**
   * Checks the account, joins the configured rooms, notes which are encrypted and starts syncing.
   * Retries while the homeserver is unreachable; rejects only on a wrong account or a stop.
   */
  async start(): Promise<void> {
    await this.retrying(
      "start",
      async () => {
        const whoami = await this.http.request("GET", "/_matrix/client/v3/account/whoami");
        if (whoami["user_id"] !== this.o.userId) {
          throw new IntakeConfigError(
            `the access token belongs to ${String(whoami["user_id"])}, but matrix.user_id is ${this.o.userId}`,
          );
        }
        if (this.o.cryptoDir !== undefined) {
          const deviceId = whoami["device_id"];
          if (typeof deviceId !== "string" || deviceId === "") {
            throw new IntakeConfigError("the homeserver does not say which device the access token is for");
          }
          this.deviceId = deviceId;
        }
        const joined = await this.http.request("GET", "/_matrix/client/v3/joined_rooms");
        const joinedRooms = new Set(Array.isArray(joined["joined_rooms"]) ? joined["joined_rooms"] : []);
        for (const roomId of this.rooms) {
          if (!joinedRooms.has(roomId)) await this.join(roomId);
          await this.checkEncryption(roomId);
        }
        if (this.client === null) await this.makeClient(this.encrypted.size > 0);
        await this.client?.start(this.filter());
      },
      true,
    );
    this.log.info(
      { rooms: [...this.rooms], resumed: this.storage.getSyncToken() !== null },
      "matrix sync started",
    );
  }

  /** Stops syncing; a batch being stored is abandoned (its token is not saved, so it is replayed). */
  stop(): void {
    this.stopping.abort();
    this.client?.stop();
  }

  /**
   * The SDK client, with this device's crypto when encryption is on and a room is encrypted (loaded,
   * or a clear error); without, it stops at the first batch that shows a configured room encrypted.
   */
  private async makeClient(withCrypto: boolean): Promise<void> {
    if (withCrypto && this.o.cryptoDir !== undefined && this.deviceId !== null) {
      // Imported here: a node whose rooms are all in the clear loads neither the SDK nor the crypto.
      const { IntakeClient, routeSdkLogs } = await import("./sdk-client.js");
      const { CryptoStateError, RoomCrypto } = await import("./crypto/room-crypto.js");
      routeSdkLogs(this.o.logger);
      const crypto = new RoomCrypto({
        dir: this.o.cryptoDir(this.deviceId),
        userId: this.o.userId,
        deviceId: this.deviceId,
        http: this.http,
        logger: this.log,
        recoveryKey: this.o.recoveryKey ?? null,
      });
      try {
        await crypto.load();
      } catch (e) {
        if (e instanceof CryptoStateError) throw new IntakeConfigError(e.message);
        throw e;
      }
      this.roomCrypto = crypto;
      this.client = new IntakeClient(
        this.o.homeserverUrl,
        this.o.accessToken,
        this.storage,
        (raw) => this.ingest(raw),
        crypto,
      );
    } else {
      this.client = new PlainSync({
        http: this.http,
        userId: this.o.userId,
        storage: this.storage,
        logger: this.log,
        // turnsEncrypted stops this loop before the token is saved: the crypto's client reads the
        // batch again.
        processSync: async (raw) => {
          if (!this.turnsEncrypted(raw)) await this.ingest(raw);
        },
      });
    }
    this.markCryptoLoaded();
  }

  /**
   * Without crypto loaded yet (encryption on): whether a configured room of this batch has
   * m.room.encryption in its state or timeline. If so, the crypto is loaded (once) and a client
   * with it syncs again from the stored position.
   */
  private turnsEncrypted(raw: Record<string, unknown>): boolean {
    if (this.o.cryptoDir === undefined || this.roomCrypto !== null) return false;
    const joined = obj(obj(raw["rooms"])["join"]);
    const turned = Object.entries(joined).filter(
      ([roomId, room]) =>
        this.rooms.has(roomId) &&
        [...list(obj(obj(room)["state"])["events"]), ...list(obj(obj(room)["timeline"])["events"])].some(
          (ev) => ev.type === "m.room.encryption" && ev.state_key === "",
        ),
    );
    const found = turned.length > 0;
    // Known encrypted at once, so a reply sent while the crypto loads waits for it (cryptoFor)
    // instead of going out in the clear.
    for (const [roomId] of turned) this.noteEncrypted(roomId);
    if (found) {
      this.client?.stop();
      this.cryptoUpgrade ??= this.loadCryptoAndResync();
    }
    return found;
  }

  private async loadCryptoAndResync(): Promise<void> {
    this.log.info("a configured room turned encrypted: loading this device's crypto");
    try {
      await this.retrying(
        "load the crypto",
        async () => {
          if (this.roomCrypto === null) await this.makeClient(true);
          // A stop while the crypto loaded found the old loop; the new one must not start after it.
          if (this.stopping.signal.aborted) return;
          await this.client?.start(this.filter());
        },
        true,
      );
    } catch (e) {
      if (this.stopping.signal.aborted) return;
      this.log.error({ err: String(e) }, "cannot load this device's crypto");
      this.stop();
      this.o.onFailed?.(e);
    }
  }

  private filter(): Record<string, unknown> {
    return {
      presence: { types: [] },
      account_data: { types: [] },
      room: {
        timeline: { limit: this.o.timelineLimit ?? DEFAULT_TIMELINE_LIMIT },
        ephemeral: { types: [] },
        account_data: { types: [] },
        state: { lazy_load_members: true },
      },
    };
  }

  private async join(roomId: string): Promise<void> {
    try {
      await this.http.request("POST", `/_matrix/client/v3/join/${enc(roomId)}`, { body: {} });
      this.log.info({ room: roomId }, "joined room");
    } catch (e) {
      if (!(e instanceof MatrixRequestError)) throw e;
      // Not invited yet: the invite arrives through sync and is accepted then.
      this.log.warn({ room: roomId, err: e.message }, "cannot join a configured room yet");
    }
  }

  private async checkEncryption(roomId: string): Promise<void> {
    try {
      await this.http.request("GET", `/_matrix/client/v3/rooms/${enc(roomId)}/state/m.room.encryption/`);
      this.noteEncrypted(roomId);
    } catch (e) {
      if (isNotFound(e)) return;
      // 403: not a member (yet); sync reports the state once we are.
      if (e instanceof MatrixRequestError && e.status === 403) return;
      throw e;
    }
  }

  private noteEncrypted(roomId: string): void {
    if (this.encrypted.has(roomId)) return;
    this.encrypted.add(roomId);
    if (this.o.cryptoDir !== undefined) {
      this.log.info({ room: roomId }, "room is encrypted: its events are decrypted and answers encrypted");
      return;
    }
    this.log.warn({ room: roomId }, "room is encrypted and matrix.encryption is off: the room is ignored");
    this.o.onEncrypted?.(roomId);
  }

  /** One sync batch; returns only when every command in it is in the inbox (or on stop, by throwing). */
  private async ingest(raw: Record<string, unknown>): Promise<void> {
    // persistTokenAfterSync: the stored token is still the one this batch was requested with.
    const since = this.storage.getSyncToken();
    const now = this.now();
    const rooms = obj(raw["rooms"]);
    for (const [roomId, invite] of Object.entries(obj(rooms["invite"]))) await this.onInvite(roomId, invite);
    await this.retryDecryption(now);
    for (const [roomId, room] of Object.entries(obj(rooms["join"]))) {
      if (!this.rooms.has(roomId)) {
        if (!this.strangers.has(roomId)) this.log.info({ room: roomId }, "ignoring a room not in the config");
        this.strangers.add(roomId);
        continue;
      }
      await this.ingestRoom(roomId, obj(room), since, now);
    }
    for (const roomId of Object.keys(obj(rooms["leave"]))) {
      if (this.rooms.has(roomId))
        this.log.warn({ room: roomId }, "left or was removed from a configured room");
    }
    this.stats.batches += 1;
    if (this.stats.batches === 1) {
      this.log.info({ rooms: [...this.rooms], encrypted: [...this.encrypted] }, "matrix intake ready");
      this.markReady();
    }
  }

  private async ingestRoom(
    roomId: string,
    room: Record<string, unknown>,
    since: string | null,
    now: number,
  ): Promise<void> {
    const timeline = obj(room["timeline"]);
    const events = list(timeline["events"]);
    for (const ev of [...list(obj(room["state"])["events"]), ...events]) this.noteState(roomId, ev);
    if (this.encrypted.has(roomId) && this.roomCrypto === null) return;
    let gap: TimelineEvent[] = [];
    if (timeline["limited"] === true && typeof timeline["prev_batch"] === "string") {
      gap = await this.backfill(roomId, timeline["prev_batch"], since, now);
      this.stats.backfilled += gap.length;
      if (gap.length > 0) this.log.info({ room: roomId, events: gap.length }, "backfilled a sync gap");
    }
    for (const ev of [...gap, ...events]) await this.ingestEvent(roomId, ev, now);
  }

  private noteState(roomId: string, ev: TimelineEvent): void {
    if (ev.state_key !== "") return;
    if (ev.type === "m.room.power_levels") this.o.onPowerLevelsChanged?.(roomId);
    if (ev.type === "m.room.encryption") this.noteEncrypted(roomId);
  }

  private async ingestEvent(roomId: string, encryptedOrPlain: TimelineEvent, now: number): Promise<void> {
    let ev = encryptedOrPlain;
    if (ev.type === "m.room.encrypted" && this.roomCrypto !== null) {
      const result: DecryptResult = await this.roomCrypto.decrypt(roomId, ev);
      if (!result.ok) {
        const fromFleet = typeof ev.sender === "string" && this.fleet.has(ev.sender);
        const old =
          typeof ev.origin_server_ts === "number" && ev.origin_server_ts < now - this.o.commandWindowMs;
        if (fromFleet || old || typeof ev.event_id !== "string") return;
        if (!this.pendingDecryption.has(ev.event_id)) {
          this.log.info(
            { room: roomId, event: ev.event_id, sender: ev.sender, err: result.reason },
            "cannot decrypt an event yet; retrying",
          );
          this.pendingDecryption.set(ev.event_id, { roomId, ev, firstFailedAt: now, reason: result.reason });
        }
        return;
      }
      ev = result.event;
    }
    const c = classifyEvent(ev, { now, commandWindowMs: this.o.commandWindowMs, fleet: this.fleet });
    if (c.kind === "ignored") {
      if (c.why === "older than the command window") {
        this.log.info(
          { room: roomId, event: ev.event_id },
          "ignoring a command older than the command window",
        );
      }
      return;
    }
    // An edit is answered ("edits are not applied") when it edits a command or turns into one.
    if (c.kind === "edit" && !c.isCommand) {
      const edited = await this.retrying("read the edited event", () =>
        this.o.inbox.getInboxEvent(c.editedEventId),
      );
      if (edited === null || edited.roomId !== roomId) return;
    }
    const result = await this.retrying("insert into the inbox", () =>
      this.o.inbox.insertInboxEvent({
        eventId: c.eventId,
        roomId,
        sender: c.sender,
        originServerTs: c.originServerTs,
        content: c.content,
        seenBy: this.o.nodeId,
      }),
    );
    if (result === "inserted") {
      this.stats.inserted += 1;
      this.log.info({ room: roomId, event: c.eventId, kind: c.kind, sender: c.sender }, "command seen");
    } else this.stats.duplicates += 1;
  }

  /** Retries the events not decrypted yet; records those past the grace time as undecryptable. */
  private async retryDecryption(now: number): Promise<void> {
    if (this.roomCrypto === null) return;
    for (const [eventId, p] of [...this.pendingDecryption]) {
      const result = await this.roomCrypto.decrypt(p.roomId, p.ev);
      if (result.ok) {
        this.pendingDecryption.delete(eventId);
        this.log.info({ room: p.roomId, event: eventId }, "decrypted an event on retry");
        await this.ingestEvent(p.roomId, result.event, now);
        continue;
      }
      if (now - p.firstFailedAt < (this.o.decryptGraceMs ?? DEFAULT_DECRYPT_GRACE_MS)) continue;
      this.pendingDecryption.delete(eventId);
      this.undecryptable += 1;
      this.lastUndecryptable = { at: now, sender: String(p.ev.sender), reason: result.reason };
      this.log.warn(
        { room: p.roomId, event: eventId, sender: p.ev.sender, err: result.reason },
        "cannot decrypt an event",
      );
      this.o.onUndecryptable?.(p.roomId, p.ev, result.reason);
      if (typeof p.ev.sender !== "string" || typeof p.ev.origin_server_ts !== "number") continue;
      const sender = p.ev.sender;
      const originServerTs = p.ev.origin_server_ts;
      // The leader asks the sender to send it again (unless another node stored it decrypted first).
      await this.retrying("insert into the inbox", () =>
        this.o.inbox.insertInboxEvent({
          eventId,
          roomId: p.roomId,
          sender,
          originServerTs,
          content: { [INBOX_EVENT_TYPE_KEY]: "m.room.encrypted", [UNDECRYPTABLE_KEY]: result.reason },
          seenBy: this.o.nodeId,
        }),
      );
    }
  }

  /**
   * The events of a gap, oldest first: pages of /messages backwards from the batch's prev_batch,
   * down to the previous sync position, the newest event already in the inbox, or the command window.
   */
  private async backfill(
    roomId: string,
    prevBatch: string,
    since: string | null,
    now: number,
  ): Promise<TimelineEvent[]> {
    const latest = await this.retrying("read the newest inbox event", () =>
      this.o.inbox.latestInboxEvent(roomId),
    );
    const windowStart = now - this.o.commandWindowMs;
    const found: TimelineEvent[] = [];
    let from = prevBatch;
    for (let page = 0; page < MAX_BACKFILL_PAGES; page++) {
      let res: Record<string, unknown>;
      try {
        res = await this.retrying("fetch a sync gap", () =>
          this.http.request("GET", `/_matrix/client/v3/rooms/${enc(roomId)}/messages`, {
            query: {
              dir: "b",
              from,
              to: since ?? undefined,
              limit: BACKFILL_PAGE_SIZE,
              filter: JSON.stringify({
                types: ["m.room.message", "m.reaction", "m.room.encrypted"],
                lazy_load_members: true,
              }),
            },
          }),
        );
      } catch (e) {
        if (!(e instanceof MatrixRequestError || e instanceof ResponseTooLargeError)) throw e;
        this.log.warn({ room: roomId, err: e.message }, "cannot fetch a sync gap; its commands are lost");
        return found.reverse();
      }
      const chunk = list(res["chunk"]);
      for (const ev of chunk) {
        if (latest !== null && ev.event_id === latest.eventId) return found.reverse();
        if (typeof ev.origin_server_ts === "number" && ev.origin_server_ts < windowStart)
          return found.reverse();
        found.push(ev);
      }
      if (chunk.length === 0 || typeof res["end"] !== "string") return found.reverse();
      from = res["end"];
    }
    this.log.warn(
      { room: roomId, events: found.length },
      "a sync gap is longer than backfill reads; older commands in it are not fetched",
    );
    return found.reverse();
  }

  private async onInvite(roomId: string, invite: unknown): Promise<void> {
    const inviter = list(obj(obj(invite)["invite_state"])["events"]).find(
      (e) => e.type === "m.room.member" && e.state_key === this.o.userId,
    )?.sender;
    try {
      if (this.rooms.has(roomId)) {
        await this.http.request("POST", `/_matrix/client/v3/join/${enc(roomId)}`, { body: {} });
        this.log.info({ room: roomId, inviter }, "accepted the invite to a configured room");
        await this.checkEncryption(roomId);
      } else {
        await this.http.request("POST", `/_matrix/client/v3/rooms/${enc(roomId)}/leave`, {
          body: { reason: "dagbot only joins the rooms in its config" },
        });
        this.log.info({ room: roomId, inviter }, "declined an invite to a room not in the config");
      }
    } catch (e) {
      // One bad invite must not hold up the commands of the batch.
      this.log.warn({ room: roomId, err: String(e) }, "could not answer an invite");
    }
  }

  /**
   * Runs `fn` until it succeeds. Store failures and network errors wait and retry (the sync must not
   * move past a batch that is not stored); a homeserver's refusal (4xx) and other errors end it.
   */
  private async retrying<T>(what: string, fn: () => Promise<T>, retryAnyError = false): Promise<T> {
    for (let failures = 0; ; failures++) {
      if (this.stopping.signal.aborted) throw new Error(`intake stopped during: ${what}`);
      try {
        return await fn();
      } catch (e) {
        const refused =
          e instanceof MatrixRequestError && e.status >= 400 && e.status < 500 && e.status !== 429;
        if (refused || e instanceof IntakeConfigError) throw e;
        const transient =
          retryAnyError || e instanceof StoreError || e instanceof MatrixRequestError || isNetworkError(e);
        if (!transient) throw e;
        const delay = backoffMs(INTAKE_BACKOFF, failures);
        this.log.warn({ err: String(e), retryInMs: delay }, `${what} failed`);
        // The listener goes when the wait ends either way: a long outage retries many times.
        await new Promise<void>((resolve) => {
          const done = (): void => {
            clearTimeout(timer);
            this.stopping.signal.removeEventListener("abort", done);
            resolve();
          };
          const timer = setTimeout(done, delay);
          this.stopping.signal.addEventListener("abort", done, { once: true });
        });
      }
    }
  }
}

/** The node's Matrix settings are wrong (not a passing failure): starting again will not help. */
export class IntakeConfigError extends Error {
  override readonly name = "IntakeConfigError";
}

function isNetworkError(e: unknown): boolean {
  if (e instanceof TypeError) return true; // fetch: "fetch failed"
  return e instanceof Error && (e.name === "TimeoutError" || e.name === "AbortError");
}
