/**
 * The set-up of a chat e2e file: one Synapse, people registered and joined to one room at their
 * power levels, a BotFleet of real `dagbot start` processes in it, the fleet's SQLite store open, and
 * the room's creator (the first person) syncing. A failed test keeps the fleet's folder and prints
 * the tails of its logs; after the file, everything stops.
 */
import { afterAll, afterEach, beforeAll } from "vitest";
import { openSqliteStore } from "../../src/adapters/sqlite/index.js";
import type { Store } from "../../src/ports/store.js";
import { bodyOf, replyTo } from "./bot-chat.js";
import { BotFleet, type FleetOptions } from "./bot-fleet.js";
import { useSynapse } from "./matrix-fixture.js";
import { MatrixUser } from "./matrix-user.js";
import type { RegisteredUser, StartSynapseOptions, SynapseHandle } from "./synapse.js";

export interface PersonOptions {
  /** The account's localpart on the homeserver. */
  localpart: string;
  /** Power level in the room; unset leaves Synapse's default (100 for the creator, 0 for the others). */
  power?: number;
}

type FleetPart = Omit<FleetOptions, "hs" | "rooms" | "bots">;

export interface RoomWithPeopleOptions<P extends string> {
  synapse?: StartSynapseOptions;
  /**
   * The people by the name the tests use, registered in this order; the first creates the room and
   * syncs (say() reads the replies through them), the others are invited and join.
   */
  people: Record<P, PersonOptions>;
  /**
   * The bot accounts, registered before the people: `<prefix>1..count` with devices
   * `<PREFIX>1..count`, or a function that registers them (e.g. devices of one account).
   */
  bots: { prefix: string; count?: number } | ((hs: SynapseHandle) => Promise<RegisteredUser[]>);
  /** The bots' power level in the room; unset leaves them at 0. */
  botPower?: number;
  roomName: string;
  /**
   * Runs once everyone has joined, before the fleet starts; the rooms it returns are configured on
   * every node after the room.
   */
  beforeFleet?: (room: {
    hs: SynapseHandle;
    roomId: string;
    bots: RegisteredUser[];
    people: Record<P, MatrixUser>;
  }) => Promise<string[] | void>;
  /**
   * The fleet's config, [matrix] section and library (hs, rooms and bots are the fixture's), or a
   * function of the people's user ids that returns them (for auto_confirm lists).
   */
  fleet?: FleetPart | ((userIds: Record<P, string>) => FleetPart);
  /** Start every node (default), or only the first (the other bots are configured, never started). */
  start?: "all" | "first";
  /** Lines of each node's log printed when a test fails. */
  tailLines?: number;
  /** How long say() waits for the bot's reply. Default 30 s. */
  replyTimeoutMs?: number;
}

export interface RoomWithPeople<P extends string> {
  readonly hs: SynapseHandle;
  readonly roomId: string;
  readonly bots: RegisteredUser[];
  readonly people: Record<P, MatrixUser>;
  readonly fleet: BotFleet;
  readonly store: Store;
  /** Sends `text` as `user` and returns the body of the bot's reply to it. */
  say(user: MatrixUser, text: string, what: string): Promise<string>;
}

interface Parts<P extends string> {
  roomId: string;
  bots: RegisteredUser[];
  people: Record<P, MatrixUser>;
  fleet: BotFleet;
  store: Store;
}

export function useRoomWithPeople<P extends string>(o: RoomWithPeopleOptions<P>): RoomWithPeople<P> {
  const fx = useSynapse(o.synapse);
  let parts: Partial<Parts<P>> = {};
  let creator: MatrixUser | undefined;
  const T = o.replyTimeoutMs ?? 30_000;

  beforeAll(async () => {
    const { hs } = fx;
    const spec = o.bots;
    const bots: RegisteredUser[] = [];
    if (typeof spec === "function") bots.push(...(await spec(hs)));
    else
      for (let n = 1; n <= (spec.count ?? 1); n++)
        bots.push(
          await hs.registerUser(`${spec.prefix}${n}`, { deviceId: `${spec.prefix.toUpperCase()}${n}` }),
        );
    // Devices of one account share its user id: each account is invited once.
    const botIds = [...new Set(bots.map((b) => b.userId))];
    const entries = Object.entries(o.people) as [P, PersonOptions][];
    const accounts: RegisteredUser[] = [];
    for (const [, p] of entries) accounts.push(await hs.registerUser(p.localpart));
    const users = accounts.map((a) => new MatrixUser(hs.url, a));
    const levels: Record<string, number> = {};
    entries.forEach(([, p], i) => {
      if (p.power !== undefined) levels[accounts[i]!.userId] = p.power;
    });
    if (o.botPower !== undefined) for (const id of botIds) levels[id] = o.botPower;
    const roomId = await hs.createRoom(accounts[0]!.accessToken, {
      name: o.roomName,
      invite: [...botIds, ...accounts.slice(1).map((a) => a.userId)],
      ...(Object.keys(levels).length > 0 ? { powerLevels: { users: levels } } : {}),
    });
    for (const u of users.slice(1)) await u.joinRoom(roomId);
    const people = Object.fromEntries(entries.map(([name], i) => [name, users[i]])) as Record<P, MatrixUser>;
    const more = (await o.beforeFleet?.({ hs, roomId, bots, people })) ?? [];
    creator = users[0];
    const userIds = Object.fromEntries(entries.map(([name], i) => [name, accounts[i]!.userId])) as Record<
      P,
      string
    >;
    const fleetPart = typeof o.fleet === "function" ? o.fleet(userIds) : o.fleet;
    const fleet = new BotFleet({ ...fleetPart, hs, bots, rooms: [roomId, ...more] });
    parts = { roomId, bots, people, fleet };
    if (o.start === "first") await fleet.start(0);
    else await fleet.startAll();
    parts.store = await openSqliteStore(fleet.storePath);
    creator!.startSync();
  }, 120_000);

  afterEach((ctx) => {
    if (ctx.task.result?.state === "fail") {
      parts.fleet?.keepDir();
      console.error(parts.fleet?.tails(o.tailLines));
    }
  });

  afterAll(async () => {
    await creator?.stopSync();
    await parts.store?.close();
    await parts.fleet?.dispose();
  });

  const get = <K extends keyof Parts<P>>(key: K): Parts<P>[K] => {
    const value = parts[key];
    if (value === undefined)
      throw new Error(`the room is not set up: use room.${key} inside tests or later hooks`);
    return value as Parts<P>[K];
  };

  return {
    get hs() {
      return fx.hs;
    },
    get roomId() {
      return get("roomId");
    },
    get bots() {
      return get("bots");
    },
    get people() {
      return get("people");
    },
    get fleet() {
      return get("fleet");
    },
    get store() {
      return get("store");
    },
    async say(user, text, what) {
      const sent = await user.sendText(get("roomId"), text);
      return bodyOf(await creator!.waitFor(replyTo(sent), T, what));
    },
  };
}
