/**
 * The PermissionOracle for Matrix rooms: a sender's power level from the room's m.room.power_levels
 * (users[id] ?? users_default ?? 0, as the spec defines it) plus the config's allowlist, and the
 * level that owns the room (the one its power levels need to change). The state is
 * cached per room; intake drops a room's entry as soon as its sync sees a power-levels change, and
 * an entry older than maxAgeMs is fetched again, so a level that changed just before a command is
 * not missed while this node's own sync lags behind another node's.
 */
import type { PermissionOracle, SenderStanding } from "../../ports/permissions.js";
import { enc, isNotFound, type MatrixHttp } from "./http.js";

export interface PowerLevelOracleOptions {
  http: MatrixHttp;
  allowlist: readonly string[];
  /** How long a fetched state is trusted without a change seen in sync. Default 1 s. */
  maxAgeMs?: number;
  now?: () => number;
}

interface Cached {
  /** Null: the room has no m.room.power_levels event. */
  content: Record<string, unknown> | null;
  at: number;
}

/** The level the content gives a user: users[id], else users_default, else 0. */
export function powerLevelOf(content: Record<string, unknown>, userId: string): number {
  const users = content["users"];
  const explicit =
    users !== null && typeof users === "object" ? (users as Record<string, unknown>)[userId] : undefined;
  if (typeof explicit === "number" && Number.isFinite(explicit)) return explicit;
  const fallback = content["users_default"];
  return typeof fallback === "number" && Number.isFinite(fallback) ? fallback : 0;
}

/**
 * The level the content requires to change the power levels themselves (who owns the room):
 * events["m.room.power_levels"], else state_default, else 50, as the spec defines them. A room
 * without the event (null) lets anyone change its state: 0, as the spec's state_default is then.
 */
export function adminLevelOf(content: Record<string, unknown> | null): number {
  if (content === null) return 0;
  const events = content["events"];
  const explicit =
    events !== null && typeof events === "object"
      ? (events as Record<string, unknown>)["m.room.power_levels"]
      : undefined;
  if (typeof explicit === "number" && Number.isFinite(explicit)) return explicit;
  const fallback = content["state_default"];
  return typeof fallback === "number" && Number.isFinite(fallback) ? fallback : 50;
}

export class PowerLevelOracle implements PermissionOracle {
  private readonly cache = new Map<string, Cached>();
  private readonly inflight = new Map<string, Promise<Record<string, unknown> | null>>();
  /** Bumped by invalidate(): a fetch that started before a change must not refill the cache. */
  private generation = 0;
  private readonly maxAgeMs: number;
  private readonly now: () => number;

  constructor(private readonly options: PowerLevelOracleOptions) {
    this.maxAgeMs = options.maxAgeMs ?? 1_000;
    this.now = options.now ?? Date.now;
  }

  /** Forget a room's state: intake calls this when its sync sees m.room.power_levels change. */
  invalidate(roomId: string): void {
    this.generation += 1;
    this.cache.delete(roomId);
    this.inflight.delete(roomId);
  }

  /** The users the room's power levels list at or above `level` (those a gate's message mentions). */
  async membersAtLevel(roomId: string, level: number): Promise<string[]> {
    const users = (await this.powerLevels(roomId))?.["users"];
    if (users === null || typeof users !== "object") return [];
    return Object.entries(users as Record<string, unknown>)
      .filter(([, v]) => typeof v === "number" && v >= level)
      .map(([u]) => u)
      .sort();
  }

  async standing(roomId: string, userId: string): Promise<SenderStanding> {
    const content = await this.powerLevels(roomId);
    return {
      kind: "room-member",
      powerLevel: powerLevelOf(content ?? {}, userId),
      allowlisted: this.options.allowlist.includes(userId),
      adminLevel: adminLevelOf(content),
    };
  }

  private async powerLevels(roomId: string): Promise<Record<string, unknown> | null> {
    const cached = this.cache.get(roomId);
    if (cached !== undefined && this.now() - cached.at <= this.maxAgeMs) return cached.content;
    // Concurrent asks for one room share a request.
    let pending = this.inflight.get(roomId);
    if (pending === undefined) {
      const started = this.now();
      const generation = this.generation;
      const request = this.fetch(roomId)
        .then((content) => {
          if (generation === this.generation) this.cache.set(roomId, { content, at: started });
          return content;
        })
        .finally(() => {
          if (this.inflight.get(roomId) === request) this.inflight.delete(roomId);
        });
      pending = request;
      this.inflight.set(roomId, request);
    }
    return pending;
  }

  private async fetch(roomId: string): Promise<Record<string, unknown> | null> {
    try {
      return await this.options.http.request(
        "GET",
        `/_matrix/client/v3/rooms/${enc(roomId)}/state/m.room.power_levels/`,
      );
    } catch (e) {
      // A room without the event: everyone stands at the spec's default, 0.
      if (isNotFound(e)) return null;
      throw e;
    }
  }
}
